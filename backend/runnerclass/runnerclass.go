// Package runnerclass holds the kinds of build node a pipeline can ask for (runner classes): the
// tags that select each, its cores, memory, GPU and time caps. It is configuration and pricing
// data, read by the pipeline spec (which checks runner.tags and runner.cpus against it), the
// scheduler (which queues by a class's canonical tag) and billing (which prices each class). It
// imports nothing of the project, so none of them needs another to know the classes.
package runnerclass

import (
	"strings"
	"time"
)

// Class is one kind of build node. Classes are configuration data: Defaults is Part A's table,
// and the server may configure its own.
type Class struct {
	// Tags select the class in runner.tags; the first is the canonical one reported in plans.
	Tags []string
	// FixedCPUs > 0 makes a fixed-core class: cpus may be omitted or lower (billing and allocation
	// still use FixedCPUs), and a higher value is an error.
	FixedCPUs int
	// MinCPUs, MaxCPUs and DefaultCPUs bound runner.cpus on a class without fixed cores.
	MinCPUs, MaxCPUs, DefaultCPUs int
	// MemoryPerCPUGiB times the effective cores is the node's memory.
	MemoryPerCPUGiB int
	GPU             string // GPU model, "" for none, "any" when the class does not pin a model
	GPUMemoryGB     int
	// MaxDuration is the pipeline hard cap; no job timeout may exceed it.
	MaxDuration time.Duration
	// NoOutputTimeout fails a job that prints nothing for this long; 0 is off.
	NoOutputTimeout time.Duration
}

// DefaultTag is the runner tag of a pipeline that declares none.
const DefaultTag = "cnb:arch:default"

// Defaults returns Part A's table: amd64 (1–64 cores, default 8), arm64 (1–16, default 8), and
// the fixed-core GPU classes, all with 2 GiB per core and an 18-hour cap; plus CNB's other
// published tags that real files name (Part A.10): the older …:gpu:L20 (16 cores, 48 GB) and
// …:containerd-snapshotter (an amd64 node whose engine uses containerd's image store).
func Defaults() []Class {
	const cap18h = 18 * time.Hour
	return []Class{
		{Tags: []string{"cnb:arch:amd64", DefaultTag}, MinCPUs: 1, MaxCPUs: 64, DefaultCPUs: 8, MemoryPerCPUGiB: 2, MaxDuration: cap18h},
		{Tags: []string{"cnb:arch:arm64:v8"}, MinCPUs: 1, MaxCPUs: 16, DefaultCPUs: 8, MemoryPerCPUGiB: 2, MaxDuration: cap18h},
		{Tags: []string{"cnb:arch:amd64:gpu"}, FixedCPUs: 16, MemoryPerCPUGiB: 2, GPU: "any", GPUMemoryGB: 48, MaxDuration: cap18h},
		{Tags: []string{"cnb:arch:amd64:gpu:L40"}, FixedCPUs: 16, MemoryPerCPUGiB: 2, GPU: "L40", GPUMemoryGB: 48, MaxDuration: cap18h},
		{Tags: []string{"cnb:arch:amd64:gpu:H20"}, FixedCPUs: 32, MemoryPerCPUGiB: 2, GPU: "H20", GPUMemoryGB: 96, MaxDuration: cap18h},
		{Tags: []string{"cnb:arch:amd64:gpu:L20"}, FixedCPUs: 16, MemoryPerCPUGiB: 2, GPU: "L20", GPUMemoryGB: 48, MaxDuration: cap18h},
		{Tags: []string{"cnb:arch:amd64:containerd-snapshotter"}, MinCPUs: 1, MaxCPUs: 64, DefaultCPUs: 8, MemoryPerCPUGiB: 2, MaxDuration: cap18h},
	}
}

// IsTeamTag says whether a runner tag names a team's own runner rather than a platform class:
// every tag outside the cnb: namespace that no configured class claims (Part A.10).
func IsTeamTag(tag string, classes []Class) bool {
	if tag == "" || strings.HasPrefix(tag, "cnb:") {
		return false
	}
	for _, c := range classes {
		for _, t := range c.Tags {
			if t == tag {
				return false
			}
		}
	}
	return true
}

// Team is the class of a pipeline that names a team runner's tag. A team's own host has no
// fixed size the platform knows, so cpus only reserves that many of its cores (1 unless
// runner.cpus says more), memory is not limited, and no GPU is assumed; the 18-hour cap holds
// as everywhere.
func Team(tag string) Class {
	return Class{Tags: []string{tag}, MinCPUs: 1, MaxCPUs: MaxTeamCPUs, DefaultCPUs: 1, MaxDuration: 18 * time.Hour}
}

// MaxTeamCPUs bounds runner.cpus on a team runner.
const MaxTeamCPUs = 1024
