package agent

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"strings"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/agent/gpu"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// hostFacts gathers, once at start, what the agent announces about its host for the
// pipelines' reproducibility records: OS, kernel, CPU model, the NVIDIA driver and CUDA version
// when it has GPUs ("simulated" for simulated ones), and the Docker engine's version.
func hostFacts(ctx context.Context, ex executor.Executor, gpus int, simulated bool) protocol.HostFacts {
	h := protocol.HostFacts{OS: runtime.GOOS + "/" + runtime.GOARCH, CPUModel: cpuModel("/proc/cpuinfo")}
	if raw, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(raw))
	}
	switch {
	case simulated:
		h.GPUDriver, h.CUDAVersion = "simulated", "simulated"
	case gpus > 0:
		h.GPUDriver, h.CUDAVersion = gpu.Driver(ctx)
	}
	if d, ok := ex.(*executor.Docker); ok {
		if v, err := d.Client().ServerVersion(ctx); err == nil {
			h.Engine = "docker " + v.Version
		}
	}
	return h
}

// cpuModel is the first "model name" of a cpuinfo file ("" when there is none, as on arm64).
func cpuModel(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
