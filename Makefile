# Two commands for a newcomer: `make test` and `make demo`. Everything else is a step of those.
SHELL := bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo venv tools images node lint typecheck unit integration e2e bench bench-e2e bench-peers chaos clean \
	test-karpenter

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is required (set PYTHON=...)")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	@touch $@

venv: $(STAMP)

# checkov, the policy scan of `make lint`, in a virtual environment of its own (its many
# dependencies stay out of .venv), one per version pinned in tools/versions.env.
CHECKOV_VERSION := $(shell sed -n 's/^CHECKOV_VERSION=//p' tools/versions.env)
CHECKOV_VENV := .cache/checkov/$(CHECKOV_VERSION)
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed

$(CHECKOV_STAMP):
	@test -n "$(CHECKOV_VERSION)" || { echo "tools/versions.env pins no CHECKOV_VERSION" >&2; exit 2; }
	rm -rf $(CHECKOV_VENV)
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/pip install --quiet checkov==$(CHECKOV_VERSION)
	@touch $@

## tools: build (once) the control plane, kwok, descheduler, helm, prometheus and promtool,
## and the real node (kubelet, containerd, runc, CNI plugins)
tools:
	@bash tools/build.sh >/dev/null
	@bash tools/build-node.sh >/dev/null

## images: build (once per source tree) the images the real node runs, as docker-archives:
## Compactor's from the Dockerfile on a debootstrap base, kube-scheduler, descheduler, pause
images: tools
	@bash tools/build-images.sh >/dev/null

## lint: ruff, the import contracts, and the policy scan (checkov) of deploy/, the chart and
## the objects the controller renders
lint: $(STAMP) $(CHECKOV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	@bash tools/policy-scan.sh $(CHECKOV_VENV)/bin/checkov $(BIN)/python

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest tests/unit

integration: $(STAMP) tools images
	$(BIN)/pytest tests/integration

e2e: $(STAMP) tools images
	$(BIN)/pytest tests/e2e

## test: install what is needed, then ruff, import contracts, mypy and the whole suite
test: $(STAMP) tools images lint typecheck
	@# The real node's tests mostly wait (kubelet syncs, CronJob minutes, image pulls that fail
	@# on purpose), in a network namespace of their own: they run beside the rest, their
	@# output kept and printed after it.
	@log="$$(mktemp)"; \
	  $(MAKE) --no-print-directory node >"$$log" 2>&1 & node=$$!; \
	  $(BIN)/pytest; main=$$?; \
	  wait $$node; real=$$?; \
	  echo "---- tests/node, run beside the rest (make node) ----"; cat "$$log"; rm -f "$$log"; \
	  exit $$(( main != 0 ? main : real ))

## node: the real node's tests (kubelet, containerd), inside a network namespace of their own
node: $(STAMP) tools images
	images="$$(bash tools/build-images.sh)" && \
	  COMPACTOR_IMAGES_DIR="$$images" $(BIN)/python -m localcluster.node -- $(BIN)/pytest tests/node --durations=10

## demo: start the embedded local cluster and keep it up until Ctrl-C; REAL_NODE=1: every
## Compactor part from its image on a real node, installed with kustomize (root; builds the
## node and the images, runs in a network namespace of its own)
## AUTOSCALER=karpenter: the nodes come from a Karpenter NodePool (its kwok provider, built
## first), which removes the nodes the compaction empties
AUTOSCALER ?= none
demo: $(STAMP) tools
	@if [[ "$(AUTOSCALER)" == karpenter ]]; then bash tools/build-karpenter.sh >/dev/null; fi
	$(BIN)/python -m localcluster.demo $(if $(REAL_NODE),--real-node) --autoscaler $(AUTOSCALER)

## bench: webhook latency/throughput vs the bare stack, cold burst, through the API server;
## the drain planner's pass on 100 to 5,000 synthetic nodes, one policy and twenty sharing them;
## the whole kubectl compactor plan (list and plan) on 5,000 kwok nodes and 150,500 Pods
bench: $(STAMP) tools
	$(BIN)/python -m loadtest.driver
	$(BIN)/python -m loadtest.planner
	$(BIN)/python -m loadtest.preview

## bench-e2e: 100, 300 and 500 nodes (~30 Pods each): how reconcile time, peak RSS and API
## requests/min grow, the targets judged at 500; then compaction at 100 nodes (not in CI).
## NODES=5000: instead the whole system at 500 and 5,000 nodes (150,000 Pods, 20 policies),
## against the floor of the same label PATCHes, and each policy's descheduler run
NODES ?=
COMMA := ,
bench-e2e: $(STAMP) tools
	$(if $(NODES),$(BIN)/python -m loadtest.scale --sizes 500$(COMMA)$(NODES),$(BIN)/python -m localcluster.bench.e2e)

## chaos: faults one at a time while the whole stack works, hostile clients, a search of the
## logs for planted secrets; the tables go to chaos-out/ (not in CI, about 10 minutes)
chaos: $(STAMP) tools
	$(BIN)/python -m localcluster.chaos

## bench-peers: Compactor beside Kyverno (built from its Go module, for this target only) and
## no webhook, the same concurrent Pod creation through one API server; then the race beside
## Karpenter (built for this target too): every arm from the same restored start per seed, in
## a random order, 12 nodes, seeds 1 to 10, 10 minutes each (many hours; not in CI)
bench-peers: $(STAMP) tools
	@bash tools/build-kyverno.sh >/dev/null
	$(BIN)/python -m loadtest.peers
	COMPACTOR_KARPENTER_DIR="$$(dirname "$$(bash tools/build-karpenter.sh)")" \
	  $(BIN)/python -m localcluster.bench.race

## test-karpenter: Compactor beside the real Karpenter (its kwok provider, built for this
## target only): never a drain into or from a node Karpenter disrupts, no node launched for a
## Pod a drain evicted, do-not-disrupt a blocker (not in `make test`)
test-karpenter: $(STAMP) tools
	COMPACTOR_KARPENTER_DIR="$$(dirname "$$(bash tools/build-karpenter.sh)")" \
	  $(BIN)/pytest tests/karpenter

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
