#!/usr/bin/env bash
# The Go tests of make test; arguments are go test flags. test/node and test/samples each
# run the machine's one real node (internal/localnode holds a machine-wide lock), so they
# must not overlap: test/node, which spends most of its 25 minutes waiting for the
# kubelet's pod-certificate refresh and overdue warning, starts first, beside every other
# package; test/samples runs once both are done. Exits non-zero if any of the three did.
set -uo pipefail
cd "$(dirname "$0")/.."
node_log=$(mktemp)
trap 'rm -f "$node_log"' EXIT

go test "$@" ./test/node >"$node_log" 2>&1 &
node_pid=$!
# shellcheck disable=SC2046 # one argument per package
go test "$@" $(go list ./... | grep -v -e '/test/node$' -e '/test/samples$')
rest=$?
wait "$node_pid"
node=$?
cat "$node_log"
go test "$@" ./test/samples
samples=$?
[ "$rest" = 0 ] && [ "$node" = 0 ] && [ "$samples" = 0 ]
