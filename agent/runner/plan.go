package runner

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// outcome is where a group of stages got to.
type outcome struct {
	failed bool
	msg    string // the first failure: CNB_BUILD_FAILED_MSG and the finish reason
	stage  string // its stage: CNB_BUILD_FAILED_STAGE_NAME
	stop   string // why the pipeline stopped early with success (exit 78)
}

// runPlan runs the stages, then the failStages when they failed, then the endStages whatever
// happened, and says how the pipeline ended. Stage indexes continue across the three groups, as
// protocol.JobRef numbers them. A cancelled run runs neither failStages nor endStages: cancelling
// must stop containers within seconds, not start new ones.
func (x *run) runPlan(ctx context.Context) Result {
	p := &x.lease.Plan
	nMain, nFail := len(p.Stages), len(p.FailStages)
	all := []struct {
		stages []protocol.Stage
		base   int
	}{{p.Stages, 0}, {p.FailStages, nMain}, {p.EndStages, nMain + nFail}}

	env := x.jobEnv(protocol.Stage{}, x.planJob(), nil, nil)
	image, auth := x.envImage(env)
	reason, err := x.skipReason(ctx, p.Conditions, "pipeline-if", image, auth, env, nil)
	if err != nil {
		if res, stopped := x.stopped(ctx); stopped {
			return res
		}
		return Result{Status: StatusFailed, Reason: err.Error()}
	}
	if reason != "" {
		for _, g := range all {
			x.skipStages(g.stages, g.base, "skipped: "+reason, true)
		}
		return Result{Status: StatusSuccess, Reason: "skipped: " + reason}
	}

	out := x.runGroup(ctx, p.Stages, 0, nil)
	if res, stopped := x.stopped(ctx); stopped {
		return res
	}
	status := "success"
	if out.failed {
		status = "error"
		x.runGroup(ctx, p.FailStages, nMain, map[string]string{
			"CNB_BUILD_FAILED_MSG": out.msg, "CNB_BUILD_FAILED_STAGE_NAME": out.stage})
		if res, stopped := x.stopped(ctx); stopped {
			return res
		}
	} else {
		x.skipStages(p.FailStages, nMain, "not run: the pipeline did not fail", false)
	}
	// A ready workspace stays up here (devenv.go); one that failed before it was ready ends.
	held := ""
	if x.dev != nil && x.dev.readyYet() {
		held = x.dev.hold(ctx, x.deadline)
		if res, stopped := x.stopped(ctx); stopped {
			return res
		}
		x.log.Info("the workspace is stopping", "why", held)
	}
	// The endStages' own result does not change the pipeline's.
	x.runGroup(ctx, p.EndStages, nMain+nFail, map[string]string{"CNB_PIPELINE_STATUS": status})
	if res, stopped := x.stopped(ctx); stopped {
		return res
	}
	if held != "" {
		return x.endWorkspace(ctx, held, out)
	}
	if out.failed {
		return Result{Status: StatusFailed, Reason: out.msg}
	}
	return Result{Status: StatusSuccess, Reason: out.stop}
}

// endWorkspace saves a stopping workspace's work and says how it ended: stopped, with why (and
// the failure of its stages, which did not end it).
func (x *run) endWorkspace(ctx context.Context, why string, out outcome) Result {
	reason := why
	if !strings.HasPrefix(why, StopByServer) {
		reason = "stopped: " + why
	}
	ref, err := x.saveWork(ctx)
	switch {
	case err != nil:
		x.log.Warn("saving the workspace's work failed", "err", err)
		reason += "; saving the work failed: " + err.Error()
	case ref != "":
		x.log.Info("the workspace's work is saved", "ref", ref)
		reason += "; work saved to " + ref
	}
	if out.failed {
		reason += " (a stage had failed: " + out.msg + ")"
	}
	return Result{Status: StatusSuccess, Reason: reason}
}

// planJob stands for the pipeline itself where a condition of the pipeline or of a stage needs
// an environment: the pipeline's env, expanded by the pipeline's run-time variables.
func (x *run) planJob() protocol.Job {
	return protocol.Job{Env: x.lease.Plan.Env, RuntimeVars: x.lease.Plan.RuntimeVars}
}

// runGroup runs stages in order. After a failure or an exit 78 the remaining stages' jobs are
// reported skipped; after a cancellation they are not reported at all (finish settles them).
func (x *run) runGroup(ctx context.Context, stages []protocol.Stage, base int, extra map[string]string) outcome {
	var out outcome
	for i, st := range stages {
		si := base + i
		if ctx.Err() != nil {
			return out
		}
		if why := out.notRun(); why != "" {
			x.skipJobs(si, st, 0, why, false)
			continue
		}
		env := x.jobEnv(st, x.planJob(), x.snapshotExports(), extra)
		image, auth := x.envImage(env)
		reason, err := x.skipReason(ctx, st.Conditions, "stage-if", image, auth, env, nil)
		switch {
		case err != nil && ctx.Err() != nil:
			return out
		case err != nil:
			out.fail(fmt.Sprintf("stage %q: %v", st.Name, err), st.Name)
			x.skipJobs(si, st, 0, "not run: the stage's condition could not be evaluated", false)
			continue
		case reason != "":
			x.skipJobs(si, st, 0, "skipped: "+reason, true)
			continue
		}
		if st.Lock == nil {
			x.runStage(ctx, si, st, extra, &out)
			continue
		}
		scope := fmt.Sprintf("stage %q", st.Name)
		release, err := x.holdLock(ctx, st.Lock, scope, func(format string, args ...any) {
			x.cfg.Log.Info(fmt.Sprintf(format, args...), "lease", x.lease.ID, "stage", st.Name)
		})
		if err != nil {
			if ctx.Err() != nil {
				return out
			}
			out.fail(fmt.Sprintf("stage %q: %v", st.Name, err), st.Name)
			x.skipJobs(si, st, 0, "not run: "+err.Error(), false)
			continue
		}
		x.runStage(ctx, si, st, extra, &out)
		release()
	}
	return out
}

