#!/usr/bin/env bash
# Builds kube-apiserver and etcd from their Go modules (e2e/gomod/*) and prints the directory that
# holds both, in the layout envtest uses for KUBEBUILDER_ASSETS. stdout is only that directory.
# `build-binaries.sh flux` does the same for Flux's source-controller and kustomize-controller
# (e2e/gomod/source-controller, e2e/gomod/kustomize-controller), with FLUX_ASSETS in the place of
# KUBEBUILDER_ASSETS; their CRDs (the modules' config/crd/bases) are copied into crds/ beside them.
#
# - KUBEBUILDER_ASSETS pointing at a directory with both binaries (FLUX_ASSETS: both and crds/) wins:
#   nothing is built.
# - Binaries are cached under ${XDG_CACHE_HOME:-~/.cache}/fleetcache, keyed by the versions pinned in
#   the go.mod files, and reused when present (then nothing but the directory is printed).
#   Nothing is written inside the repository.
# - Modules are verified against the committed go.sum alone (-mod=readonly): a module missing from it
#   fails the build instead of being fetched unverified, so the checksum database is never needed.
# - The first build takes minutes, so it reports progress on stderr: the phase (download modules,
#   build etcd, build kube-apiserver), modules or packages done out of the total, what is left and the
#   time elapsed. On a terminal one line updates in place; otherwise (CI logs) a line is written at
#   most every FLEETCACHE_PROGRESS_INTERVAL seconds (default 5). Errors from go pass through as is.
#
# Portable bash (3.2 and later, as macOS ships): no associative arrays, no `read -t`, POSIX awk.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
target="${1:-apiserver}"

required_version() { # module go.mod -> version required for that module
  awk -v m="$1" '$1 == "require" && $2 == m { print $3 } $1 == m && $2 ~ /^v/ { print $2 }' "$2" | head -n 1
}

case "$target" in
  apiserver)
    if [[ -n "${KUBEBUILDER_ASSETS:-}" && -x "$KUBEBUILDER_ASSETS/kube-apiserver" && -x "$KUBEBUILDER_ASSETS/etcd" ]]; then
      echo "$KUBEBUILDER_ASSETS"
      exit 0
    fi
    k8s_version="$(required_version k8s.io/kubernetes "$here/gomod/kube-apiserver/go.mod")"
    etcd_version="$(required_version go.etcd.io/etcd/server/v3 "$here/gomod/etcd/go.mod")"
    [[ -n "$k8s_version" && -n "$etcd_version" ]] || { echo "build-binaries: cannot read pinned versions from e2e/gomod/*/go.mod" >&2; exit 1; }
    out="${XDG_CACHE_HOME:-$HOME/.cache}/fleetcache/assets/kube-apiserver-${k8s_version}_etcd-${etcd_version}"
    binaries="etcd kube-apiserver"
    described="kube-apiserver and etcd"
    gomods=("$here/gomod/etcd" "$here/gomod/kube-apiserver")
    assets_variable=KUBEBUILDER_ASSETS
    ;;
  flux)
    if [[ -n "${FLUX_ASSETS:-}" && -x "$FLUX_ASSETS/source-controller" && -x "$FLUX_ASSETS/kustomize-controller" && -d "$FLUX_ASSETS/crds" ]]; then
      echo "$FLUX_ASSETS"
      exit 0
    fi
    source_version="$(required_version github.com/fluxcd/source-controller "$here/gomod/source-controller/go.mod")"
    kustomize_version="$(required_version github.com/fluxcd/kustomize-controller "$here/gomod/kustomize-controller/go.mod")"
    [[ -n "$source_version" && -n "$kustomize_version" ]] || { echo "build-binaries: cannot read pinned versions from e2e/gomod/{source,kustomize}-controller/go.mod" >&2; exit 1; }
    out="${XDG_CACHE_HOME:-$HOME/.cache}/fleetcache/assets/flux-source-controller-${source_version}_kustomize-controller-${kustomize_version}"
    binaries="source-controller kustomize-controller"
    described="source-controller and kustomize-controller"
    gomods=("$here/gomod/source-controller" "$here/gomod/kustomize-controller")
    assets_variable=FLUX_ASSETS
    ;;
  *)
    echo "build-binaries: unknown target '$target' (usage: build-binaries.sh [apiserver|flux])" >&2
    exit 2
    ;;
esac

cached=true
for name in $binaries; do [[ -x "$out/$name" ]] || cached=false; done
# Flux's CRDs go beside its binaries, from the same modules (config/crd/bases), so the two match.
if [[ "$target" == flux && ! -d "$out/crds" ]]; then cached=false; fi
if $cached; then
  echo "$out"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "build-binaries: go is not on PATH: install Go (https://go.dev/dl/), or set $assets_variable to a directory holding $described" >&2
  exit 1
