#!/usr/bin/env bash
# Runs every native Go fuzz target of the module (a func Fuzz* in a _test.go file) for
# the given time each: `make fuzz` (FUZZTIME, default 1m), and a few seconds each in
# `make test`. The seed corpus (f.Add and testdata/fuzz/<target>/) also runs in every
# plain `go test`. An input that fails is written to testdata/fuzz/<target>/ in its
# package: fix the code and keep the file, so that the input is checked from then on.
set -euo pipefail
fuzztime="${1:-1m}"
targets=$(grep -rH --include='*_test.go' --exclude-dir=bin --exclude-dir=k8speers --exclude-dir=.local -o '^func Fuzz[A-Za-z0-9_]*' . | sort)
if [ -z "$targets" ]; then
  echo "fuzz: no fuzz targets found" >&2
  exit 1
fi
while IFS=: read -r file fn; do
  pkg="./$(dirname "${file#./}")"
  target="${fn#func }"
  echo "fuzz: $pkg $target for $fuzztime"
  go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime"
done <<< "$targets"
