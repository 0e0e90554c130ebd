#!/usr/bin/env bash
# Builds the Kubernetes binaries a single-node test cluster needs
# (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, and a
# kubectl of the same version) from the Go module proxy, and caches them by
# version:
#
#   scripts/kube/build.sh            prints the directory holding them
#
# k8s.io/kubernetes cannot be installed with `go install`: its go.mod names
# its staging modules at v0.0.0. A wrapper module requires it and replaces
# every staging module with the release of the same minor version.
# FLOWBOX_KUBE_VERSION (default 1.35.4) and FLOWBOX_KUBE_CACHE (default
# /var/cache/flowbox/kube) choose the version and the cache. A first build
# takes 15-25 minutes on 2 cores and about 3 GB of Go build cache; only the
# commands missing from the cache are built, and concurrent runs wait for
# each other.
set -euo pipefail

version="${FLOWBOX_KUBE_VERSION:-1.35.4}"
cache="${FLOWBOX_KUBE_CACHE:-/var/cache/flowbox/kube}"
bin="$cache/v$version/bin"
cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)

# missing prints the commands not yet in $bin, one a line.
missing() {
	local c
	for c in "${cmds[@]}"; do [ -x "$bin/$c" ] || echo "$c"; done
}
if [ -z "$(missing)" ]; then
	echo "$bin"
	exit 0
fi
command -v go >/dev/null || {
	echo "build.sh: no go command: install Go (1.25 or newer) to build Kubernetes v$version" >&2
	exit 1
}

mkdir -p "$cache/v$version"
exec 9>"$cache/v$version/build.lock"
if ! flock -n 9; then
	echo "build.sh: another build of Kubernetes v$version runs; waiting for it" >&2
	flock 9
fi
mapfile -t todo < <(missing)
if [ ${#todo[@]} -eq 0 ]; then
	echo "$bin"
	exit 0
fi

minor="${version#*.}"
minor="${minor%%.*}"
staging=(api apiextensions-apiserver apimachinery apiserver cli-runtime client-go
	cloud-provider cluster-bootstrap code-generator component-base component-helpers
	controller-manager cri-api cri-client csi-translation-lib dynamic-resource-allocation
	endpointslice externaljwt kms kube-aggregator kube-controller-manager kube-proxy
	kube-scheduler kubectl kubelet metrics mount-utils pod-security-admission
	sample-apiserver sample-cli-plugin sample-controller)

src="$cache/v$version/src"
rm -rf "$src" "$bin.tmp"
mkdir -p "$src" "$bin.tmp"
{
	echo "module flowbox.local/kubebuild"
	echo
	echo "go 1.25"
	echo
	echo "require k8s.io/kubernetes v$version"
	echo
	echo "replace ("
	for m in "${staging[@]}"; do echo "	k8s.io/$m => k8s.io/$m v0.$minor.${version##*.}"; done
	echo ")"
} >"$src/go.mod"
{
	echo "//go:build tools"
	echo
	echo "package kubebuild"
	echo
	echo "import ("
	for c in "${cmds[@]}"; do echo "	_ \"k8s.io/kubernetes/cmd/$c\""; done
	echo ")"
} >"$src/tools.go"

echo "building Kubernetes v$version (${todo[*]}) into $bin; a first build takes 15-25 minutes" >&2
cd "$src"
go mod tidy >&2
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$version"
ldflags+=" -X k8s.io/component-base/version.gitMajor=${version%%.*}"
ldflags+=" -X k8s.io/component-base/version.gitMinor=$minor"
pkgs=()
for c in "${todo[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$bin.tmp/" "${pkgs[@]}" >&2
mkdir -p "$bin"
for c in "${todo[@]}"; do mv "$bin.tmp/$c" "$bin/$c"; done
rm -rf "$bin.tmp"
echo "$bin"
