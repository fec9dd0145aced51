#!/usr/bin/env bash
# `make e2e-kind`: the end-to-end scenarios (e2e/scenarios) on kind instead of local apiservers.
# Creates (or reuses) a management cluster and two workload clusters, exports their kubeconfigs,
# and runs the scenarios with FLEETCACHE_KUBECONFIGS pointing at them.
#
# Needs: a running Docker engine, kind (>= 0.30) on PATH. Environment:
#   KIND_NODE_IMAGE  node image (default kindest/node:v1.34.0, the release the local tests pin)
#   KIND_PREFIX      cluster name prefix (default fleetcache)
#   KEEP_CLUSTERS=1  leave the clusters running afterwards (a later run reuses them)
#   SCENARIOS        the scenario files to run (default: every e2e/scenarios/*.integration.test.ts)
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/node_modules/.bin:$PATH" # the pinned Node, however the script is started

die() { echo "e2e-kind: $*" >&2; exit 1; }
command -v docker >/dev/null || die "docker is not installed (kind runs clusters as Docker containers)"
docker info >/dev/null 2>&1 || die "no Docker engine answers 'docker info'; start one, or use 'make test' (local apiservers, no Docker)"
command -v kind >/dev/null || die "kind is not installed: see https://kind.sigs.k8s.io/docs/user/quick-start/#installation"

prefix="${KIND_PREFIX:-fleetcache}"
image="${KIND_NODE_IMAGE:-kindest/node:v1.34.0}"
roles=(mgmt workload-1 workload-2)
work="$(mktemp -d)"

cleanup() {
  if [[ "${KEEP_CLUSTERS:-0}" != 1 ]]; then
    for role in "${roles[@]}"; do kind delete cluster --name "$prefix-$role" >/dev/null 2>&1 || true; done
  fi
  rm -rf "$work"
}
trap cleanup EXIT

existing="$(kind get clusters 2>/dev/null || true)"
spec=""
for role in "${roles[@]}"; do
  name="$prefix-$role"
  if ! grep -qx "$name" <<<"$existing"; then
    kind create cluster --name "$name" --image "$image" --config kind-config.yaml --wait 180s
  fi
  kind get kubeconfig --name "$name" > "$work/$role.yaml"
  spec+="${spec:+,}$role=$work/$role.yaml"
done

export FLEETCACHE_KUBECONFIGS="$spec"
# Inherited from an enclosing test run, it makes node --test skip every file and exit 0.
unset NODE_TEST_CONTEXT
# shellcheck disable=SC2086 # SCENARIOS is a list of paths
node --test --test-reporter=spec --test-concurrency=1 --test-timeout=600000 ${SCENARIOS:-e2e/scenarios/*.integration.test.ts}
