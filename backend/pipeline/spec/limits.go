package spec

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// Limits bound how much one build may ask for, so that one push of a generated file cannot
// store tens of thousands of rows and make a build page megabytes long. A file over a limit is
// an error like any other: lint reports it with the place and the count, and the build fails
// with the same words. Zero fields take DefaultLimits' values.
type Limits struct {
	// Pipelines is the most pipelines one build runs: one event on one ref, every matching
	// branch key together.
	Pipelines int
	// Stages is the most stages of one pipeline, its failStages and endStages counted.
	Stages int
	// Jobs is the most jobs of one pipeline, over all its stages.
	Jobs int
	// BuildJobs is the most jobs of one build, over all its pipelines.
	BuildJobs int
}

// DefaultLimits are the limits of an installation that sets none. The largest file of the
// corpus of real .cnb.yml files (testdata/corpus) runs 2 pipelines, 8 stages and 14 jobs, so
// these leave room for two orders of magnitude of growth and stop only generated files:
//
//   - 256 pipelines a build: GitHub's 256 jobs per workflow run (a matrix's cap); a pipeline,
//     like a GitHub job, is one runner.
//   - 256 jobs a pipeline: the same figure; a pipeline's jobs all run on its one node.
//   - 100 stages a pipeline: stages run one after another on that node.
//   - 2,000 jobs a build: GitLab.com's cap on the jobs of one pipeline (which is what a Nimbus
//     build is).
func DefaultLimits() Limits {
	return Limits{Pipelines: 256, Stages: 100, Jobs: 256, BuildJobs: 2000}
}

