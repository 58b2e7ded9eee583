package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

func TestOnlyGPU(t *testing.T) {
	g := protocol.GPU{Index: 3, UUID: "GPU-bbbb", Name: "NVIDIA H200"}
	for _, tc := range []struct {
		name, out, wantErr string
	}{
		{"exactly it", "GPU 0: NVIDIA H200 (UUID: GPU-bbbb)\n", ""},
		{"another one", "GPU 0: NVIDIA H200 (UUID: GPU-aaaa)\n", "sees GPU-aaaa"},
		{"all of them", "GPU 0: NVIDIA H200 (UUID: GPU-aaaa)\nGPU 1: NVIDIA H200 (UUID: GPU-bbbb)\n", "sees 2 GPUs"},
		{"none", "No devices were found\n", "sees 0 GPUs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := onlyGPU(tc.out, g)
			if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestNvidiaRuntime(t *testing.T) {
	none := func(string) (string, error) { return "", errors.New("not found") }
	if err := nvidiaRuntime([]string{"runc", "nvidia"}, none); err != nil {
		t.Errorf("registered runtime: %v", err)
	}
	hook := func(b string) (string, error) {
		if b == "nvidia-container-runtime-hook" {
			return "/usr/bin/" + b, nil
		}
		return "", errors.New("not found")
	}
	if err := nvidiaRuntime([]string{"runc"}, hook); err != nil {
		t.Errorf("toolkit hook: %v", err)
	}
	if err := nvidiaRuntime([]string{"runc", "io.containerd.runc.v2"}, none); err == nil || !strings.Contains(err.Error(), "NVIDIA container runtime is missing") {
		t.Errorf("no runtime: %v", err)
	}
}

// Here (no NVIDIA driver) the check stops at once with the reason.
func TestRunWithoutNvidiaSmi(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	var out strings.Builder
	err := run(context.Background(), []string{"-image", "busybox"}, &out)
	if err == nil || !strings.Contains(err.Error(), "nvidia-smi is not on PATH") {
		t.Fatalf("err %v", err)
	}
	if err := run(context.Background(), nil, &out); err == nil || !strings.Contains(err.Error(), "-image is required") {
		t.Fatalf("no image: %v", err)
	}
}
