#!/usr/bin/env bash
# The policy scan of `make lint`: checkov over deploy/ (the kustomize manifests), the Helm chart
# rendered with its default values and with ci/production-values.yaml, and the objects the
# controller renders at run time (tools/render_components.py). Any failed check fails it; a
# finding accepted by design is skipped on its object, with why (docs/install.md lists them).
# Usage: tools/policy-scan.sh <checkov> <python of the project's venv>
set -euo pipefail

checkov="$1" python="$2"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

helm="$(bash tools/build.sh)/helm"
# helm's cache, config and data in the scratch folder, never the user's.
export HELM_CACHE_HOME="$out/helm/cache" HELM_CONFIG_HOME="$out/helm/config" \
  HELM_DATA_HOME="$out/helm/data"
chart=deploy/helm/compactor
"$helm" template compactor "$chart" -n compactor-system >"$out/chart-default.yaml"
"$helm" template compactor "$chart" -n compactor-system -f "$chart/ci/production-values.yaml" \
  >"$out/chart-production.yaml"
"$python" tools/render_components.py >"$out/controller-objects.yaml"

# --skip-download: no call to checkov's vendor service (offline it would print a traceback;
# the checks are all local), and no update check against PyPI.
export CKV_SKIP_PACKAGE_UPDATE_CHECK=true
status=0
scan() {
  local what="$1"
  shift
  echo "== checkov: $what"
  "$checkov" --framework kubernetes --quiet --compact --skip-download "$@" \
    | sed -e '/^kubernetes scan results:$/d' -e '/^$/d' || status=1
}
scan "deploy/ (the chart's raw templates excepted)" -d deploy --skip-path deploy/helm
scan "the chart, default values" -f "$out/chart-default.yaml"
scan "the chart, ci/production-values.yaml" -f "$out/chart-production.yaml"
scan "the controller's objects for a sample policy" -f "$out/controller-objects.yaml"
exit "$status"
