package spec

import (
	"fmt"
	"strings"
	"time"

	"github.com/nimbus-build/nimbus/agent/protocol"
)

// RunnerClass is one kind of build node. Classes are configuration data: the defaults below are
// Part A's table, and the server may pass its own to Options.Classes.
type RunnerClass struct {
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

// DefaultRunnerClasses returns Part A's table: amd64 (1–64 cores, default 8), arm64 (1–16,
// default 8), and the fixed-core GPU classes, all with 2 GiB per core and an 18-hour cap; plus
// CNB's other published tags that real files name (Part A.10): the older …:gpu:L20 (16 cores,
// 48 GB) and …:containerd-snapshotter (an amd64 node whose engine uses containerd's image store).
func DefaultRunnerClasses() []RunnerClass {
	const cap18h = 18 * time.Hour
	return []RunnerClass{
		{Tags: []string{"cnb:arch:amd64", "cnb:arch:default"}, MinCPUs: 1, MaxCPUs: 64, DefaultCPUs: 8, MemoryPerCPUGiB: 2, MaxDuration: cap18h},
		{Tags: []string{"cnb:arch:arm64:v8"}, MinCPUs: 1, MaxCPUs: 16, DefaultCPUs: 8, MemoryPerCPUGiB: 2, MaxDuration: cap18h},
		{Tags: []string{"cnb:arch:amd64:gpu"}, FixedCPUs: 16, MemoryPerCPUGiB: 2, GPU: "any", GPUMemoryGB: 48, MaxDuration: cap18h},
		{Tags: []string{"cnb:arch:amd64:gpu:L40"}, FixedCPUs: 16, MemoryPerCPUGiB: 2, GPU: "L40", GPUMemoryGB: 48, MaxDuration: cap18h},
		{Tags: []string{"cnb:arch:amd64:gpu:H20"}, FixedCPUs: 32, MemoryPerCPUGiB: 2, GPU: "H20", GPUMemoryGB: 96, MaxDuration: cap18h},
		{Tags: []string{"cnb:arch:amd64:gpu:L20"}, FixedCPUs: 16, MemoryPerCPUGiB: 2, GPU: "L20", GPUMemoryGB: 48, MaxDuration: cap18h},
		{Tags: []string{"cnb:arch:amd64:containerd-snapshotter"}, MinCPUs: 1, MaxCPUs: 64, DefaultCPUs: 8, MemoryPerCPUGiB: 2, MaxDuration: cap18h},
	}
}

// runnerClasses indexes classes by tag.
type runnerClasses struct {
	list  []RunnerClass
	byTag map[string]*RunnerClass
}

func newRunnerClasses(list []RunnerClass) runnerClasses {
	rc := runnerClasses{list: list, byTag: map[string]*RunnerClass{}}
	for i := range rc.list {
		for _, t := range rc.list[i].Tags {
			rc.byTag[t] = &rc.list[i]
		}
	}
	return rc
}

func (rc runnerClasses) knownTags() []string {
	var tags []string
	for _, c := range rc.list {
		tags = append(tags, c.Tags...)
	}
	return tags
}

// IsTeamTag says whether a runner tag names a team's own runner rather than a platform class:
// every tag outside the cnb: namespace that no configured class claims (Part A.10).
func IsTeamTag(tag string, classes []RunnerClass) bool {
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

// TeamRunnerClass is the class of a pipeline that names a team runner's tag. A team's own host
// has no fixed size the platform knows, so cpus only reserves that many of its cores (1 unless
// runner.cpus says more), memory is not limited, and no GPU is assumed; the 18-hour cap holds
// as everywhere.
func TeamRunnerClass(tag string) RunnerClass {
	return RunnerClass{Tags: []string{tag}, MinCPUs: 1, MaxCPUs: MaxTeamRunnerCPUs, DefaultCPUs: 1, MaxDuration: 18 * time.Hour}
}

// MaxTeamRunnerCPUs bounds runner.cpus on a team runner.
const MaxTeamRunnerCPUs = 1024

// resolve finds the class for a pipeline's tags. All tags must name the same class: a node
// advertises the tags it serves, and mixing classes would leave cores and caps ambiguous. A tag
// outside the cnb: namespace names a team runner (TeamRunnerClass); a pipeline names one such
// tag and no cnb: tag with it, since a team runner is chosen by that one tag.
func (rc runnerClasses) resolve(tags []string) (*RunnerClass, error) {
	if len(tags) == 0 {
		tags = []string{DefaultTag}
	}
	var class *RunnerClass
	for _, t := range tags {
		c, ok := rc.byTag[t]
		if !ok && IsTeamTag(t, rc.list) {
			if class != nil {
				return nil, &hintError{
					msg:  fmt.Sprintf("runner tags %q and %q cannot be combined: %q names a team runner", class.Tags[0], t, t),
					hint: "a team runner is chosen by one tag of its own; keep that one (register the runner with every tag it serves)",
				}
			}
			team := TeamRunnerClass(t)
			class = &team
			continue
		}
		if ok && class != nil && IsTeamTag(class.Tags[0], rc.list) {
			return nil, &hintError{
				msg:  fmt.Sprintf("runner tags %q and %q cannot be combined: %q names a team runner", class.Tags[0], t, class.Tags[0]),
				hint: "a team runner is chosen by one tag of its own; keep that one (register the runner with every tag it serves)",
			}
		}
		if !ok {
			return nil, &hintError{
				msg:  fmt.Sprintf("unknown runner tag %q", t),
				hint: "known tags: " + strings.Join(rc.knownTags(), ", ") + didYouMeanSuffix(t, rc.knownTags()),
			}
		}
		if class != nil && class != c {
			return nil, &hintError{
				msg:  fmt.Sprintf("runner tags %q and %q name different runner classes", class.Tags[0], t),
				hint: "a pipeline runs on one node: keep one class tag",
			}
		}
		class = c
	}
	return class, nil
}

// effectiveCPUs applies the class's rules to runner.cpus (0 when absent).
func (c *RunnerClass) effectiveCPUs(requested int) (int, error) {
	if c.FixedCPUs > 0 {
		if requested > c.FixedCPUs {
			return 0, &hintError{
				msg:  fmt.Sprintf("cpus %d is more than the %d cores of %s", requested, c.FixedCPUs, c.Tags[0]),
				hint: fmt.Sprintf("%s has a fixed %d cores; omit cpus or set it to %d", c.Tags[0], c.FixedCPUs, c.FixedCPUs),
			}
		}
		if requested < 0 {
			return 0, fmt.Errorf("cpus must be a positive number")
		}
		return c.FixedCPUs, nil
	}
	if requested == 0 {
		return c.DefaultCPUs, nil
	}
	if requested < c.MinCPUs || requested > c.MaxCPUs {
		return 0, &hintError{
			msg:  fmt.Sprintf("cpus %d is outside %d–%d for %s", requested, c.MinCPUs, c.MaxCPUs, c.Tags[0]),
			hint: fmt.Sprintf("choose between %d and %d cores", c.MinCPUs, c.MaxCPUs),
		}
	}
	return requested, nil
}

// runner builds the plan's runner for a class and effective cores.
func (c *RunnerClass) runner(tags []string, requested, cpus int, namespace string) protocol.Runner {
	if len(tags) == 0 {
		tags = []string{DefaultTag}
	}
	return protocol.Runner{
		Tags:            tags,
		Cpus:            cpus,
		RequestedCpus:   requested,
		Class:           c.Tags[0],
		MemoryGiB:       cpus * c.MemoryPerCPUGiB,
		GPU:             c.GPU,
		GPUMemoryGB:     c.GPUMemoryGB,
		MaxDuration:     protocol.Duration(c.MaxDuration),
		NoOutputTimeout: protocol.Duration(c.NoOutputTimeout),
		Namespace:       namespace,
	}
}

// hintError is an error with a hint for the diagnostic it becomes.
type hintError struct{ msg, hint string }

func (e *hintError) Error() string { return e.msg }
