// Command nimbus-gpucheck checks, on a host with an NVIDIA GPU and Docker, the two things a GPU
// agent depends on and that no test here can fake: the agent's GPU detection against the real
// nvidia-smi, and a pipeline container given exactly one GPU by device id (the Engine API's
// device request, what `docker run --gpus device=N` sends), checked from inside with
// `nvidia-smi -L`. `make gpu-check` runs it. It exits non-zero with the reason where
// nvidia-smi, the engine or the NVIDIA container runtime is missing, or a container sees other
// GPUs than its own.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/agent/gpu"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpu-check: FAIL:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("nimbus-gpucheck", flag.ContinueOnError)
	image := fs.String("image", "", "an image with a shell to start the GPU container from (the NVIDIA runtime mounts nvidia-smi into it)")
	host := fs.String("docker-host", os.Getenv("DOCKER_HOST"), "the Docker engine (default: the environment's)")
	all := fs.Bool("all", false, "check every GPU, one container each (default: the first and the last)")
	detectOnly := fs.Bool("detect-only", false, "check the GPU detection only (a host without a Docker engine: its pipelines run as host processes)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *image == "" && !*detectOnly {
		return errors.New("-image is required (make gpu-check imports a busybox one)")
	}

	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		return errors.New("nvidia-smi is not on PATH: this host has no NVIDIA driver installed (or it is not on PATH); a GPU agent cannot run here")
	}
	gpus, err := gpu.Detect(ctx)
	if err != nil {
		return fmt.Errorf("the agent's GPU detection: %w", err)
	}
	if len(gpus) == 0 {
		return errors.New("nvidia-smi lists no GPU")
	}
	driver, cuda := gpu.Driver(ctx)
	fmt.Fprintf(out, "detection: %d GPU(s), driver %s, CUDA %s, agent tags %s\n", len(gpus), driver, cuda, strings.Join(gpu.Tags(gpus), " "))
	for _, g := range gpus {
		fmt.Fprintf(out, "  GPU %d: %s, %d MiB, %s\n", g.Index, g.Name, g.MemoryMiB, g.UUID)
	}
	if *detectOnly {
		return nil
	}

	d, err := executor.NewDocker(ctx, *host, "gpu-check")
	if err != nil {
		return fmt.Errorf("the Docker engine: %w", err)
	}
	defer d.Close()
	d.NetworkMode = "none"
	info, err := d.Client().Info(ctx)
	if err != nil {
		return fmt.Errorf("the Docker engine: %w", err)
	}
	runtimes := make([]string, 0, len(info.Runtimes))
	for name := range info.Runtimes {
		runtimes = append(runtimes, name)
	}
	if err := nvidiaRuntime(runtimes, exec.LookPath); err != nil {
		return err
	}
	fmt.Fprintf(out, "engine: %s, runtimes %s\n", info.ServerVersion, strings.Join(runtimes, " "))

	check := []protocol.GPU{gpus[0]}
	if *all {
		check = gpus
	} else if len(gpus) > 1 {
		check = append(check, gpus[len(gpus)-1])
	}
	checkout, err := os.MkdirTemp("", "nimbus-gpucheck-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(checkout)
	for _, g := range check {
		var buf bytes.Buffer
		code, err := d.Run(ctx, executor.Step{
			Name: "gpu-check-" + strconv.Itoa(g.Index), Image: *image, Script: `PATH="$PATH:/usr/bin:/usr/local/bin:/usr/local/nvidia/bin"; nvidia-smi -L`,
			GPUs: []string{strconv.Itoa(g.Index)}, Checkout: checkout, Output: &buf,
			// What the pipeline's containers get: utility brings nvidia-smi, compute CUDA.
			Env: map[string]string{"NVIDIA_DRIVER_CAPABILITIES": "compute,utility"},
		})
		if err != nil {
			return fmt.Errorf("the container for GPU %d: %w", g.Index, err)
		}
		if code != 0 {
			return fmt.Errorf("nvidia-smi -L in the container for GPU %d exited %d:\n%s", g.Index, code, buf.String())
		}
		if err := onlyGPU(buf.String(), g); err != nil {
			return err
		}
		fmt.Fprintf(out, "container with --gpus device=%d: nvidia-smi -L lists exactly %s (%s)\n", g.Index, g.UUID, g.Name)
	}
	fmt.Fprintln(out, "gpu-check: OK")
	return nil
}

// nvidiaRuntime says whether the engine can hand GPUs to containers: the nvidia runtime is
// registered with it, or the NVIDIA Container Toolkit's hook or CLI is installed (what the
// engine's device request for the "nvidia" driver calls).
func nvidiaRuntime(runtimes []string, lookPath func(string) (string, error)) error {
	for _, r := range runtimes {
		if strings.Contains(r, "nvidia") {
			return nil
		}
	}
	for _, bin := range []string{"nvidia-container-runtime-hook", "nvidia-container-cli", "nvidia-ctk"} {
		if _, err := lookPath(bin); err == nil {
			return nil
		}
	}
	return fmt.Errorf("the NVIDIA container runtime is missing: the engine has runtimes %v and no nvidia-container-runtime-hook, nvidia-container-cli or nvidia-ctk is installed; install the NVIDIA Container Toolkit and register it with Docker (nvidia-ctk runtime configure --runtime=docker)", runtimes)
}

var listing = regexp.MustCompile(`(?m)^GPU (\d+): (.+?) \(UUID: ([^)]+)\)\s*$`)

// onlyGPU checks nvidia-smi -L's output from a container given g: exactly one GPU, g (by UUID;
// inside, it is GPU 0).
func onlyGPU(out string, g protocol.GPU) error {
	found := listing.FindAllStringSubmatch(out, -1)
	if len(found) != 1 {
		return fmt.Errorf("the container given GPU %d sees %d GPUs, want exactly 1:\n%s", g.Index, len(found), out)
	}
	if g.UUID != "" && found[0][3] != g.UUID {
		return fmt.Errorf("the container given GPU %d (%s) sees %s", g.Index, g.UUID, found[0][3])
	}
	return nil
}
