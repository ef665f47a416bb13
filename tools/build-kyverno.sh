#!/usr/bin/env bash
# Builds Kyverno's admission controller (cmd/kyverno) from the Go module proxy into the tools
# cache, for `make bench-peers` only; copies its CRDs beside it. Prints the bin directory on
# stdout. Rebuilds only when tools/peers.env or this script changes.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
# shellcheck source=peers.env
source "$here/peers.env"

cache="${COMPACTOR_TOOLS_CACHE:-$root/.cache/tools}"
key="peers-$(cat "$here/peers.env" "$here/build-kyverno.sh" | sha256sum | cut -c1-16)"
out="$cache/$key"
bin="$out/bin"
if [[ -x "$bin/kyverno" && -d "$out/crds/kyverno" ]]; then
  echo "$bin"
  exit 0
fi
command -v go >/dev/null 2>&1 || { echo "error: Go is not installed (need go >= 1.26)" >&2; exit 2; }

mkdir -p "$bin" "$out/src/kyverno"
log="$out/build.log"
echo "building kyverno $KYVERNO_VERSION into $out (log: $log)" >&2
export GOFLAGS="${GOFLAGS:-} -mod=mod -buildvcs=false"
export CGO_ENABLED=0

# Kyverno's go.mod replaces pod-security-admission with its fork; a dependency's replace lines
# are ignored, so ours repeats it (read from the module's own go.mod, never guessed).
dir="$(cd "$out/src/kyverno" && go mod download -json "github.com/kyverno/kyverno@$KYVERNO_VERSION" \
  2>>"$log" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -n "$dir" && -f "$dir/go.mod" ]] || { echo "error: cannot download kyverno; see $log" >&2; exit 1; }
replaces="$(sed -n 's/^replace \(.*\)$/\t\1/p' "$dir/go.mod")"
printf 'module compactor.dev/tools/kyverno\n\ngo 1.26.6\n\nrequire github.com/kyverno/kyverno %s\n\nreplace (\n%s\n)\n' \
  "$KYVERNO_VERSION" "$replaces" >"$out/src/kyverno/go.mod"
(cd "$out/src/kyverno" && go get "github.com/kyverno/kyverno/cmd/kyverno@$KYVERNO_VERSION" >>"$log" 2>&1 \
  && go build -trimpath -ldflags="-s -w" -o "$bin/kyverno.tmp" github.com/kyverno/kyverno/cmd/kyverno >>"$log" 2>&1) || {
  echo "error: building kyverno failed; last lines of $log:" >&2
  tail -30 "$log" >&2
  exit 1
}
mv "$bin/kyverno.tmp" "$bin/kyverno"
mkdir -p "$out/crds/kyverno"
find "$dir/config/crds" -name '*.yaml' -exec cp {} "$out/crds/kyverno/" \;
chmod -R u+w "$out/crds/kyverno"
echo "  built kyverno" >&2
echo "$bin"