// runStage runs the jobs of one stage: all at once when it is parallel, else in order, a
// failure or exit 78 skipping the rest. Parallel jobs all see the exports as they were when the
// stage started; their own exports are merged in job order once all have ended, so the result
// does not depend on which finished first.
func (x *run) runStage(ctx context.Context, si int, st protocol.Stage, extra map[string]string, out *outcome) {
	if !st.Parallel || len(st.Jobs) < 2 {
		for ji, job := range st.Jobs {
			if ctx.Err() != nil {
				return
			}
			if why := out.notRun(); why != "" {
				x.skipJobs(si, st, ji, why, false)
				return
			}
			res := x.runJob(ctx, si, st, ji, job, x.snapshotExports(), extra)
			x.mergeExports(res.exports)
			out.account(st, job, res)
		}
		return
	}
	results := make([]jobResult, len(st.Jobs))
	snapshot := x.snapshotExports()
	var wg sync.WaitGroup
	for ji := range st.Jobs {
		wg.Go(func() { results[ji] = x.runJob(ctx, si, st, ji, st.Jobs[ji], snapshot, extra) })
	}
	wg.Wait()
	for ji, res := range results {
		x.mergeExports(res.exports)
		out.account(st, st.Jobs[ji], res)
	}
}

func (o *outcome) fail(msg, stage string) {
	if !o.failed {
		o.failed, o.msg, o.stage = true, msg, stage
	}
}

// account folds a job's result into the outcome of its group.
func (o *outcome) account(st protocol.Stage, job protocol.Job, res jobResult) {
	if res.failed {
		o.fail(fmt.Sprintf("stage %q, job %q: %s", st.Name, jobName(job), res.msg), st.Name)
	}
	if res.stop && o.stop == "" {
		o.stop = fmt.Sprintf("stopped: job %q exited with 78", jobName(job))
	}
}

// notRun says why the next jobs do not run, "" when they do.
func (o *outcome) notRun() string {
	switch {
	case o.failed:
		return "not run: an earlier job failed"
	case o.stop != "":
		return "not run: the pipeline was stopped by exit 78"
	}
	return ""
}

// skipStages reports every job of the stages skipped.
func (x *run) skipStages(stages []protocol.Stage, base int, reason string, conditional bool) {
	for i, st := range stages {
		x.skipJobs(base+i, st, 0, reason, conditional)
	}
}

// skipJobs reports the jobs of a stage from index `from` on as skipped. A job skipped by a
// condition carries the reason as its "skip" result, which its exports may name.
func (x *run) skipJobs(si int, st protocol.Stage, from int, reason string, conditional bool) {
	for ji := from; ji < len(st.Jobs); ji++ {
		res := jobResult{status: StatusSkipped}
		if conditional {
			res.exports = exportValues(st.Jobs[ji], map[string]string{ResultSkip: reason})
			x.mergeExports(res.exports)
		}
		x.reportFinished(x.jobIDs[[2]int{si, ji}], res, nil)
	}
}

// skipReason evaluates conditions: the reason to skip, or "" to run. An If script runs as a step
// of its own in image with env; its output goes to jl (nowhere when nil).
func (x *run) skipReason(ctx context.Context, c protocol.Conditions, name, image string, auth *executor.ImageAuth,
	env map[string]string, jl *jobLog) (string, error) {
	if c.Skip != "" {
		return c.Skip, nil
	}
	if c.If == "" {
		return "", nil
	}
	step := x.step(name, image, auth, env)
	step.Script = c.If
	if jl != nil {
		step.Output, step.Stderr = jl, jl.Stderr()
	}
	code, err := x.cfg.Executor.Run(ctx, step)
	if err != nil {
		return "", fmt.Errorf("if: %w", err)
	}
	if code != 0 {
		return fmt.Sprintf("the if condition exited with %d", code), nil
	}
	return "", nil
}

func (x *run) snapshotExports() map[string]string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return maps.Clone(x.exports)
}

// mergeExports applies a job's exports: an empty value deletes the variable, as in CNB.
func (x *run) mergeExports(ex map[string]string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for name, v := range ex {
		if v == "" {
			delete(x.exports, name)
		} else {
			x.exports[name] = v
		}
	}
}

func jobName(j protocol.Job) string {
	if j.Name != "" {
		return j.Name
	}
	return j.Key
}
