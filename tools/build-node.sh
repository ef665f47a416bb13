#!/usr/bin/env bash
# Builds what one real node runs (kubelet, containerd, ctr, the runc shim, runc and the CNI
# plugins bridge, host-local and loopback), and kustomize to install Compactor on it as its users
# do, from the Go module proxy into a cache of its own,
# beside tools/build.sh's (so a change here never rebuilds the control plane).
# Prints the bin directory on stdout; the CNI plugins are in its sibling cni/.
# Rebuilds only when the pins or this script change.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
# shellcheck source=versions.env
source "$here/versions.env"

cache="${COMPACTOR_TOOLS_CACHE:-$root/.cache/tools}"
key="$(cat "$here/versions.env" "$here/build-node.sh" | sha256sum | cut -c1-16)"
out="$cache/node-$key"
bin="$out/bin"
cni="$out/cni"

need=(kubelet containerd ctr containerd-shim-runc-v2 runc kustomize)
plugins=(bridge host-local loopback)
complete=1
for b in "${need[@]}"; do [[ -x "$bin/$b" ]] || complete=0; done
for p in "${plugins[@]}"; do [[ -x "$cni/$p" ]] || complete=0; done
if [[ $complete == 1 ]]; then
  echo "$bin"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "error: Go is not installed; the node is built from Go modules (need go >= 1.26)" >&2
  exit 2
fi
gover="$(go env GOVERSION)"
if [[ "$(printf '%s\n' go1.26 "$gover" | sort -V | head -1)" != go1.26 ]]; then
  echo "error: $gover is too old; need go >= 1.26 (set GOTOOLCHAIN if your proxy serves newer toolchains)" >&2
  exit 2
fi
if ! command -v gcc >/dev/null 2>&1; then
  echo "error: runc needs cgo: install a C compiler (gcc) and the C library headers" >&2
  exit 2
fi
# runc with seccomp: the kubelet asks for RuntimeDefault on every Pod sandbox, which a runc
# built without it refuses ("seccomp not supported"). libseccomp's headers are a Debian package.
if [[ ! -f /usr/include/seccomp.h ]]; then
  if [[ $EUID == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "installing libseccomp-dev from Debian's packages (runc links it)" >&2
    apt-get install -y -q --no-install-recommends libseccomp-dev >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null 2>&1 || true; apt-get install -y -q --no-install-recommends libseccomp-dev >/dev/null 2>&1; } ||
      { echo "error: apt-get cannot install libseccomp-dev, which runc needs" >&2; exit 2; }
  else
    echo "error: runc needs libseccomp's headers: install libseccomp-dev (or your system's equivalent)" >&2
    exit 2
  fi
fi
if ! go list -m -versions "github.com/containerd/containerd/v2" >/dev/null 2>&1; then
  echo "error: the Go module proxy ($(go env GOPROXY)) cannot be reached; cannot build the node" >&2
  exit 2
fi

mkdir -p "$bin" "$cni" "$out/src"
log="$out/build.log"
echo "building the node (kubelet, containerd, runc, CNI plugins) into $out (log: $log)" >&2
export GOFLAGS="${GOFLAGS:-} -mod=mod -buildvcs=false"

# module <dir> <require/replace block>
module() {
  mkdir -p "$out/src/$1"
  printf 'module compactor.dev/tools/node-%s\n\ngo 1.26.0\n\n%s\n' "$1" "$2" >"$out/src/$1/go.mod"
}

build() { # build <dir> <pkg@version> <destination> [extra ldflags] [build tags] [cgo 0|1]
  local dir="$1" pkg="$2" dest="$3" ldflags="-s ${4:-}" tags="${5:-}" cgo="${6:-0}"
  (cd "$out/src/$dir" && go get "$pkg" >>"$log" 2>&1 &&
    CGO_ENABLED="$cgo" go build -trimpath -tags="$tags" -ldflags="$ldflags" -o "$dest.tmp" \
      "${pkg%@*}" >>"$log" 2>&1) || {
    echo "error: building $(basename "$dest") failed; last lines of $log:" >&2
    tail -30 "$log" >&2
    exit 1
  }
  mv "$dest.tmp" "$dest"
  echo "  built $(basename "$dest")" >&2
}

# kubelet: the same staging replaces and version stamp as tools/build.sh's control plane.
staging=(api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
  cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api
  cri-client cri-streaming csi-translation-lib dynamic-resource-allocation endpointslice externaljwt
  kms kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics
  mount-utils pod-security-admission sample-apiserver streaming)
replaces=""
for m in "${staging[@]}"; do replaces+=$'\t'"k8s.io/$m => k8s.io/$m $KUBERNETES_STAGING_VERSION"$'\n'; done
module kube "require k8s.io/kubernetes $KUBERNETES_VERSION

replace (
$replaces)"
minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
kver="-X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION"
kver+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
kver+=" -X k8s.io/component-base/version.gitTreeState=clean"
build kube "k8s.io/kubernetes/cmd/kubelet@$KUBERNETES_VERSION" "$bin/kubelet" "$kver"

# containerd without cgo; no_btrfs leaves out the btrfs snapshotter (it needs C headers).
module containerd "require github.com/containerd/containerd/v2 $CONTAINERD_VERSION"
cver="-X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
cver+=" -X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2"
for c in containerd ctr containerd-shim-runc-v2; do
  build containerd "github.com/containerd/containerd/v2/cmd/$c@$CONTAINERD_VERSION" "$bin/$c" \
    "$cver" no_btrfs
done

# runc needs cgo (libcontainer/nsenter is C) and, with the seccomp tag, libseccomp.
module runc "require github.com/opencontainers/runc $RUNC_VERSION"
build runc "github.com/opencontainers/runc@$RUNC_VERSION" "$bin/runc" \
  "-X main.version=${RUNC_VERSION#v}" seccomp 1

module cni "require github.com/containernetworking/plugins $CNI_PLUGINS_VERSION"
for p in main/bridge ipam/host-local main/loopback; do
  build cni "github.com/containernetworking/plugins/plugins/$p@$CNI_PLUGINS_VERSION" \
    "$cni/$(basename "$p")" \
    "-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS_VERSION"
done

# kustomize: `kustomize edit set image`, as docs/install.md tells users to set the image.
module kustomize "require sigs.k8s.io/kustomize/kustomize/v5 $KUSTOMIZE_VERSION"
build kustomize "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION" "$bin/kustomize"

echo "$bin"
