#!/usr/bin/env bash
# Builds kube-router (github.com/cloudnativelabs/kube-router/v2) from the Go module proxy into a
# cache of its own, for the real node's NetworkPolicy enforcement: the node runs it with its
# firewall only (no routing, no service proxy), which programs iptables and ipsets. Installs
# Debian's ipset (the userland kube-router calls), pinned, when missing; iptables must be there.
# Prints the bin directory on stdout. Rebuilds only when the KUBE_ROUTER_ pin or this script
# change, so another pin's change never rebuilds it (and this never rebuilds the node).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
# shellcheck source=versions.env
source "$here/versions.env"

fail() { echo "error: $*" >&2; exit 2; }

# ipset and iptables are the node's userland, checked on every call (the cache holds neither).
if ! command -v ipset >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 ||
    fail "kube-router calls ipset: install ipset $IPSET_DEB_VERSION (or your system's equivalent)"
  [[ $EUID == 0 ]] || fail "ipset is not installed and only root can install it (apt-get install ipset=$IPSET_DEB_VERSION)"
  echo "installing ipset=$IPSET_DEB_VERSION from Debian's packages (kube-router calls it)" >&2
  apt-get install -y -q --no-install-recommends "ipset=$IPSET_DEB_VERSION" >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null 2>&1 || true
      apt-get install -y -q --no-install-recommends "ipset=$IPSET_DEB_VERSION" >/dev/null 2>&1; } ||
    fail "apt-get cannot install ipset=$IPSET_DEB_VERSION (pinned in tools/versions.env)"
fi
for cmd in iptables iptables-save iptables-restore; do
  command -v "$cmd" >/dev/null 2>&1 || fail "kube-router calls $cmd: install iptables"
done

cache="${COMPACTOR_TOOLS_CACHE:-$root/.cache/tools}"
key="kube-router-$( (grep '^KUBE_ROUTER_' "$here/versions.env"; cat "$here/build-kube-router.sh") \
  | sha256sum | cut -c1-16)"
out="$cache/$key"
bin="$out/bin"
if [[ -x "$bin/kube-router" ]]; then
  echo "$bin"
  exit 0
fi
command -v go >/dev/null 2>&1 || fail "Go is not installed; kube-router is built from its Go module (need go >= 1.26)"

mkdir -p "$bin" "$out/src"
log="$out/build.log"
echo "building kube-router $KUBE_ROUTER_VERSION into $out (log: $log)" >&2
export GOFLAGS="${GOFLAGS:-} -mod=mod -buildvcs=false"
pkg="github.com/cloudnativelabs/kube-router/v2"
printf 'module compactor.dev/tools/kube-router\n\ngo 1.26.0\n\nrequire %s %s\n' \
  "$pkg" "$KUBE_ROUTER_VERSION" >"$out/src/go.mod"
(cd "$out/src" && go get "$pkg/cmd/kube-router@$KUBE_ROUTER_VERSION" >>"$log" 2>&1 &&
  CGO_ENABLED=0 go build -trimpath -o "$bin/kube-router.tmp" \
    -ldflags="-s -X $pkg/pkg/version.Version=$KUBE_ROUTER_VERSION" \
    "$pkg/cmd/kube-router" >>"$log" 2>&1) || {
  echo "error: building kube-router failed; last lines of $log:" >&2
  tail -30 "$log" >&2
  exit 1
}
mv "$bin/kube-router.tmp" "$bin/kube-router"
echo "  built kube-router" >&2
echo "$bin"
