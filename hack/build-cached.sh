#!/usr/bin/env bash
# Builds Go commands from one of the hack/ modules into an output folder, once: the build is
# skipped while the recipe is unchanged: the Go version, the module's go.mod/go.sum (and so
# every pinned version), when the module has an ldflags.sh, the -ldflags it prints and,
# when it holds commands of its own under cmd/ (test/k8speers), their Go files.
# (A tool that loads packages must be built by the Go that builds them: one built by an
# older Go refuses files that need the newer one.)
# Usage: hack/build-cached.sh MODULE_DIR OUT_DIR PACKAGE...
set -euo pipefail
module_dir=$1 out_dir=$2
shift 2
stamp="$out_dir/.built-from"
extra_ldflags=
if [ -f "$module_dir/ldflags.sh" ]; then
  extra_ldflags=$(cd "$module_dir" && bash ./ldflags.sh)
fi
go_version=$(go env GOVERSION)
own_sources=
if [ -d "$module_dir/cmd" ]; then
  own_sources=$(cd "$module_dir" && find cmd -name '*.go' ! -name '*_test.go' -print0 | sort -z | xargs -0 sha256sum)
fi
want=$({ echo "$go_version"; cat "$module_dir/go.mod" "$module_dir/go.sum"; [ -z "$extra_ldflags" ] || echo "$extra_ldflags"; [ -z "$own_sources" ] || echo "$own_sources"; } | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  missing=0
  for pkg in "$@"; do [ -x "$out_dir/$(basename "$pkg")" ] || missing=1; done
  [ "$missing" = 0 ] && exit 0
fi
mkdir -p "$out_dir"
out_abs=$(cd "$out_dir" && pwd)
echo "building $* into $out_dir (first time takes a few minutes)" >&2
start=$(date +%s)
(cd "$module_dir" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w $extra_ldflags" -o "$out_abs/" "$@")
echo "$want" > "$stamp"
echo "built in $(( $(date +%s) - start ))s" >&2
