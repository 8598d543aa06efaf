#!/usr/bin/env bash
# Builds and caches the binaries and CRDs used by the integration tests
# (test/testenv): kube-apiserver, etcd and the KubeVirt/CDI CRD YAMLs.
#
#   hack/tools.sh build   build whatever is missing; progress goes to stderr
#   hack/tools.sh env     build if needed, then print only `export` lines:
#                         eval "$(hack/tools.sh env)"
#
# Everything is built from the Go module proxy via the pinned tool modules in
# tools/*. Results live outside the repo in
#   ${KRF_CACHE:-$HOME/.cache/kubevirt-redfish}/<name>-<version>-<hash>/
# where <hash> covers the tool module's go.mod/go.sum/*.go, so bumping a
# version (or changing crdgen) builds into a new directory and never reuses a
# stale one. Each entry is built in a temp dir and renamed into place, so an
# interrupted build never leaves a half-written binary behind.
set -euo pipefail

# `eval "$(hack/tools.sh env)" && go test` would carry on after a failed build
# (eval of nothing succeeds), so on failure `env` prints `false` to make the
# eval fail too.
if [[ ${1:-} == env ]]; then
	trap '[[ $? -eq 0 ]] || echo false' EXIT
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${KRF_CACHE:-$HOME/.cache/kubevirt-redfish}

# The tool modules are standalone: a go.work higher up must not pull them in,
# go.sum is committed so the build must never edit go.mod, and VCS stamping is
# useless here (and fails in a repo without commits).
GOFLAGS="$(go env GOFLAGS) -mod=readonly -buildvcs=false"
export GOWORK=off GOFLAGS CGO_ENABLED=0

log() { printf '%s\n' "tools.sh: $*" >&2; }

# modver DIR MODULE: the version DIR/go.mod requires for MODULE.
modver() {
	awk -v m="$2" '{ sub(/\/\/.*/, "") } !/=>/ { for (i = 1; i < NF; i++) if ($i == m) { print $(i + 1); exit } }' "$1/go.mod"
}

# srchash DIR: short hash of what determines the tool's output.
srchash() {
	(cd "$1" && find . -maxdepth 1 \( -name go.mod -o -name go.sum -o -name '*.go' \) -print0 |
		sort -z | xargs -0 cat | sha256sum | cut -c1-10)
}

KAS_VER=$(modver "$ROOT/tools/kube-apiserver" k8s.io/kubernetes)
ETCD_VER=$(modver "$ROOT/tools/etcd" go.etcd.io/etcd/server/v3)
KV_VER=$(modver "$ROOT/tools/crdgen" kubevirt.io/kubevirt)
CDI_VER=$(modver "$ROOT/tools/crdgen" kubevirt.io/containerized-data-importer)

KAS_DIR=$CACHE/kube-apiserver-$KAS_VER-$(srchash "$ROOT/tools/kube-apiserver")
ETCD_DIR=$CACHE/etcd-$ETCD_VER-$(srchash "$ROOT/tools/etcd")
CRD_DIR=$CACHE/crds-kubevirt-$KV_VER-cdi-$CDI_VER-$(srchash "$ROOT/tools/crdgen")

# cached NAME DIR DESCRIPTION -- CMD...: runs CMD (with $OUT set to a fresh
# temp dir) unless DIR already exists, then atomically renames $OUT to DIR.
# Output of CMD goes to DIR.log; on failure its tail is shown.
cached() {
	local name=$1 dir=$2 desc=$3
	shift 4
	[[ -d $dir ]] && return 0
	local logf=$dir.log start=$SECONDS
	rm -rf "$dir".tmp.* # leftovers of an interrupted build (we hold the lock)
	OUT=$(mktemp -d "$dir.tmp.XXXXXX")
	log "building $name ($desc); log: $logf"
	if ! (set -x && "$@") >"$logf" 2>&1; then
		rm -rf "$OUT"
		log "building $name FAILED; last lines of $logf:"
		tail -n 30 "$logf" >&2
		exit 1
	fi
	chmod 755 "$OUT" # mktemp -d makes it private
	mv -T "$OUT" "$dir"
	log "built $name in $((SECONDS - start))s -> $dir"
}

build_kas() {
	cd "$ROOT/tools/kube-apiserver"
	# -X only affects linking; it makes /version report the real release.
	local v=k8s.io/component-base/version minor=${KAS_VER#v1.}
	go build -o "$OUT/kube-apiserver" -ldflags "-X $v.gitVersion=$KAS_VER -X $v.gitMajor=1 -X $v.gitMinor=${minor%%.*}" \
		k8s.io/kubernetes/cmd/kube-apiserver
	"$OUT/kube-apiserver" --version
}

build_etcd() {
	cd "$ROOT/tools/etcd"
	go build -o "$OUT/etcd" go.etcd.io/etcd/server/v3
	"$OUT/etcd" --version
}

build_crds() {
	cd "$ROOT/tools/crdgen"
	go run . -out "$OUT"
}

build_all() {
	mkdir -p "$CACHE"
	# Serialize concurrent invocations (e.g. two `make` targets) on one machine.
	exec 9>"$CACHE/.lock"
	flock 9
	cached kube-apiserver "$KAS_DIR" "$KAS_VER, ~5-10 min cold on 2 cores" -- build_kas
	cached etcd "$ETCD_DIR" "$ETCD_VER, ~1 min cold" -- build_etcd
	cached crds "$CRD_DIR" "kubevirt $KV_VER, CDI $CDI_VER, ~4 min cold" -- build_crds
	exec 9>&-
}

case ${1:-} in
build)
	build_all
	;;
env)
	build_all
	printf 'export KRF_KUBE_APISERVER=%q\n' "$KAS_DIR/kube-apiserver"
	printf 'export KRF_ETCD=%q\n' "$ETCD_DIR/etcd"
	printf 'export KRF_CRD_DIR=%q\n' "$CRD_DIR"
	;;
*)
	echo "usage: $0 build|env" >&2
	exit 2
	;;
esac