fi
mkdir -p "$out"

export CGO_ENABLED=0 GOFLAGS="-mod=readonly -trimpath -buildvcs=false"

interval="${FLEETCACHE_PROGRESS_INTERVAL:-5}"
case "$interval" in ''|*[!0-9]*) echo "build-binaries: FLEETCACHE_PROGRESS_INTERVAL must be a whole number of seconds, got '$interval'" >&2; exit 2 ;; esac
tty=false
if [[ -t 2 && "${TERM:-dumb}" != dumb ]]; then tty=true; fi
tick="build-binaries:tick" # heartbeat line, so elapsed time moves while go is silent (linking)
begun=$SECONDS

duration() { # seconds -> 7s, 3m05s
  if (($1 < 60)); then printf '%ds' "$1"; else printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); fi
}

# with_ticks command... : runs the command with its stderr on stdout, plus a tick line every second.
with_ticks() {
  # sleep gets none of our streams, so a sleep still running after the kill holds no pipe open.
  (while sleep 1 >/dev/null 2>&1 </dev/null; do echo "$tick"; done) &
  local ticker=$! rc=0
  "$@" 2>&1 || rc=$?
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  return "$rc"
}

# progress step title kind total [main-package]: reads go's stderr (merged with ticks) on stdin,
# counts finished units and keeps the progress line on stderr. kind is `download` (counts the
# zips `go mod download -x` fetched) or `build` (counts the import paths `go build -v` prints,
# except the main package, which is not in the total). Any other line is go talking (an error):
# it is passed through on a line of its own.
progress() {
  local step="$1" title="$2" kind="$3" total="$4" main="${5:-}"
  local done=0 line text unit="packages" shown="" printed=-1 started=$SECONDS
  [[ "$kind" == download ]] && unit="modules"
  render() {
    local left=$((total - done)) now=$SECONDS what
    ((left < 0)) && left=0
    if [[ "$kind" == build && $left -eq 0 ]]; then what="linking"; else what="$left to go"; fi
    text="build-binaries: [$step] $title: $done/$total $unit, $what, $(duration $((now - started))) ($(duration $((now - begun))) in all)"
  }
  emit() { # force
    render
    [[ "$text" == "$shown" ]] && return 0
    if $tty; then
      printf '\r\033[K%s' "$text" >&2
    elif [[ -n "$1" ]] || ((SECONDS - printed >= interval)); then
      printf '%s\n' "$text" >&2
      printed=$SECONDS
    else
      return 0
    fi
    shown="$text"
  }
  emit force
  while IFS= read -r line; do
    case "$kind:$line" in
      *:"$tick") ;;
      download:"# get "*.zip:\ *) done=$((done + 1)) ;;
      download:"# get "*) ;;
      build:"$main") ;;
      build:*[!A-Za-z0-9._~/+-]* | build:) # not an import path: an error or a note from go
        if $tty; then printf '\r\033[K' >&2; fi
        printf '%s\n' "$line" >&2
        shown="" ;;
      build:*) done=$((done + 1)) ;;
      *)
        if $tty; then printf '\r\033[K' >&2; fi
        printf '%s\n' "$line" >&2
        shown="" ;;
    esac
    emit ""
  done
  emit force
  if $tty; then printf '\n' >&2; fi
}

