# fleetcache — every target runs on the Node pinned in package.json (the `node` dev dependency),
# which `make deps` installs into node_modules/.bin and this PATH puts first.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)

# Test files: unit tests are *.test.ts; tests that start real kube-apiservers are
# *.integration.test.ts. Both run straight from the TypeScript sources. The end-to-end scenarios
# (e2e/scenarios) are not in the list: e2e/kind/run.integration.test.ts runs every one of them as
# `make e2e-kind` does (in a row, on four shared long-lived apiservers, each after a reset).
TEST_DIRS := lib cmd fixtures e2e tools
UNIT_TESTS = $(shell find $(TEST_DIRS) -name '*.test.ts' ! -name '*.integration.test.ts' 2>/dev/null | sort)
INTEGRATION_TESTS = $(shell find $(TEST_DIRS) -name '*.integration.test.ts' ! -path 'e2e/scenarios/*' 2>/dev/null | sort)
# Integration tests each start their own apiservers: one file at a time suits a 2-core machine.
INTEGRATION_CONCURRENCY ?= 1
NODE_TEST := node --test --test-reporter=spec --test-timeout=600000

.PHONY: all deps assets browser build lint typecheck test test-unit test-integration bench demo manifests wasm docker-build kind-load deploy e2e-kind clean help

all: test

help: ## List the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | column -t -s $$'\t'

node_modules/.installed: package.json package-lock.json
	@bootstrap=$$(node -v 2>/dev/null || true); npm ci --no-audit --no-fund; case "$$bootstrap" in v1[0-9].*|v2[01].*|v22.[0-9].*|v22.1[0-8].*) echo "note: npm's EBADENGINE warnings above come from installing with Node $$bootstrap; every make target runs on the pinned Node in node_modules/.bin (checked next), so they are harmless";; esac
	@node -e 'const [maj, min] = process.versions.node.split(".").map(Number); if (maj < 22 || (maj === 22 && min < 19)) { console.error(`pinned Node missing: got $${process.version}`); process.exit(1); }'
	@touch $@

deps: node_modules/.installed ## Install npm dependencies, including the pinned Node.

assets: ## Build (or reuse) kube-apiserver and etcd, then Flux's source- and kustomize-controller, for the integration tests; prints their directories.
	@e2e/build-binaries.sh
	@e2e/build-binaries.sh flux

browser: ## Install Debian's chromium for the dashboard's browser test (no-op when present).
	@tools/install-chromium.sh

build: deps ## Compile the published package into dist/.
	npm run build

lint: deps ## ESLint with typescript-eslint's type-checked rules.
	npm run lint

typecheck: deps ## tsc --noEmit over sources, tests and benchmarks.
	npm run typecheck

test-unit: deps ## Unit tests (no cluster needed).
	$(NODE_TEST) $(UNIT_TESTS)

test-integration: deps browser ## Tests against real kube-apiservers and Flux controllers (built on first use, then cached) and the dashboard in headless chromium.
	KUBEBUILDER_ASSETS="$$(e2e/build-binaries.sh)" FLUX_ASSETS="$$(e2e/build-binaries.sh flux)" $(NODE_TEST) --test-concurrency=$(INTEGRATION_CONCURRENCY) $(INTEGRATION_TESTS)

test: lint typecheck build test-unit test-integration ## Everything: lint, typecheck, build, unit and integration tests.

demo: deps ## The main job: three local clusters, the service, a release promoted dev -> staging -> prod. DEMO_FLAGS=--keep-running keeps it up; --git promotes through a local Git repository applied by real Flux (its controllers built on first use, then cached); --replicas=3 runs three sharded replicas (--shard) splitting 13 Pipelines; --fleet makes prod a fleet of four clusters promoted in waves (a canary soaked 5 s, then the rest).
	$(if $(filter --git,$(DEMO_FLAGS)),flux="$$(e2e/build-binaries.sh flux)"; export FLUX_ASSETS="$$flux";) node e2e/demo/demo.ts $(DEMO_FLAGS)

bench: deps ## Benchmarks: side-by-side comparisons printed as tables.
	@for f in bench/*.bench.ts; do echo "== $$f"; node --expose-gc "$$f"; done

manifests: deps ## Regenerate config/crd from lib/pipeline/crd.ts (CI checks they are in sync).
	node cmd/gen-manifests.ts

wasm: deps ## Reassemble lib/transport/skip-wasm.ts from skip.wat (a unit test checks they are in sync).
	node tools/wasm.ts

IMG ?= fleetcache:dev
KIND_CLUSTER ?= fleetcache-mgmt
docker-build: ## Build the service image (needs Docker).
	docker build -t $(IMG) .

kind-load: docker-build ## Load the image into a kind cluster (KIND_CLUSTER, default fleetcache-mgmt).
	kind load docker-image $(IMG) --name $(KIND_CLUSTER)

deploy: ## Apply config/default (CRD, RBAC, Deployment) to the current kubectl context.
	kubectl apply -k config/default

e2e-kind: deps ## End-to-end scenarios on kind clusters, then the image deployed there (needs Docker, kind, kubectl; see README).
	e2e/kind/run.sh

clean: ## Remove build output and installed dependencies (the binary cache in ~/.cache stays).
	rm -rf dist node_modules
