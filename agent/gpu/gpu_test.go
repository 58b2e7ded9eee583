package gpu

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Outputs recorded from real hosts (UUIDs shortened by hand where noted).
const (
	l40x2 = "0, GPU-5b2c7e3a-1f2d-4c2b-9e4a-0f6b1d2c3e4f, NVIDIA L40, 46068\n" +
		"1, GPU-8d1e0c44-7a9b-4e1f-b2c3-d4e5f6a7b8c9, NVIDIA L40, 46068\n"
	h200 = "0, GPU-1c0e8d2f-3b4a-5c6d-7e8f-9a0b1c2d3e4f, NVIDIA H200, 143771\n"
	// The form quoted in the issue: name and memory with units.
	h20Units = "NVIDIA H20, 97871 MiB\nNVIDIA H20, 97871 MiB\n"
	a100     = "NVIDIA A100-SXM4-80GB, 81920 MiB\r\n\r\n"
	mixed    = "\n0, GPU-aaaa, Tesla V100-PCIE-32GB, 32768\n\n1, GPU-bbbb, NVIDIA GeForce RTX 4090, 24564\n2, GPU-cccc, NVIDIA L40S, 46068\n\n"
	noDriver = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n"
)

func TestParseAndTags(t *testing.T) {
	tests := []struct {
		name  string
		out   string
		gpus  []protocol.GPU
		tags  []string
		error string
	}{
		{"two L40 (4 columns, no units)", l40x2, []protocol.GPU{
			{Index: 0, UUID: "GPU-5b2c7e3a-1f2d-4c2b-9e4a-0f6b1d2c3e4f", Name: "NVIDIA L40", MemoryMiB: 46068},
			{Index: 1, UUID: "GPU-8d1e0c44-7a9b-4e1f-b2c3-d4e5f6a7b8c9", Name: "NVIDIA L40", MemoryMiB: 46068},
		}, []string{"cnb:arch:amd64:gpu", "cnb:arch:amd64:gpu:L40"}, ""},
		{"one H200", h200, []protocol.GPU{
			{Index: 0, UUID: "GPU-1c0e8d2f-3b4a-5c6d-7e8f-9a0b1c2d3e4f", Name: "NVIDIA H200", MemoryMiB: 143771},
		}, []string{"cnb:arch:amd64:gpu", "cnb:arch:amd64:gpu:H200"}, ""},
		{"H20 in the issue's form, MiB suffix", h20Units, []protocol.GPU{
			{Index: 0, Name: "NVIDIA H20", MemoryMiB: 97871}, {Index: 1, Name: "NVIDIA H20", MemoryMiB: 97871},
		}, []string{"cnb:arch:amd64:gpu", "cnb:arch:amd64:gpu:H20"}, ""},
		{"A100 with CRLF and a blank line", a100, []protocol.GPU{
			{Index: 0, Name: "NVIDIA A100-SXM4-80GB", MemoryMiB: 81920},
		}, []string{"cnb:arch:amd64:gpu", "cnb:arch:amd64:gpu:A100"}, ""},
		{"mixed models and blank lines", mixed, []protocol.GPU{
			{Index: 0, UUID: "GPU-aaaa", Name: "Tesla V100-PCIE-32GB", MemoryMiB: 32768},
			{Index: 1, UUID: "GPU-bbbb", Name: "NVIDIA GeForce RTX 4090", MemoryMiB: 24564},
			{Index: 2, UUID: "GPU-cccc", Name: "NVIDIA L40S", MemoryMiB: 46068},
		}, []string{"cnb:arch:amd64:gpu", "cnb:arch:amd64:gpu:V100", "cnb:arch:amd64:gpu:RTX4090", "cnb:arch:amd64:gpu:L40S"}, ""},
		{"GiB units", "NVIDIA L40, 48 GiB\n", []protocol.GPU{{Index: 0, Name: "NVIDIA L40", MemoryMiB: 48 * 1024}},
			[]string{"cnb:arch:amd64:gpu", "cnb:arch:amd64:gpu:L40"}, ""},
		{"empty output: no GPUs, no tags", "\n\n", nil, nil, ""},
		{"driver not loaded", noDriver, nil, nil, "not nvidia-smi CSV"},
		{"no devices", "No devices were found\n", nil, nil, "not nvidia-smi CSV"},
		{"memory not available", "NVIDIA L40, [N/A]\n", nil, nil, "not a number"},
		{"unknown unit", "NVIDIA L40, 46068 KiB\n", nil, nil, "unknown unit"},
		{"bad index", "x, GPU-1, NVIDIA L40, 46068\n", nil, nil, "index"},
		{"three columns", "0, NVIDIA L40, 46068\n", nil, nil, "not nvidia-smi CSV"},
		{"no name", ", 46068\n", nil, nil, "no GPU name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gpus, err := Parse(tt.out)
			if tt.error != "" {
				if err == nil || !strings.Contains(err.Error(), tt.error) {
					t.Fatalf("err = %v, want one with %q", err, tt.error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(gpus, tt.gpus) {
				t.Fatalf("gpus = %+v\nwant   %+v", gpus, tt.gpus)
			}
			if got := Tags(gpus); !reflect.DeepEqual(got, tt.tags) {
				t.Fatalf("tags = %v, want %v", got, tt.tags)
			}
		})
	}
}

func TestModel(t *testing.T) {
	for name, want := range map[string]string{
		"NVIDIA L40":              "L40",
		"NVIDIA H20":              "H20",
		"NVIDIA H200":             "H200",
		"NVIDIA H200 NVL":         "H200",
		"NVIDIA H100 80GB HBM3":   "H100",
		"NVIDIA A100-SXM4-80GB":   "A100",
		"Tesla T4":                "T4",
		"NVIDIA RTX A6000":        "RTXA6000",
		"NVIDIA GeForce GTX 1080": "GTX1080",
		"nvidia l40":              "L40",
		"NVIDIA":                  "",
	} {
		if got := Model(name); got != want {
			t.Errorf("Model(%q) = %q, want %q", name, got, want)
		}
	}
}

// fakeSMI puts an nvidia-smi script on an otherwise empty PATH.
func fakeSMI(t *testing.T, script string) {
	dir := t.TempDir()
	if script != "" {
		if err := os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir)
}

func TestDetect(t *testing.T) {
	sh := "/bin/sh"
	if _, err := os.Stat(sh); err != nil {
		t.Fatalf("the test needs %s: %v", sh, err)
	}
	t.Run("no nvidia-smi on PATH", func(t *testing.T) {
		fakeSMI(t, "")
		gpus, err := Detect(context.Background())
		if err != nil || gpus != nil {
			t.Fatalf("%v %v", gpus, err)
		}
	})
	t.Run("it is asked the 4-column query", func(t *testing.T) {
		// The script answers only when asked exactly what Detect must ask.
		fakeSMI(t, `[ "$1 $2" = "--query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits" ] || { echo "bad args: $*" >&2; exit 2; }
printf '%s' '`+l40x2+`'`)
		gpus, err := Detect(context.Background())
		if err != nil || len(gpus) != 2 || gpus[1].UUID != "GPU-8d1e0c44-7a9b-4e1f-b2c3-d4e5f6a7b8c9" {
			t.Fatalf("%+v %v", gpus, err)
		}
	})
	t.Run("a failing nvidia-smi is an error with its message", func(t *testing.T) {
		fakeSMI(t, `echo "`+strings.TrimSpace(noDriver)+`"; exit 9`)
		_, err := Detect(context.Background())
		if err == nil || !strings.Contains(err.Error(), "couldn't communicate") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestSimulated(t *testing.T) {
	g, err := Simulated("simulate:2:L40")
	if err != nil || len(g) != 2 || g[1].Index != 1 || g[0].Name != "NVIDIA L40" {
		t.Fatalf("%+v %v", g, err)
	}
	if tags := Tags(g); len(tags) == 0 || tags[len(tags)-1] != TagGPU+":L40" {
		t.Fatalf("tags %v", tags)
	}
	for _, bad := range []string{"simulate:0", "simulate:x", "emulate:1", "simulate:65"} {
		if _, err := Simulated(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestCluster(t *testing.T) {
	g, err := Cluster("cluster:3:L40")
	if err != nil || len(g) != 3 || g[2].UUID != "CLUSTER-2" || g[0].Name != "NVIDIA L40" {
		t.Fatalf("%+v %v", g, err)
	}
	if tags := Tags(g); len(tags) == 0 || tags[len(tags)-1] != TagGPU+":L40" {
		t.Fatalf("tags %v", tags)
	}
	if g, err := Cluster("cluster:1"); err != nil || g[0].Name != "NVIDIA GPU" {
		t.Fatalf("no model: %+v %v", g, err)
	}
	for _, bad := range []string{"cluster:0", "cluster:x", "simulate:1", "cluster:65"} {
		if _, err := Cluster(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseBanner(t *testing.T) {
	banner := `Tue Dec  1 10:00:00 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
`
	if d, c := ParseBanner(banner); d != "550.54.15" || c != "12.4" {
		t.Fatalf("ParseBanner = %q, %q", d, c)
	}
	if d, c := ParseBanner("No devices were found\n"); d != "" || c != "" {
		t.Fatalf("ParseBanner of no banner = %q, %q", d, c)
	}
}
