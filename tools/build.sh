#!/usr/bin/env bash
# Builds the local control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, etcd, kwok, descheduler) and the ecosystem tools the tests
# drive (helm, prometheus, promtool) from the Go module proxy into a cache, and our
# descheduler-policycheck (tools/policycheck), which loads a policy with the descheduler's types.
# Prints the bin directory on stdout. Rebuilds only when the pins change.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
# shellcheck source=versions.env
source "$here/versions.env"

cache="${COMPACTOR_TOOLS_CACHE:-$root/.cache/tools}"
key="$(cat "$here/versions.env" "$here/build.sh" "$here/policycheck/main.go" | sha256sum | cut -c1-16)"
out="$cache/$key"
bin="$out/bin"

need=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok descheduler
  descheduler-policycheck helm prometheus promtool)
# CRDs the chart's optional objects need (ServiceMonitor, PrometheusRule; cert-manager's
# Certificate and Issuer), so tests install those objects against the real schemas.
crds=(prometheus-operator/monitoring.coreos.com_servicemonitors.yaml
  prometheus-operator/monitoring.coreos.com_prometheusrules.yaml
  cert-manager/cert-manager.io_certificates.yaml cert-manager/cert-manager.io_issuers.yaml)
complete=1
for b in "${need[@]}"; do [[ -x "$bin/$b" ]] || complete=0; done
for c in "${crds[@]}"; do [[ -f "$out/crds/$c" ]] || complete=0; done
if [[ $complete == 1 ]]; then
  echo "$bin"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "error: Go is not installed; the local control plane is built from Go modules (need go >= 1.26)" >&2
  exit 2
fi
gover="$(go env GOVERSION)"
if [[ "$(printf '%s\n' go1.26 "$gover" | sort -V | head -1)" != go1.26 ]]; then
  echo "error: $gover is too old; need go >= 1.26 (set GOTOOLCHAIN if your proxy serves newer toolchains)" >&2
  exit 2
fi
if ! go list -m -versions "k8s.io/kubernetes" >/dev/null 2>&1; then
  echo "error: the Go module proxy ($(go env GOPROXY)) cannot be reached; cannot build the control plane" >&2
  exit 2
fi

mkdir -p "$bin" "$out/src"
log="$out/build.log"
echo "building control plane tools into $out (log: $log); the first build takes a while" >&2
export GOFLAGS="${GOFLAGS:-} -mod=mod -buildvcs=false"
export CGO_ENABLED=0

# module <dir> <module-path> <require/replace block>
module() {
  mkdir -p "$out/src/$1"
  printf 'module compactor.dev/tools/%s\n\ngo 1.26.0\n\n%s\n' "$1" "$2" >"$out/src/$1/go.mod"
}

build() { # build <dir> <pkg@version> <binary-name> [extra ldflags] [build tags]
  local dir="$1" pkg="$2" name="$3" ldflags="-s ${4:-}" tags="${5:-}"
  (cd "$out/src/$dir" && go get "$pkg" >>"$log" 2>&1 && go build -trimpath -tags="$tags" -ldflags="$ldflags" -o "$bin/$name.tmp" "${pkg%@*}" >>"$log" 2>&1) || {
    echo "error: building $name failed; last lines of $log:" >&2
    tail -30 "$log" >&2
    exit 1
  }
  mv "$bin/$name.tmp" "$bin/$name"
  echo "  built $name" >&2
}

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
# Stamp the release into the binaries (as the upstream build does), so /version reports it.
minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
kver="-X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION"
kver+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
kver+=" -X k8s.io/component-base/version.gitTreeState=clean"
for c in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  build kube "k8s.io/kubernetes/cmd/$c@$KUBERNETES_VERSION" "$c" "$kver"
done

module etcd "require go.etcd.io/etcd/server/v3 $ETCD_VERSION

replace (
	go.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/pkg/v3 => go.etcd.io/etcd/client/pkg/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/v3 => go.etcd.io/etcd/client/v3 $ETCD_VERSION
	go.etcd.io/etcd/pkg/v3 => go.etcd.io/etcd/pkg/v3 $ETCD_VERSION
)"
build etcd "go.etcd.io/etcd/server/v3@$ETCD_VERSION" etcd

module kwok "require sigs.k8s.io/kwok $KWOK_VERSION"
build kwok "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" kwok

module descheduler "require sigs.k8s.io/descheduler $DESCHEDULER_VERSION

replace k8s.io/kube-openapi => k8s.io/kube-openapi v0.0.0-20260512234627-ef417d054102"
build descheduler "sigs.k8s.io/descheduler/cmd/descheduler@$DESCHEDULER_VERSION" descheduler
mkdir -p "$out/src/descheduler/policycheck"
cp "$here/policycheck/main.go" "$out/src/descheduler/policycheck/main.go"
(cd "$out/src/descheduler" && go build -trimpath -ldflags=-s -o "$bin/descheduler-policycheck.tmp" \
  ./policycheck >>"$log" 2>&1) || {
  echo "error: building descheduler-policycheck failed; last lines of $log:" >&2
  tail -30 "$log" >&2
  exit 1
}
mv "$bin/descheduler-policycheck.tmp" "$bin/descheduler-policycheck"
echo "  built descheduler-policycheck" >&2

module helm "require helm.sh/helm/v4 $HELM_VERSION"
build helm "helm.sh/helm/v4/cmd/helm@$HELM_VERSION" helm \
  "-X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean"

# Static scrape configs only: remove_all_sd leaves out the cloud service-discovery plugins
# (and their SDKs), which the tests never use; the web UI's assets are not embedded either.
module prometheus "require github.com/prometheus/prometheus $PROMETHEUS_VERSION"
pver="-X github.com/prometheus/common/version.Version=$PROMETHEUS_RELEASE"
pver+=" -X github.com/prometheus/common/version.Branch=release"
for c in prometheus promtool; do
  build prometheus "github.com/prometheus/prometheus/cmd/$c@$PROMETHEUS_VERSION" "$c" "$pver" remove_all_sd
done

# Plain CRD files shipped inside the projects' Go modules (nothing is built from these).
crd_files() { # crd_files <module@version> <folder in the module> <destination>
  local dir
  dir="$(cd "$out" && go mod download -json "$1" 2>>"$log" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -n "$dir" && -d "$dir/$2" ]] || {
    echo "error: no $2 in module $1; last lines of $log:" >&2
    tail -10 "$log" >&2
    exit 1
  }
  mkdir -p "$out/crds/$3"
  cp "$dir/$2"/*.yaml "$out/crds/$3/"
  chmod u+w "$out/crds/$3"/*.yaml
  echo "  copied the $3 CRDs" >&2
}
crd_files "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" \
  example/prometheus-operator-crd prometheus-operator
crd_files "github.com/cert-manager/cert-manager@$CERT_MANAGER_VERSION" deploy/crds cert-manager

echo "$bin"