func (l Limits) withDefaults() Limits {
	def := DefaultLimits()
	for _, f := range []struct{ v, def *int }{
		{&l.Pipelines, &def.Pipelines}, {&l.Stages, &def.Stages}, {&l.Jobs, &def.Jobs}, {&l.BuildJobs, &def.BuildJobs},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return l
}

// FileTooLargeError is the error a FileSource returns for a file it refuses to read because of
// its size. The engine reports any error with a TooLarge method the same way (git's has one),
// naming the file's size and the limit.
type FileTooLargeError struct {
	Size, Limit int64
}

func (e *FileTooLargeError) Error() string {
	return fmt.Sprintf("the file is %d bytes, over the limit of %d", e.Size, e.Limit)
}

// TooLarge returns the file's size and the limit it is over.
func (e *FileTooLargeError) TooLarge() (size, limit int64) { return e.Size, e.Limit }

// tooLarge is what the engine looks for in a FileSource's error.
type tooLarge interface{ TooLarge() (size, limit int64) }

const splitHint = "split it into smaller files and include them (each has the same limit; at most 50 files)"

// readFailure records that file could not be read at pos: a file over the size limit says how
// large it is and what the limit is; any other failure says what the source said. prefix starts
// the message ("cannot include x.yml", or the main file's name).
func readFailure(d *diags, pos Pos, prefix string, err error) {
	var tl tooLarge
	if errors.As(err, &tl) {
		size, limit := tl.TooLarge()
		is, over := fmt.Sprintf("%s (%d bytes)", fmtBytes(size), size), fmtBytes(limit)
		if fmtBytes(size) == over { // just over: the rounded sizes read the same
			is, over = fmt.Sprintf("%d bytes", size), fmt.Sprintf("%s (%d bytes)", over, limit)
		}
		d.errorHint(pos, splitHint, "%s: it is %s, over the %s limit of a pipeline file", prefix, is, over)
		return
	}
	d.errorf(pos, "%s: %v", prefix, err)
}

// ignorable reports whether an include marked ignoreError may be skipped: only a missing file.
// A file that is there and cannot be used (too large, a directory, unreadable) is an error
// even then, or the build would run without it and say nothing.
func ignorable(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// Unreadable is the Config of a main file the caller could not read (too large, not a file):
// it plans nothing, and its one error says why, at the file. A build of it fails like a build
// of a broken file.
func Unreadable(opts Options, err error) *Config {
	opts = opts.withDefaults()
	d := &diags{}
	readFailure(d, Pos{File: opts.File}, "cannot read "+opts.File, err)
	return &Config{opts: opts, diags: d.sorted(opts.File)}
}

// counts returns the number of stages of a pipeline and of their jobs, over stages, failStages
// and endStages.
func (pl *pipelineDecl) counts() (stages, jobs int) {
	for _, list := range [][]*stageDecl{pl.stages, pl.failStages, pl.endStages} {
		stages += len(list)
		for _, s := range list {
			jobs += len(s.jobs)
		}
	}
	return stages, jobs
}

// checkLimits reports an event whose pipelines are over the limits: each pipeline's stages and
// jobs, and the pipelines and jobs the event runs in one build. A schedule list fires its
// entries one cron expression at a time, so each expression's entries are counted apart.
func (dc *decoder) checkLimits(e *eventDecl) {
	lim := dc.opts.Limits
	builds := map[string][]int{} // the pipelines of each build the event makes: by cron, or one
	var order []string
	overJobs := false // a pipeline's own error already says its jobs are too many
	for i, pl := range e.pipelines {
		stages, jobs := pl.counts()
		name := pipelineName(nameOf(pl), pl.objectKey, i)
		if stages > lim.Stages {
			dc.d.errorHint(pl.pos, "merge stages, or split the pipeline into several",
				"pipeline %q has %d stages; a pipeline may have at most %d (stages, failStages and endStages together)", name, stages, lim.Stages)
		}
		if jobs > lim.Jobs {
			overJobs = true
			dc.d.errorHint(pl.pos, "split the pipeline into several: they run side by side, each on its own runner",
				"pipeline %q has %d jobs; a pipeline may have at most %d", name, jobs, lim.Jobs)
		}
		key := ""
		if e.key == EventSchedule && pl.cron != nil {
			key = pl.cron.expr
		}
		if _, ok := builds[key]; !ok {
			order = append(order, key)
		}
		builds[key] = append(builds[key], i)
	}
	for _, key := range order {
		idx := builds[key]
		what := fmt.Sprintf("event %q", e.key)
		if key != "" {
			what = fmt.Sprintf("schedule %q", key)
		}
		if len(idx) > lim.Pipelines {
			dc.d.errorHint(e.pipelines[idx[lim.Pipelines]].pos, limitHint,
				"%s runs %d pipelines; a build may run at most %d (this is pipeline %d)", what, len(idx), lim.Pipelines, lim.Pipelines+1)
			continue
		}
		if overJobs {
			continue
		}
		pls := make([]*pipelineDecl, len(idx))
		for j, i := range idx {
			pls[j] = e.pipelines[i]
		}
		if total, past := jobsPast(pls, lim.BuildJobs); past != nil {
			dc.d.errorHint(past.pos, limitHint, "%s runs %d jobs in %s; a build may run at most %d jobs (this pipeline passes it)",
				what, total, pipelines(len(idx)), lim.BuildJobs)
		}
	}
}

const limitHint = "split the pipelines over several events (web_trigger_*, api_trigger_*) or branches"

// withinLimits reports whether the pipelines a trigger selects are within the limits, and
// records why not. Each branch key's pipelines were checked alone (checkLimits); this sees
// every key that matches the ref together.
func (c *Config) withinLimits(sel []selected, t Trigger, d *diags) bool {
	lim := c.opts.Limits
	build := fmt.Sprintf("the %s build of %s", cnbEvent(t.Event), t.refName())
	if len(sel) > lim.Pipelines {
		d.errorHint(sel[lim.Pipelines].pipeline.pos, limitHint+"; branch keys that match the same ref all run",
			"%s runs %d pipelines (from %s); a build may run at most %d (this is pipeline %d)",
			build, len(sel), keysOf(sel), lim.Pipelines, lim.Pipelines+1)
		return false
	}
	pls := make([]*pipelineDecl, len(sel))
	for i, s := range sel {
		pls[i] = s.pipeline
	}
	if total, past := jobsPast(pls, lim.BuildJobs); past != nil {
		d.errorHint(past.pos, limitHint+"; branch keys that match the same ref all run",
			"%s runs %d jobs in %s (from %s); a build may run at most %d jobs (this pipeline passes it)",
			build, total, pipelines(len(sel)), keysOf(sel), lim.BuildJobs)
		return false
	}
	return true
}

// jobsPast counts the jobs of pls and returns, when they are over limit, the pipeline whose jobs
// pass it.
func jobsPast(pls []*pipelineDecl, limit int) (total int, past *pipelineDecl) {
	for _, pl := range pls {
		_, jobs := pl.counts()
		total += jobs
		if total > limit && past == nil {
			past = pl
		}
	}
	return total, past
}

// keysOf names the branch keys the selected pipelines come from, in order.
func keysOf(sel []selected) string {
	var keys []string
	for _, s := range sel {
		k := fmt.Sprintf("%q", s.branch.pattern)
		if len(keys) == 0 || keys[len(keys)-1] != k {
			keys = append(keys, k)
		}
	}
	return strings.Join(keys, ", ")
}

func pipelines(n int) string {
	if n == 1 {
		return "1 pipeline"
	}
	return fmt.Sprintf("%d pipelines", n)
}

func nameOf(pl *pipelineDecl) string {
	if pl.name != nil {
		return pl.name.v
	}
	return ""
}

// fmtBytes writes a size for people: bytes, KiB or MiB with at most one decimal.
func fmtBytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/(1<<10))) + " KiB"
	}
	return trimZero(fmt.Sprintf("%.1f", float64(n)/(1<<20))) + " MiB"
}

func trimZero(s string) string { return strings.TrimSuffix(s, ".0") }
