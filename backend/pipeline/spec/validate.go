package spec

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nimbus-build/nimbus/backend/pipeline/spec/internal/suggest"
	"github.com/nimbus-build/nimbus/backend/runnerclass"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Validation rules that need configuration: runner classes and their caps, the built-in tasks
// this installation runs, and the names of pipelines within an event.

// knownBuiltins are the built-in task types of the reference.
var knownBuiltins = []string{"docker:cache", "cnb:await", "cnb:resolve", "cnb:apply", "cnb:trigger",
	"cnb:read-file", "vscode:go", "git:auto-merge", "git:issue-update", "git:reviewer", "git:release",
	"testing:coverage", "artifact:remove-tag"}

// unsupportedBuiltin returns the message a job of this built-in type fails with, or "" when this
// installation runs it: every agent runs protocol.AgentBuiltins itself, beside what the
// installation declares in Options.SupportedBuiltins.
func unsupportedBuiltin(typ string, supported []string) string {
	if slices.Contains(protocol.AgentBuiltins(), typ) || slices.Contains(supported, typ) {
		return ""
	}
	return fmt.Sprintf("built-in task %q is not supported by this installation", typ)
}

func (dc *decoder) checkBuiltin(j *jobDecl, pos Pos) {
	switch {
	case j.typ == "":
		dc.d.errorf(pos, "type is empty")
	case !slices.Contains(knownBuiltins, j.typ) && !strings.HasPrefix(j.typ, "npc:"):
		dc.d.warnHint(pos, suggest.Hint(j.typ, knownBuiltins), "unknown built-in task type %q", j.typ)
	default:
		if msg := unsupportedBuiltin(j.typ, dc.opts.SupportedBuiltins); msg != "" {
			runs := append(slices.Clone(protocol.AgentBuiltins()), dc.opts.SupportedBuiltins...)
			slices.Sort(runs)
			dc.d.warnHint(pos, "this installation runs "+strings.Join(slices.Compact(runs), ", "), "%s; the job fails if it is reached", msg)
		}
	}
}

// validatePipeline checks the runner against the classes and every job timeout against the
// class's cap. Tags that use variables are checked when the pipeline is planned.
func (dc *decoder) validatePipeline(pl *pipelineDecl) {
	capLimit := dc.maxCap()
	if !anyVar(pl.tags) {
		tags := make([]string, len(pl.tags))
		for i, t := range pl.tags {
			tags[i] = t.v
		}
		pos := pl.pos
		if len(pl.tags) > 0 {
			pos = pl.tags[0].pos
		}
		c, err := dc.opts.classes.resolve(tags)
		if err != nil {
			dc.d.fromErr(pos, SeverityError, err)
		} else {
			capLimit = c.MaxDuration
			if _, err := effectiveCPUs(c, pl.cpus); err != nil {
				dc.d.fromErr(pl.cpusPos, SeverityError, err)
			}
			if runnerclass.IsTeamTag(c.Tags[0], dc.opts.classes.list) {
				teamRunnerNote(dc.d, pos, c.Tags[0])
			}
		}
	}
	for _, list := range [][]*stageDecl{pl.stages, pl.failStages, pl.endStages} {
		for _, s := range list {
			for _, j := range s.jobs {
				if capLimit > 0 && j.timeout > capLimit {
					// Part A.2: a warning, and the cap applies (real workspace files ask for 24h).
					dc.d.warnHint(j.timeoutPos, fmt.Sprintf("the cap of this runner class is %s; the job stops there", fmtDuration(capLimit)),
						"timeout %s is above the pipeline cap of %s", fmtDuration(j.timeout), fmtDuration(capLimit))
				}
			}
		}
	}
}

// teamRunnerNote is lint's note on a tag outside cnb: (Part A.10): fine, and where it runs.
func teamRunnerNote(d *diags, pos Pos, tag string) {
	d.infoHint(pos, "a team admin registers one on the team's Agents page (nimbus-agent --token <team runner token> --tags "+tag+")",
		"runner tag %q names a team runner: this pipeline runs only on an agent your team registered with that tag", tag)
}

// maxCap is the largest cap of any class: the bound for a pipeline whose class is not known yet.
func (dc *decoder) maxCap() time.Duration {
	var m time.Duration
	for _, c := range dc.opts.classes.list {
		m = max(m, c.MaxDuration)
	}
	return m
}

func anyVar(list []str) bool {
	for _, s := range list {
		if strings.Contains(s.v, "$") {
			return true
		}
	}
	return false
}

// fmtDuration prints whole hours and minutes without trailing zero units ("18h", "1h30m").
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// pipelineName is the name a pipeline gets: its name, its object key, or pipeline, pipeline-1, …
// by its index among the pipelines of the event.
func pipelineName(declared string, objectKey string, index int) string {
	switch {
	case declared != "":
		return declared
	case objectKey != "":
		return objectKey
	case index == 0:
		return "pipeline"
	}
	return "pipeline-" + strconv.Itoa(index)
}

// checkDuplicateNames reports two pipelines of one event with the same name; names that use
// variables are compared when planning.
func (dc *decoder) checkDuplicateNames(e *eventDecl) {
	seen := map[string]Pos{}
	for i, pl := range e.pipelines {
		declared := ""
		if pl.name != nil {
			declared = pl.name.v
		}
		if strings.Contains(declared, "$") {
			continue
		}
		name := pipelineName(declared, pl.objectKey, i)
		pos := pl.pos
		if pl.name != nil {
			pos = pl.name.pos
		}
		if first, dup := seen[name]; dup {
			dc.d.errorHint(pos, "pipelines of one event run in parallel and are told apart by name",
				"duplicate pipeline name %q in event %q (first at line %d)", name, e.key, first.Line)
			continue
		}
		seen[name] = pos
	}
}
