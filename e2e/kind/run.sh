#!/usr/bin/env bash
# `make e2e-kind`: the end-to-end scenarios (e2e/scenarios) on kind instead of local apiservers,
# then the service itself built, loaded and deployed into the kind management cluster.
#
# 1. Creates (or reuses) a management cluster and three workload clusters (the most any scenario
#    uses: the waves scenario's dev and three-cluster prod fleet) and exports their kubeconfigs
#    (FLEETCACHE_KUBECONFIGS). The sharding scenario also starts two local apiservers of its own
#    (it reads their audit logs), built with Go on first use as for `make test`.
# 2. Runs each scenario file in turn, after putting the clusters back to a clean state
#    (e2e/kind/reset.ts): the scenarios share the clusters and reuse object names, so each one must
#    start from what fresh local apiservers give it, whatever ran before.
# 3. Unless KIND_DEPLOY=0: builds the image (docker build), loads it into the management cluster
#    (kind load docker-image), applies config/default with that image, waits for the rollout, and
#    runs e2e/kind/in-cluster.scenario.ts against the in-cluster service. The service reaches the
#    workload clusters through kubeconfigs from `kind get kubeconfig --internal` (the clusters'
#    addresses on the kind Docker network; the default kubeconfig's 127.0.0.1 port is the host's).
#
# Needs: a running Docker engine, kind (>= 0.30) and kubectl on PATH. Environment:
#   KIND_NODE_IMAGE  node image (default kindest/node:v1.34.0, the release the local tests pin)
#   KIND_PREFIX      cluster name prefix (default fleetcache)
#   KEEP_CLUSTERS=1  leave the clusters this run created running (a later run reuses them).
#                    Clusters that existed before the run are never deleted, whatever this says
#                    (e.g. the one `make kind-load` loads into).
#   SCENARIOS        the scenario files to run (default: every e2e/scenarios/*.integration.test.ts)
#   KIND_DEPLOY=0    skip step 3
#   IMG              the image step 3 builds and deploys (default fleetcache:e2e)
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/node_modules/.bin:$PATH" # the pinned Node, however the script is started

die() { echo "e2e-kind: $*" >&2; exit 1; }
command -v docker >/dev/null || die "docker is not installed (kind runs clusters as Docker containers)"
docker info >/dev/null 2>&1 || die "no Docker engine answers 'docker info'; start one, or use 'make test' (local apiservers, no Docker)"
command -v kind >/dev/null || die "kind is not installed: see https://kind.sigs.k8s.io/docs/user/quick-start/#installation"
deploy="${KIND_DEPLOY:-1}"
if [[ "$deploy" != 0 ]]; then command -v kubectl >/dev/null || die "kubectl is not installed (the deploy step applies config/default; KIND_DEPLOY=0 skips it)"; fi

prefix="${KIND_PREFIX:-fleetcache}"
image="${KIND_NODE_IMAGE:-kindest/node:v1.34.0}"
img="${IMG:-fleetcache:e2e}"
roles=(mgmt workload-1 workload-2 workload-3)
work="$(mktemp -d)"
created=()

cleanup() {
  if [[ "${KEEP_CLUSTERS:-0}" != 1 ]]; then
    for name in "${created[@]}"; do kind delete cluster --name "$name" >/dev/null 2>&1 || true; done
  fi
  rm -rf "$work"
}
trap cleanup EXIT

existing="$(kind get clusters 2>/dev/null || true)"
spec=""
for role in "${roles[@]}"; do
  name="$prefix-$role"
  if grep -qx "$name" <<<"$existing"; then
    echo "e2e-kind: reusing $name (it existed before this run: never deleted by it)"
  else
    created+=("$name")
    kind create cluster --name "$name" --image "$image" --config kind-config.yaml --wait 180s
  fi
  kind get kubeconfig --name "$name" > "$work/$role.yaml"
  spec+="${spec:+,}$role=$work/$role.yaml"
done

export FLEETCACHE_KUBECONFIGS="$spec"
# Inherited from an enclosing test run, it makes node --test skip every file and exit 0.
unset NODE_TEST_CONTEXT
node_test=(node --test --test-reporter=spec --test-concurrency=1 --test-timeout=600000)

failed=()
# shellcheck disable=SC2206 # SCENARIOS is a list of paths (globs expanded here, in byte order)
LC_COLLATE=C
scenarios=(${SCENARIOS:-e2e/scenarios/*.integration.test.ts})
for file in "${scenarios[@]}"; do
  echo "e2e-kind: == $file"
  node e2e/kind/reset.ts
  "${node_test[@]}" "$file" || failed+=("$file")
done

if [[ "$deploy" != 0 ]]; then
  mgmt="$prefix-mgmt"
  echo "e2e-kind: == building $img, loading it into $mgmt and deploying config/default"
  docker build -t "$img" .
  kind load docker-image "$img" --name "$mgmt"
  node e2e/kind/reset.ts
  mkdir "$work/deploy"
  cat > "$work/deploy/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $PWD/config/default
images:
  - name: fleetcache
    newName: ${img%:*}
    newTag: ${img##*:}
EOF
  kubectl --kubeconfig "$work/mgmt.yaml" apply -k "$work/deploy"
  kubectl --kubeconfig "$work/mgmt.yaml" -n fleetcache-system rollout status deployment/fleetcache --timeout=180s
  internal=""
  for role in workload-1 workload-2; do
    kind get kubeconfig --internal --name "$prefix-$role" > "$work/$role.internal.yaml"
    internal+="${internal:+,}$role=$work/$role.internal.yaml"
  done
  FLEETCACHE_INTERNAL_KUBECONFIGS="$internal" "${node_test[@]}" e2e/kind/in-cluster.scenario.ts || failed+=(e2e/kind/in-cluster.scenario.ts)
fi

if (( ${#failed[@]} > 0 )); then
  echo "e2e-kind: failed: ${failed[*]}" >&2
  exit 1
fi
echo "e2e-kind: all passed"
