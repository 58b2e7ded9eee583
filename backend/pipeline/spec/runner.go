package spec

import (
	"fmt"
	"strings"

	"github.com/nimbus-build/nimbus/backend/pipeline/spec/internal/suggest"
	"github.com/nimbus-build/nimbus/backend/runnerclass"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// runnerClasses indexes the configured runner classes (backend/runnerclass) by tag.
type runnerClasses struct {
	list  []runnerclass.Class
	byTag map[string]*runnerclass.Class
}

func newRunnerClasses(list []runnerclass.Class) runnerClasses {
	rc := runnerClasses{list: list, byTag: map[string]*runnerclass.Class{}}
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

// resolve finds the class for a pipeline's tags. All tags must name the same class: a node
// advertises the tags it serves, and mixing classes would leave cores and caps ambiguous. A tag
// outside the cnb: namespace names a team runner (runnerclass.Team); a pipeline names one such
// tag and no cnb: tag with it, since a team runner is chosen by that one tag.
func (rc runnerClasses) resolve(tags []string) (*runnerclass.Class, error) {
	if len(tags) == 0 {
		tags = []string{runnerclass.DefaultTag}
	}
	var class *runnerclass.Class
	for _, t := range tags {
		c, ok := rc.byTag[t]
		if !ok && runnerclass.IsTeamTag(t, rc.list) {
			if class != nil {
				return nil, &hintError{
					msg:  fmt.Sprintf("runner tags %q and %q cannot be combined: %q names a team runner", class.Tags[0], t, t),
					hint: "a team runner is chosen by one tag of its own; keep that one (register the runner with every tag it serves)",
				}
			}
			team := runnerclass.Team(t)
			class = &team
			continue
		}
		if ok && class != nil && runnerclass.IsTeamTag(class.Tags[0], rc.list) {
			return nil, &hintError{
				msg:  fmt.Sprintf("runner tags %q and %q cannot be combined: %q names a team runner", class.Tags[0], t, class.Tags[0]),
				hint: "a team runner is chosen by one tag of its own; keep that one (register the runner with every tag it serves)",
			}
		}
		if !ok {
			return nil, &hintError{
				msg:  fmt.Sprintf("unknown runner tag %q", t),
				hint: "known tags: " + strings.Join(rc.knownTags(), ", ") + suggest.Suffix(t, rc.knownTags()),
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
func effectiveCPUs(c *runnerclass.Class, requested int) (int, error) {
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

// planRunner builds the plan's runner for a class and effective cores.
func planRunner(c *runnerclass.Class, tags []string, requested, cpus int, namespace string) protocol.Runner {
	if len(tags) == 0 {
		tags = []string{runnerclass.DefaultTag}
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
