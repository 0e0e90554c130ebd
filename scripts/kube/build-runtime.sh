#!/usr/bin/env bash
# Builds the container runtime of the test cluster from the Go module
# proxy and caches it by version: containerd, ctr and the runc shim
# (containerd-shim-runc-v2) of containerd 2, and runc.
#
#   scripts/kube/build-runtime.sh    prints the directory holding them
#
# Why not Debian 12's containerd 1.6 and runc 1.1: pods in user namespaces
# of their own (spec.hostUsers: false, what the sandboxes ask for) need
# containerd 2.0 or later and runc 1.2 or later, which report ID-mapped
# mounts to the kubelet.
#
# The defaults, and why:
#   - containerd 2.2.9: the latest patch of 2.2, the minor that
#     containerd's RELEASES.md recommends for Kubernetes 1.35 (the cluster's
#     version); it still supports cgroup v1 (deprecated, kept until at
#     least 2029), which this machine has;
#   - runc 1.3.7: the 1.3 line that containerd 2.2 is tested with (2.2.9
#     pins 1.3.6), at its latest patch, which fixes CVE-2026-119101; runc
#     1.4 deprecates cgroup v1.
# FLOWBOX_KUBE_CONTAINERD_VERSION and FLOWBOX_KUBE_RUNC_VERSION change
# them, FLOWBOX_KUBE_CACHE (default /var/cache/flowbox/kube) the cache.
#
# containerd is built without cgo (and so without the btrfs snapshotter,
# which the cluster does not use), as its release builds are; runc needs
# cgo and libseccomp (Debian's libseccomp-dev, pkg-config and gcc), for its
# seccomp filters. A first build took 11 minutes on 2 cores busy with the
# Kubernetes build as well (runc 2, containerd and ctr 8.5, the shim 0.5),
# under a minute with Go's build cache warm; later runs find the binaries
# in the cache, and concurrent runs wait for each other.
set -euo pipefail

containerd_version="${FLOWBOX_KUBE_CONTAINERD_VERSION:-2.2.9}"
runc_version="${FLOWBOX_KUBE_RUNC_VERSION:-1.3.7}"
cache="${FLOWBOX_KUBE_CACHE:-/var/cache/flowbox/kube}"
dir="$cache/containerd-v$containerd_version-runc-v$runc_version"
bin="$dir/bin"
cmds=(containerd ctr containerd-shim-runc-v2 runc)

missing() {
	local c
	for c in "${cmds[@]}"; do [ -x "$bin/$c" ] || echo "$c"; done
}
if [ -z "$(missing)" ]; then
	echo "$bin"
	exit 0
fi
command -v go >/dev/null || {
	echo "build-runtime.sh: no go command: install Go (1.25 or newer) to build containerd v$containerd_version and runc v$runc_version" >&2
	exit 1
}
pkg-config --exists libseccomp 2>/dev/null && command -v gcc >/dev/null || {
	echo "build-runtime.sh: runc needs libseccomp's headers, pkg-config and gcc: apt-get install libseccomp-dev pkg-config gcc" >&2
	exit 1
}

mkdir -p "$dir"
exec 9>"$dir/build.lock"
if ! flock -n 9; then
	echo "build-runtime.sh: another build of the runtime runs; waiting for it" >&2
	flock 9
fi
if [ -z "$(missing)" ]; then
	echo "$bin"
	exit 0
fi

echo "building containerd v$containerd_version and runc v$runc_version into $bin; a first build takes up to 10 minutes" >&2
rm -rf "$bin.tmp"
mkdir -p "$bin.tmp"
# go install module@version builds outside any module of the caller, with
# the module's own go.sum checked against the checksum database.
cd "$bin.tmp"
mod=github.com/containerd/containerd/v2
ld="-s -w -X $mod/version.Version=v$containerd_version -X $mod/version.Package=$mod"
GOBIN="$bin.tmp" CGO_ENABLED=0 go install -trimpath -tags 'urfave_cli_no_docs no_btrfs' -ldflags "$ld" \
	"$mod/cmd/containerd@v$containerd_version" "$mod/cmd/ctr@v$containerd_version" >&2
GOBIN="$bin.tmp" CGO_ENABLED=0 go install -trimpath -tags 'urfave_cli_no_docs no_grpc' -ldflags "$ld" \
	"$mod/cmd/containerd-shim-runc-v2@v$containerd_version" >&2
GOBIN="$bin.tmp" CGO_ENABLED=1 go install -trimpath -tags 'seccomp urfave_cli_no_docs' -ldflags '-s -w' \
	"github.com/opencontainers/runc@v$runc_version" >&2
cd /
mkdir -p "$bin"
for c in "${cmds[@]}"; do mv "$bin.tmp/$c" "$bin/$c"; done
rm -rf "$bin.tmp"
echo "$bin"
