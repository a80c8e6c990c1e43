#!/usr/bin/env bash
# Installs the Debian packages the tests run for real, if they are missing: nginx (the
# JWKS and secret-consistency tests serve generated configs with it), openssl, and
# prometheus (its promtool tests the alerts).
set -euo pipefail
need=()
[ -x /usr/sbin/nginx ] || command -v nginx >/dev/null 2>&1 || need+=(nginx)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
# promtool tests the alerts (test/monitoring); Debian ships it in the prometheus package.
[ -x /usr/bin/promtool ] || command -v promtool >/dev/null 2>&1 || need+=(prometheus)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "tests need: ${need[*]}; install them (sudo apt-get install ${need[*]}) and run again" >&2
  exit 1
fi
echo "installing ${need[*]} for the tests" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# The package starts a system nginx on port 80; the tests start their own.
if command -v systemctl >/dev/null 2>&1; then systemctl stop nginx >/dev/null 2>&1 || true; fi
nginx -s stop >/dev/null 2>&1 || true
# The prometheus package starts a system Prometheus on port 9090; the tests need only promtool.
if command -v systemctl >/dev/null 2>&1; then systemctl stop prometheus >/dev/null 2>&1 || true; fi
