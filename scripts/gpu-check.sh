#!/usr/bin/env bash
# make gpu-check: on a host with an NVIDIA GPU, the checks no test of `make test` can make (CI has
# no GPU):
#
#  1. the agent's GPU detection against the real nvidia-smi, and — where a Docker engine with the
#     NVIDIA runtime answers — that a pipeline container given one GPU by device id sees exactly
#     that GPU (agent/cmd/nimbus-gpucheck);
#  2. a real pipeline on the GPU: the all-in-one server and a nimbus-agent that found the GPU run
#     a push whose GPU job trains a small PyTorch model and whose CPU job sees no GPU, billed at
#     the GPU price (e2e/realgpu_test.go, build tag gpu; jobs as host processes, so it needs
#     git and a python3 with torch for the GPU on the host, or NIMBUS_GPU_PYTHON naming one).
#
# It exits non-zero with the reason where nvidia-smi, the engine or the NVIDIA container runtime
# is missing. With Go installed it builds what it runs into bin/; without, bin/ must hold
# nimbus-server, nimbus-agent, nimbus, nimbus-gpucheck and e2e-gpu.test (built elsewhere with
# `make gpu-check-binaries`).
#
#   GPU_CHECK_IMAGE=ubuntu:24.04 make gpu-check    # any image with a shell; default: a busybox
#                                                  # image imported from /bin/busybox (busybox-static)
#   DOCKER_HOST=unix:///run/docker.sock make gpu-check
#   GPU_CHECK_DOCKER=off make gpu-check            # a GPU host without Docker: detection and step 2
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "gpu-check: FAIL: $*" >&2; exit 1; }

command -v nvidia-smi >/dev/null || fail "nvidia-smi is not on PATH: no NVIDIA driver on this host"
if command -v go >/dev/null; then
	make --no-print-directory gpu-check-binaries
fi
for b in nimbus-server nimbus-agent nimbus nimbus-gpucheck e2e-gpu.test; do
	[ -x "bin/$b" ] || fail "bin/$b is missing and Go is not installed to build it"
done

# 1. Detection, and a container given one GPU.
if [ "${GPU_CHECK_DOCKER:-on}" = off ]; then
	echo "gpu-check: GPU_CHECK_DOCKER=off: detection only, no container check"
	bin/nimbus-gpucheck -detect-only
else
	command -v docker >/dev/null || fail "the docker CLI is not installed (GPU_CHECK_DOCKER=off checks a host without Docker)"
	docker version >/dev/null 2>&1 || fail "no Docker engine answers (DOCKER_HOST=${DOCKER_HOST:-default}; GPU_CHECK_DOCKER=off checks a host without Docker)"
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
	bin/nimbus-gpucheck -image "$image" "$@"
fi

# 2. A real pipeline on the GPU.
command -v git >/dev/null || fail "git is not installed (the server keeps its repos with it)"
log=${GPU_CHECK_LOG:-$(mktemp /tmp/gpu-check.XXXXXX.log)}
set +e +o pipefail
NIMBUS_E2E_BIN="$PWD/bin" bin/e2e-gpu.test -test.run '^TestRealGPUPipeline$' -test.v -test.count=1 -test.timeout 10m 2>&1 |
	tee "$log" | grep -v '^\s*{"time"' # the server's and agent's JSON lines stay in the log file
rc=${PIPESTATUS[0]}
set -e -o pipefail
[ "$rc" = 0 ] || fail "the real GPU pipeline (e2e/realgpu_test.go); the whole output is in $log"
echo "gpu-check: OK"
