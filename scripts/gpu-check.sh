#!/usr/bin/env bash
# make gpu-check: on a host with an NVIDIA GPU and Docker, checks the agent's GPU detection
# against the real nvidia-smi and that a pipeline container given one GPU by device id sees
# exactly that GPU (agent/cmd/nimbus-gpucheck). Exits non-zero with the reason where nvidia-smi,
# the engine or the NVIDIA container runtime is missing.
#
#   GPU_CHECK_IMAGE=ubuntu:24.04 make gpu-check    # any image with a shell; default: a busybox
#                                                  # image imported from /bin/busybox (busybox-static)
#   DOCKER_HOST=unix:///run/docker.sock make gpu-check
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "gpu-check: FAIL: $*" >&2; exit 1; }

command -v nvidia-smi >/dev/null || fail "nvidia-smi is not on PATH: no NVIDIA driver on this host"
command -v docker >/dev/null || fail "the docker CLI is not installed"
docker version >/dev/null 2>&1 || fail "no Docker engine answers (DOCKER_HOST=${DOCKER_HOST:-default})"

if command -v go >/dev/null; then
	CGO_ENABLED=0 go build -o bin/nimbus-gpucheck ./agent/cmd/nimbus-gpucheck
fi
[ -x bin/nimbus-gpucheck ] || fail "bin/nimbus-gpucheck is missing and Go is not installed to build it"

image=${GPU_CHECK_IMAGE:-}
if [ -z "$image" ]; then
	image=nimbus-gpucheck/busybox:1
	if ! docker image inspect "$image" >/dev/null 2>&1; then
		[ -x /bin/busybox ] || fail "no GPU_CHECK_IMAGE given and no /bin/busybox (apt install busybox-static) to import one"
		rootfs=$(mktemp -d)
		trap 'rm -rf "$rootfs"' EXIT
		mkdir -p "$rootfs/bin" "$rootfs/tmp" "$rootfs/etc" "$rootfs/workspace"
		cp /bin/busybox "$rootfs/bin/busybox"
		for applet in $(/bin/busybox --list); do
			[ "$applet" = busybox ] || ln -sf busybox "$rootfs/bin/$applet"
		done
		echo 'root:x:0:0:root:/root:/bin/sh' >"$rootfs/etc/passwd"
		tar -C "$rootfs" -c . | docker import --change 'ENV PATH=/bin' - "$image" >/dev/null
	fi
fi
echo "gpu-check: image $image"
exec bin/nimbus-gpucheck -image "$image" "$@"
