#!/usr/bin/env bash
# Builds flowbox-agent:latest, the image that holds the sandbox command
# agent alone (a static flowbox-agent at /flowbox-agent, nothing else), with
# `docker import` (no registry). The Kubernetes provider's pods copy the
# agent from it into the sandbox's container (`flowbox-agent install`), so
# any sandbox image works. The image is rebuilt when the binary changed.
#
# Usage: images/agent/build.sh [--force]
#
# Environment:
#   FLOWBOX_AGENT_IMAGE    image to build (default flowbox-agent:latest)
#   FLOWBOX_DOCKER_HOST    daemon to import into (else DOCKER_HOST)
#   FLOWBOX_BUILD_FORCE=1  same as --force
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
image=${FLOWBOX_AGENT_IMAGE:-flowbox-agent:latest}
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

work=$(mktemp -d "${TMPDIR:-/tmp}/flowbox-agent-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/rootfs"
(cd "$here/../.." && CGO_ENABLED=0 go build -trimpath -o "$work/rootfs/flowbox-agent" ./cmd/flowbox-agent)
sum=$(sha256sum "$work/rootfs/flowbox-agent" | cut -c1-64)
if [ "$force" != 1 ] && [ "$(docker image inspect -f '{{index .Config.Labels "flowbox.agent.sha256"}}' "$image" 2>/dev/null || true)" = "$sum" ]; then
	echo "build.sh: $image holds this agent already; nothing to do (--force rebuilds it)" >&2
	exit 0
fi
tar -C "$work/rootfs" -cf "$work/rootfs.tar" flowbox-agent
docker import \
	--change 'ENTRYPOINT ["/flowbox-agent"]' \
	--change "LABEL flowbox.agent.sha256=$sum" \
	"$work/rootfs.tar" "$image" >/dev/null
echo "build.sh: built $image (agent sha256 $sum)" >&2
