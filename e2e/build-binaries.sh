#!/usr/bin/env bash
# Builds kube-apiserver and etcd from their Go modules (e2e/gomod/*) and prints the directory that
# holds both, in the layout envtest uses for KUBEBUILDER_ASSETS.
#
# - KUBEBUILDER_ASSETS pointing at a directory with both binaries wins: nothing is built.
# - Binaries are cached under ${XDG_CACHE_HOME:-~/.cache}/fleetcache, keyed by the versions pinned in
#   the go.mod files, and reused when present. Nothing is written inside the repository.
# - Modules are verified against the committed go.sum alone (-mod=readonly): a module missing from it
#   fails the build instead of being fetched unverified, so the checksum database is never needed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [[ -n "${KUBEBUILDER_ASSETS:-}" && -x "$KUBEBUILDER_ASSETS/kube-apiserver" && -x "$KUBEBUILDER_ASSETS/etcd" ]]; then
  echo "$KUBEBUILDER_ASSETS"
  exit 0
fi

required_version() { # module go.mod -> version required for that module
  awk -v m="$1" '$1 == "require" && $2 == m { print $3 } $1 == m && $2 ~ /^v/ { print $2 }' "$2" | head -n 1
}

k8s_version="$(required_version k8s.io/kubernetes "$here/gomod/kube-apiserver/go.mod")"
etcd_version="$(required_version go.etcd.io/etcd/server/v3 "$here/gomod/etcd/go.mod")"
[[ -n "$k8s_version" && -n "$etcd_version" ]] || { echo "build-binaries: cannot read pinned versions from e2e/gomod/*/go.mod" >&2; exit 1; }

out="${XDG_CACHE_HOME:-$HOME/.cache}/fleetcache/assets/kube-apiserver-${k8s_version}_etcd-${etcd_version}"
mkdir -p "$out"

export CGO_ENABLED=0 GOFLAGS="-mod=readonly -trimpath -buildvcs=false"

build() { # name module-dir package ldflags
  local name="$1" dir="$2" pkg="$3" ldflags="$4"
  if [[ -x "$out/$name" ]]; then return 0; fi
  echo "build-binaries: building $name (first run only; cached in $out)" >&2
  local started=$SECONDS
  (cd "$dir" && go build -ldflags "$ldflags" -o "$out/.$name.tmp" "$pkg")
  mv -f "$out/.$name.tmp" "$out/$name" # atomic: a half-written binary is never picked up
  echo "build-binaries: built $name in $((SECONDS - started))s" >&2
}

minor="${k8s_version#v1.}"; minor="${minor%%.*}"
version_flags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  version_flags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  version_flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

build etcd "$here/gomod/etcd" go.etcd.io/etcd/server/v3 "-s -w"
build kube-apiserver "$here/gomod/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver "-s -w$version_flags"

echo "$out"
