#!/usr/bin/env bash
# Builds Karpenter's kwok cloud provider (sigs.k8s.io/karpenter/kwok) from the Go module proxy
# into the tools cache as karpenter-kwok (its package name would collide with kwok's binary), for
# the targets that run Karpenter only; copies its CRDs (kwok/charts/crds and the KWOKNodeClass)
# beside it. Prints the bin directory on stdout. Rebuilds only when the KARPENTER_ pins of
# tools/peers.env or this script change.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
# shellcheck source=peers.env
source "$here/peers.env"

cache="${COMPACTOR_TOOLS_CACHE:-$root/.cache/tools}"
key="karpenter-$( (grep '^KARPENTER_' "$here/peers.env"; cat "$here/build-karpenter.sh") \
  | sha256sum | cut -c1-16)"
out="$cache/$key"
bin="$out/bin"
if [[ -x "$bin/karpenter-kwok" && -d "$out/crds/karpenter" ]]; then
  echo "$bin"
  exit 0
fi
command -v go >/dev/null 2>&1 || { echo "error: Go is not installed (need go >= 1.26.6)" >&2; exit 2; }

mkdir -p "$bin" "$out/src"
log="$out/build.log"
echo "building karpenter-kwok $KARPENTER_VERSION into $out (log: $log)" >&2
export GOFLAGS="${GOFLAGS:-} -mod=mod -buildvcs=false"
export CGO_ENABLED=0

# Karpenter binds its metrics and health endpoints on every address (":<port>", no flag to
# change it): the build patches those two lines of a copy of the module to loopback, and checks
# that both changed. The module has no replace lines, so its own go.mod and go.sum build it.
dir="$(cd "$out/src" && go mod download -json "sigs.k8s.io/karpenter@$KARPENTER_VERSION" \
  2>>"$log" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -n "$dir" && -f "$dir/go.mod" ]] || { echo "error: cannot download karpenter; see $log" >&2; exit 1; }
rm -rf "$out/src/karpenter"
cp -r "$dir" "$out/src/karpenter"
chmod -R u+w "$out/src/karpenter"
operator="$out/src/karpenter/pkg/operator/operator.go"
sed -i 's/fmt\.Sprintf(":%d", options\.FromContext(ctx)\.\(MetricsPort\|HealthProbePort\))/fmt.Sprintf("127.0.0.1:%d", options.FromContext(ctx).\1)/' "$operator"
[[ "$(grep -c '"127.0.0.1:%d"' "$operator")" == 2 ]] || {
  echo "error: $operator no longer binds as this script expects; update the patch" >&2; exit 1; }
(cd "$out/src/karpenter" \
  && go build -trimpath -ldflags="-s -w" -o "$bin/karpenter-kwok.tmp" ./kwok >>"$log" 2>&1) || {
  echo "error: building karpenter-kwok failed; last lines of $log:" >&2
  tail -30 "$log" >&2
  exit 1
}
mv "$bin/karpenter-kwok.tmp" "$bin/karpenter-kwok"
mkdir -p "$out/crds/karpenter"
cp "$dir"/kwok/charts/crds/*.yaml "$dir"/kwok/apis/crds/*.yaml "$out/crds/karpenter/"
chmod -R u+w "$out/crds/karpenter"
echo "  built karpenter-kwok" >&2
echo "$bin"
