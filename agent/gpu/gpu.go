// Package gpu finds the NVIDIA GPUs of an agent's host and the runner tags they let it serve. It
// is intended for internal use of the agent only.
//
// Detection asks nvidia-smi, and only when it is on PATH: a CPU host has no GPUs and no error.
// The parser takes both CSV forms the project meets —
//
//	nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits
//	nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
//
// the first being what Detect runs (the index and UUID are what Docker device requests need),
// the second what operators paste from the issue tracker.
package gpu

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// TagGPU is the tag of every GPU host; TagGPU + ":" + model names one model.
const TagGPU = "cnb:arch:amd64:gpu"

// Detect runs nvidia-smi when it is on PATH and returns the host's GPUs; none and no error when it
// is not there. A present but failing nvidia-smi (driver not loaded) is an error: the operator
// installed it for a reason and should hear that it does not work.
func Detect(ctx context.Context) ([]protocol.GPU, error) {
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path,
		"--query-gpu=index,uuid,name,memory.total", "--format=csv,noheader,nounits").Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && len(exit.Stderr) > 0 {
			return nil, fmt.Errorf("gpu: nvidia-smi: %w: %s", err, strings.TrimSpace(string(exit.Stderr)))
		}
		return nil, fmt.Errorf("gpu: nvidia-smi: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return Parse(string(out))
}

// Parse reads nvidia-smi CSV output, in the 4-column (index, uuid, name, memory) or the
// 2-column (name, memory) form, with or without units. Blank lines are ignored; in the 2-column
// form a GPU's index is its line number among the GPUs.
func Parse(out string) ([]protocol.GPU, error) {
	var gpus []protocol.GPU
	for n, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		fields := strings.Split(line, ",")
		for i := range fields {
			fields[i] = strings.TrimSpace(fields[i])
		}
		g := protocol.GPU{Index: len(gpus)}
		var mem string
		switch len(fields) {
		case 4:
			idx, err := strconv.Atoi(fields[0])
			if err != nil || idx < 0 {
				return nil, fmt.Errorf("gpu: line %d: index %q is not a number (%q)", n+1, fields[0], line)
			}
			g.Index, g.UUID, g.Name, mem = idx, fields[1], fields[2], fields[3]
		case 2:
			g.Name, mem = fields[0], fields[1]
		default:
			return nil, fmt.Errorf("gpu: line %d is not nvidia-smi CSV output: %q", n+1, line)
		}
		if g.Name == "" {
			return nil, fmt.Errorf("gpu: line %d has no GPU name: %q", n+1, line)
		}
		mib, err := parseMiB(mem)
		if err != nil {
			return nil, fmt.Errorf("gpu: line %d: %w", n+1, err)
		}
		g.MemoryMiB = mib
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// parseMiB reads "49140", "49140 MiB" or "48 GiB" into MiB.
func parseMiB(s string) (int, error) {
	num, unit, _ := strings.Cut(s, " ")
	v, err := strconv.Atoi(num)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("memory %q is not a number of MiB", s)
	}
	switch strings.TrimSpace(unit) {
	case "", "MiB":
		return v, nil
	case "GiB":
		return v * 1024, nil
	}
	return 0, fmt.Errorf("memory %q has an unknown unit", s)
}

// Tags returns the runner tags the GPUs serve: TagGPU, then one per distinct model in order of
// appearance. No GPUs, no tags.
func Tags(gpus []protocol.GPU) []string {
	if len(gpus) == 0 {
		return nil
	}
	tags := []string{TagGPU}
	seen := map[string]bool{}
	for _, g := range gpus {
		m := Model(g.Name)
		if m == "" || seen[m] {
			continue
		}
		seen[m] = true
		tags = append(tags, TagGPU+":"+m)
	}
	return tags
}

