#!/usr/bin/env bash
# Installs the Debian packages a real node needs (make run's sample-node, test/node):
# containerd (with ctr), runc, the CNI plugins, iptables and iproute2, and nginx for the
# jwks-nginx image. Exits non-zero with one line when this machine cannot run a node.
set -euo pipefail
if [ "$(uname -s)" != Linux ]; then echo "no real node: this is $(uname -s), not Linux" >&2; exit 1; fi
need=()
command -v containerd >/dev/null 2>&1 || need+=(containerd)
command -v runc >/dev/null 2>&1 || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v conntrack >/dev/null 2>&1 || need+=(conntrack)
[ -x /usr/sbin/nginx ] || need+=(nginx)
[ -f /etc/ssl/certs/ca-certificates.crt ] || need+=(ca-certificates)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "no real node: it needs root, and ${need[*]} (sudo apt-get install ${need[*]})" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then echo "no real node: install ${need[*]}" >&2; exit 1; fi
echo "installing ${need[*]} for the node" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# The nginx package starts a system nginx on port 80; the node runs nginx in pods.
nginx -s stop >/dev/null 2>&1 || true