# Module zips `go mod download` fetches that are not in the module cache yet: the download phase's
# total. Since go 1.17 it fetches every module the go.mod requires, after its replace directives.
missing_zips() {
  local cache file n=0
  cache="$(go env GOMODCACHE)" || return
  while IFS= read -r file; do
    [[ -f "$file" ]] || n=$((n + 1))
  done < <(awk -v cache="$cache" '
    # The module cache escapes each capital letter as "!" + lower case (golang.org/x/mod/module).
    function esc(s,   r, i, c) { r = ""; for (i = 1; i <= length(s); i++) { c = substr(s, i, 1); r = r (c ~ /[A-Z]/ ? "!" tolower(c) : c) } return r }
    function replace(from,   i) { # fields from..NF: old [version] => new [version]
      for (i = from; i <= NF && $i != "=>"; i++);
      if (i > NF) return
      to[FILENAME, $from, (i == from + 2 ? $(from + 1) : "")] = $(i + 1) " " (i + 2 <= NF ? $(i + 2) : "")
    }
    { sub(/\/\/.*/, "") }
    NF == 0 { next }
    $1 == ")" { block = ""; next }
    ($1 == "require" || $1 == "replace") && $2 == "(" { block = $1; next }
    $1 == "require" && NF >= 3 { n++; path[n] = $2; version[n] = $3; file[n] = FILENAME; next }
    $1 == "replace" { replace(2); next }
    block == "require" && NF >= 2 { n++; path[n] = $1; version[n] = $2; file[n] = FILENAME; next }
    block == "replace" { replace(1) }
    END {
      for (i = 1; i <= n; i++) {
        p = path[i]; v = version[i]
        if ((file[i], p, v) in to) r = to[file[i], p, v]
        else if ((file[i], p, "") in to) r = to[file[i], p, ""]
        else r = p " " v
        split(r, f, " ")
        if (f[2] == "") continue # replaced by a local directory: nothing to download
        print cache "/cache/download/" esc(f[1]) "/@v/" esc(f[2]) ".zip"
      }
    }
  ' "${gomods[@]/%//go.mod}" | sort -u)
  echo "$n"
}

download() { # module dirs...
  local dir
  for dir in "$@"; do (cd "$dir" && go mod download -x) || return; done
}

stale_packages() { # dir package: how many packages `go build` will compile, the main package aside
  local list
  list="$(cd "$1" && go list -deps -f '{{if and .Stale (ne .Name "main")}}{{.ImportPath}}{{end}}' "$2")" || return
  printf '%s\n' "$list" | awk 'NF { n++ } END { print n + 0 }'
}

compile() { # dir ldflags output package
  (cd "$1" && go build -v -ldflags "$2" -o "$3" "$4")
}

# Plan the phases first, so each line can say how many remain.
missing="$(missing_zips)" || { echo "build-binaries: go env GOMODCACHE failed" >&2; exit 1; }
steps=0
((missing > 0)) && steps=$((steps + 1))
for name in $binaries; do [[ -x "$out/$name" ]] || steps=$((steps + 1)); done
step=0
echo "build-binaries: building ${binaries// / and } from source, first run only (several minutes; cached in $out)" >&2

if ((missing > 0)); then
  step=$((step + 1))
  if ! with_ticks download "${gomods[@]}" | progress "$step/$steps" "downloading Go modules" download "$missing"; then
    echo "build-binaries: downloading Go modules failed (go's output above)" >&2
    exit 1
  fi
fi

build() { # name module-dir package ldflags
  local name="$1" dir="$2" pkg="$3" ldflags="$4" total
  if [[ -x "$out/$name" ]]; then return 0; fi
  step=$((step + 1))
  local started=$SECONDS
  echo "build-binaries: [$step/$steps] building $name: counting packages" >&2
  total="$(stale_packages "$dir" "$pkg")"
  if ! with_ticks compile "$dir" "$ldflags" "$out/.$name.tmp" "$pkg" | progress "$step/$steps" "building $name" build "$total" "$pkg"; then
    echo "build-binaries: building $name failed (go's output above)" >&2
    exit 1
  fi
  mv -f "$out/.$name.tmp" "$out/$name" # atomic: a half-written binary is never picked up
  echo "build-binaries: built $name in $(duration $((SECONDS - started)))" >&2
}

copy_crds() { # the CRDs of the pinned controllers, from the module cache into $out/crds
  local tmp="$out/.crds.tmp" module dir
  rm -rf "$tmp" && mkdir -p "$tmp"
  for module in source-controller kustomize-controller; do
    dir="$(cd "$here/gomod/$module" && go list -m -f '{{.Dir}}' "github.com/fluxcd/$module")" || return
    cp "$dir"/config/crd/bases/*.yaml "$tmp/" || return
  done
  chmod -R u+w "$tmp" # the module cache's files are read-only
  rm -rf "$out/crds" && mv "$tmp" "$out/crds"
}

if [[ "$target" == flux ]]; then
  build source-controller "$here/gomod/source-controller" github.com/fluxcd/source-controller "-s -w"
  build kustomize-controller "$here/gomod/kustomize-controller" github.com/fluxcd/kustomize-controller "-s -w"
  if [[ ! -d "$out/crds" ]] && ! copy_crds; then
    echo "build-binaries: copying Flux's CRDs from the Go module cache failed" >&2
    exit 1
  fi
  echo "$out"
  exit 0
fi

minor="${k8s_version#v1.}"; minor="${minor%%.*}"
version_flags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  version_flags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  version_flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

build etcd "$here/gomod/etcd" go.etcd.io/etcd/server/v3 "-s -w"
build kube-apiserver "$here/gomod/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver "-s -w$version_flags"

echo "$out"