// Model derives the model tag from a GPU name: the first word that is not a brand, cut at its
// first dash, upper-cased; a family word (RTX, GTX) joins the word after it. So "NVIDIA L40" is
// L40, "NVIDIA H200 NVL" is H200, "NVIDIA A100-SXM4-80GB" is A100, "Tesla V100-PCIE-32GB" is
// V100, "NVIDIA GeForce RTX 4090" is RTX4090 and "NVIDIA RTX A6000" is RTXA6000.
func Model(name string) string {
	words := strings.Fields(name)
	for i := 0; i < len(words); i++ {
		w := strings.ToUpper(words[i])
		if w == "NVIDIA" || w == "TESLA" || w == "GEFORCE" || w == "QUADRO" { // brands, not models
			continue
		}
		if (w == "RTX" || w == "GTX") && i+1 < len(words) {
			w += strings.ToUpper(words[i+1])
		}
		w, _, _ = strings.Cut(w, "-")
		return clean(w)
	}
	return ""
}

// clean keeps the characters a tag may hold.
func clean(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Simulated parses "simulate:N[:MODEL]" into N pretend GPUs of MODEL (default "Simulated"), for
// hosts without a GPU where GPU scheduling and billing must still be exercised. Their ids start
// at 0 like real ones; the executor must not ask the engine for devices (agent Config.SimulatedGPUs).
func Simulated(spec string) ([]protocol.GPU, error) {
	rest, ok := strings.CutPrefix(spec, "simulate:")
	if !ok {
		return nil, fmt.Errorf("gpu: %q is not simulate:N[:MODEL]", spec)
	}
	count, model, _ := strings.Cut(rest, ":")
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 || n > 64 {
		return nil, fmt.Errorf("gpu: %q: N must be 1 to 64", spec)
	}
	if model == "" {
		model = "Simulated"
	}
	out := make([]protocol.GPU, n)
	for i := range out {
		out[i] = protocol.GPU{Index: i, UUID: fmt.Sprintf("SIM-%d", i), Name: "NVIDIA " + model, MemoryMiB: 49152}
	}
	return out, nil
}

// Cluster parses cluster:N[:MODEL], the GPUs of a Kubernetes executor: N is how many GPU
// pipelines it keeps on its cluster at once (the cluster's nodes have the devices; their pods
// request them), MODEL their model for the runner tags (cnb:arch:amd64:gpu:MODEL).
func Cluster(spec string) ([]protocol.GPU, error) {
	rest, ok := strings.CutPrefix(spec, "cluster:")
	if !ok {
		return nil, fmt.Errorf("gpu: %q is not cluster:N[:MODEL]", spec)
	}
	out, err := Simulated("simulate:" + rest)
	if err != nil {
		return nil, fmt.Errorf("gpu: %q: N must be 1 to 64", spec)
	}
	for i := range out {
		out[i].UUID = fmt.Sprintf("CLUSTER-%d", i)
		if !strings.Contains(rest, ":") {
			out[i].Name = "NVIDIA GPU"
		}
	}
	return out, nil
}

// Driver returns the NVIDIA driver and the CUDA version it supports, as nvidia-smi prints them
// in its banner ("Driver Version: 550.54.15   CUDA Version: 12.4"); "" for each when nvidia-smi
// is not there or does not say. They go into pipelines' reproducibility records.
func Driver(ctx context.Context) (driver, cuda string) {
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return "", ""
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path).Output()
	if err != nil {
		return "", ""
	}
	return ParseBanner(string(out))
}

// ParseBanner reads the driver and CUDA versions from nvidia-smi's banner.
func ParseBanner(out string) (driver, cuda string) {
	field := func(label string) string {
		i := strings.Index(out, label)
		if i < 0 {
			return ""
		}
		rest := strings.TrimLeft(out[i+len(label):], " :")
		if end := strings.IndexAny(rest, " \t\n|"); end >= 0 {
			rest = rest[:end]
		}
		return rest
	}
	return field("Driver Version"), field("CUDA Version")
}
