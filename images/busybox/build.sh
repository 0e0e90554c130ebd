#!/usr/bin/env bash
# Builds flowbox-busybox:test, a tiny sandbox image made of this machine's
# static busybox and its applet links, with `docker import` (no registry).
# Tests use it because it is a few megabytes and starts fast; it is not a
# sandbox image for agents (run sandboxes with /bin/sh as the shell).
#
# Usage: images/busybox/build.sh [--force]
#
# Environment:
#   FLOWBOX_BUSYBOX_IMAGE  image to build (default flowbox-busybox:test)
#   FLOWBOX_DOCKER_HOST    daemon to import into (else DOCKER_HOST)
#   FLOWBOX_BUILD_FORCE=1  same as --force
#
# Needs the static busybox at /bin/busybox (Debian: busybox-static, which
# this script installs with apt-get when it is missing and it runs as root).
set -euo pipefail

image=${FLOWBOX_BUSYBOX_IMAGE:-flowbox-busybox:test}
force=${FLOWBOX_BUILD_FORCE:-0}
case ${1:-} in
-f | --force) force=1 ;;
"") ;;
*)
	echo "build.sh: unknown argument $1" >&2
	exit 2
	;;
esac
if [ -n "${FLOWBOX_DOCKER_HOST:-}" ]; then
	export DOCKER_HOST=$FLOWBOX_DOCKER_HOST
fi

if [ "$force" != 1 ] && docker image inspect "$image" >/dev/null 2>&1; then
	echo "build.sh: $image exists; nothing to do (--force rebuilds it)" >&2
	exit 0
fi

busybox=/bin/busybox
# ldd fails on a static executable; the image has no C library.
usable() { "$busybox" --list >/dev/null 2>&1 && ! ldd "$busybox" >/dev/null 2>&1; }
if ! usable; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		apt-get install -y --no-install-recommends busybox-static >&2
	fi
fi
usable || {
	echo "build.sh: no static $busybox; install busybox-static" >&2
	exit 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/flowbox-busybox.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
mkdir -p "$root/bin" "$root/tmp" "$root/workspace" "$root/.flowbox" "$root/proc" "$root/sys" "$root/dev" "$root/etc"
chmod 1777 "$root/tmp"
cp "$busybox" "$root/bin/busybox"
for applet in $("$busybox" --list); do
	case $applet in busybox | */*) continue ;; esac
	ln -s busybox "$root/bin/$applet"
done
echo 'root:x:0:0:root:/workspace:/bin/sh' >"$root/etc/passwd"
echo 'root:x:0:' >"$root/etc/group"

old=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
tar --numeric-owner --owner=0 --group=0 -C "$root" -c . |
	docker import \
		--change 'WORKDIR /workspace' \
		--change 'ENV PATH=/bin' \
		--change 'CMD ["/bin/sh"]' \
		- "$image" >/dev/null
if [ -n "$old" ] && [ "$old" != "$(docker image inspect -f '{{.Id}}' "$image")" ]; then
	docker image rm "$old" >/dev/null 2>&1 || true
fi
echo "build.sh: built $image" >&2
