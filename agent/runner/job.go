package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// How long a job waits for its log to be taken before it is reported finished, and how long the
// whole run waits for the logs still in flight before it reports its end, in flush intervals: a
// fleet slowed down by the server waits proportionally longer.
const (
	jobLogWaitFlushes = 10
	runLogWaitFlushes = 30
)

// Exit codes with a meaning of their own.
const (
	exitSuccess = 0
	exitStop    = 78 // success, and the pipeline stops here
)

// jobResult is how one job ended.
type jobResult struct {
	status  string
	code    *int
	exports map[string]string  // variable → value for later jobs ("" deletes)
	failed  bool               // the job's failure fails its stage (it failed without allowFailure)
	stop    bool               // exit 78
	msg     string             // why it failed
	image   *protocol.ImageUse // the image its container ran, by digest (reproducibility record)
	metrics map[string]float64 // what it reported as ##[set-output metric.<name>=<number>]
}

// runJob runs one job with its log and reports it (job_started … job_finished).
func (x *run) runJob(ctx context.Context, si int, st protocol.Stage, ji int, job protocol.Job, exports, extra map[string]string) jobResult {
	id := x.jobIDs[[2]int{si, ji}]
	jl := x.takeSetupLog(id)
	if jl == nil {
		jl = x.openLog(id)
	}
	res := x.execJob(ctx, id, st, job, exports, extra, jl)
	// The log is complete on the server before the job is reported finished: the outbox waits
	// for it, the next job does not.
	jl.close()
	x.reportFinished(id, res, jl.stream)
	return res
}

func (x *run) reportFinished(id int64, res jobResult, log *logStream) {
	if id == 0 {
		return // the server did not number this job: nothing to report it under
	}
	// Exports, metrics and all are masked on their way out (deliverEvents).
	ev := protocol.Event{Kind: protocol.EventJobFinished, JobID: id, Status: res.status, ExitCode: res.code, Image: res.image,
		Metrics: res.metrics}
	if len(res.exports) > 0 {
		ev.Exports = res.exports
	}
	x.eventAfter(ev, log)
}

// execJob decides whether the job runs, runs it (with its retries) and says how it ended.
func (x *run) execJob(ctx context.Context, id int64, st protocol.Stage, job protocol.Job, exports, extra map[string]string, jl *jobLog) jobResult {
	env := x.jobEnv(st, job, exports, extra)
	if x.readsCheckout(job, env) {
		if err := x.copyOut(ctx, jl); err != nil {
			if ctx.Err() != nil {
				return x.interrupted(ctx)
			}
			return x.failure(job, err.Error(), nil)
		}
	}
	if len(job.Imports) > 0 {
		image, _ := x.jobImage(job, env)
		imported, err := x.importEnv(ctx, job, image, env, jl)
		if err != nil {
			if ctx.Err() != nil {
				return x.interrupted(ctx)
			}
			jl.note("%v", err)
			return x.failure(job, err.Error(), nil)
		}
		env = x.jobEnvImported(st, job, exports, extra, imported)
	}
	image, auth := x.jobImage(job, env)
	if job.Conditions.If != "" && job.Kind != protocol.KindScript {
		// A plugin image need not have a shell: its condition runs in the pipeline's image.
		image, auth = x.envImage(env)
	}
	reason, err := x.skipReason(ctx, job.Conditions, "if-"+job.Key, image, auth, env, jl)
	switch {
	case err != nil && ctx.Err() != nil:
		return x.interrupted(ctx)
	case err != nil:
		jl.note("the job's condition could not be evaluated: %v", err)
		return x.failure(job, err.Error(), nil)
	case reason != "":
		return jobResult{status: StatusSkipped, exports: exportValues(job, map[string]string{ResultSkip: reason})}
	}
	if id != 0 && !x.startJob(ctx, id) {
		if ctx.Err() != nil {
			return x.interrupted(ctx)
		}
		return x.failure(job, "the server could not be told that the job starts, so it did not start", nil)
	}
	if job.Lock != nil {
		release, err := x.holdLock(ctx, job.Lock, fmt.Sprintf("job %q", st.Name+"/"+jobName(job)), jl.note)
		if err != nil {
			if ctx.Err() != nil {
				return x.interrupted(ctx)
			}
			jl.note("%v", err)
			return x.failure(job, err.Error(), nil)
		}
		defer release()
	}
	if len(job.SettingsFrom) > 0 || len(job.OptionsFrom) > 0 {
		// The job's own image (a plugin's), which allow_images checks, not its condition's.
		jobImage, _ := x.jobImage(job, env)
		merged, err := x.fromFiles(ctx, job, jobImage, env, jl)
		if err != nil {
			if ctx.Err() != nil {
				return x.interrupted(ctx)
			}
			jl.note("%v", err)
			return x.failure(job, err.Error(), nil)
		}
		job = merged
	}
	if job.Kind == protocol.KindBuiltin && job.Unsupported == "" {
		if run := x.builtin(job.Type); run != nil {
			return run(ctx, job, env, jl)
		}
	}
	if job.Kind == protocol.KindPlugin && job.Image != nil {
		if name, _ := x.jobImage(job, env); attachmentsImage(name) {
			return x.attachments(ctx, job, env, jl)
		}
	}
	step, err := x.jobStep(st, job, env, extra)
	if err != nil {
		jl.note("%v", err)
		return x.failure(job, err.Error(), nil)
	}
	var seen *protocol.ImageUse
	step.ImageSeen = func(ref, digest string) { seen = &protocol.ImageUse{Ref: ref, Digest: digest} }
	for attempt := 0; ; attempt++ {
		res := x.attempt(ctx, job, step, jl)
		res.image = seen
		if res.status != StatusFailed || attempt >= job.Retry || ctx.Err() != nil {
			return res
		}
		jl.note("retrying (attempt %d of %d)", attempt+2, job.Retry+1)
	}
}

// attempt runs the job's step once.
func (x *run) attempt(ctx context.Context, job protocol.Job, step executor.Step, jl *jobLog) jobResult {
	res := newResults(job.Exports)
	step.Output = io.MultiWriter(jl, res.writer(false))
	step.Stderr = io.MultiWriter(jl.Stderr(), res.writer(true))
	code, err := x.runStep(ctx, job, step, jl)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return x.interrupted(ctx)
	case errors.Is(err, errJobTimeout):
		jl.note("timed out after %s", job.Timeout.Std())
		return x.failure(job, "timed out after "+job.Timeout.Std().String(), nil)
	case errors.Is(err, errNoOutput):
		jl.note("no output for %s: stopped", x.lease.Plan.Runner.NoOutputTimeout.Std())
		return x.failure(job, "no output for "+x.lease.Plan.Runner.NoOutputTimeout.Std().String(), nil)
	default:
		jl.note("%v", err)
		return x.failure(job, err.Error(), nil)
	}
	values := res.finish(&code)
	if job.Conditions.If != "" {
		values[ResultSkip] = ""
	}
	for key := range job.Exports {
		if _, ok := values[key]; !ok && (key == ResultStdout || key == ResultStderr || key == ResultInfo) {
			jl.note("exports: %s is 100 KiB or more, so it is not exported", key)
		}
	}
	exports := exportValues(job, values)
	metrics := metricValues(values, jl.note, newReportMasker(x.secretList()).holds)
	switch code {
	case exitSuccess:
		return jobResult{status: StatusSuccess, code: &code, exports: exports, metrics: metrics}
	case exitStop:
		jl.note("exit 78: the pipeline stops here, successfully")
		return jobResult{status: StatusSuccess, code: &code, exports: exports, stop: true, metrics: metrics}
	}
	r := x.failure(job, fmt.Sprintf("exited with %d", code), &code)
	r.exports, r.metrics = exports, metrics
	return r
}

// runStep runs a step under the job's timeout and the pipeline's no-output limit.
func (x *run) runStep(ctx context.Context, job protocol.Job, step executor.Step, jl *jobLog) (int, error) {
	jctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if t := job.Timeout.Std(); t > 0 {
		var stop context.CancelFunc
		jctx, stop = context.WithTimeoutCause(jctx, t, errJobTimeout)
		defer stop()
	}
	if d := x.lease.Plan.Runner.NoOutputTimeout.Std(); d > 0 {
		defer jl.watch(d, func() { cancel(errNoOutput) })()
	}
	code, err := x.cfg.Executor.Run(jctx, step)
	if err != nil && jctx.Err() != nil && ctx.Err() == nil {
		return code, fmt.Errorf("%w: %w", context.Cause(jctx), err)
	}
	return code, err
}

// failure is a failed job; it fails the stage unless the job allows failure.
func (x *run) failure(job protocol.Job, msg string, code *int) jobResult {
	return jobResult{status: StatusFailed, code: code, failed: !job.AllowFailure, msg: msg}
}

// interrupted is a job stopped by the end of the run: cancelled, or failed when the pipeline ran
// out of time. Run decides the pipeline's status from the cause.
func (x *run) interrupted(ctx context.Context) jobResult {
	res, _ := x.stopped(ctx)
	st := StatusCancelled
	if res.Status == StatusFailed {
		st = StatusFailed
	}
	return jobResult{status: st, msg: res.Reason}
}

// exportValues maps a job's result values to the variables its exports name.
func exportValues(job protocol.Job, values map[string]string) map[string]string {
	out := map[string]string{}
	for key, name := range job.Exports {
		if v, ok := values[key]; ok {
			out[name] = v
		}
	}
	return out
}

// jobStep turns a job into the step its executor runs.
func (x *run) jobStep(st protocol.Stage, job protocol.Job, env, extra map[string]string) (executor.Step, error) {
	if job.Unsupported != "" {
		return executor.Step{}, errors.New(job.Unsupported)
	}
	switch job.Kind {
	case protocol.KindScript, "":
		image, auth := x.jobImage(job, env)
		s := x.step(job.Key, image, auth, env)
		s.Script = job.Script
		return s, nil
	case protocol.KindPlugin:
		if job.Image == nil || job.Image.Name == "" {
			return executor.Step{}, errors.New("a plugin job needs an image")
		}
		penv, err := x.pluginEnv(st, job, env, extra)
		if err != nil {
			return executor.Step{}, err
		}
		image, auth := x.jobImage(job, env)
		s := x.step(job.Key, image, auth, penv)
		s.Args = job.Args
		return s, nil
	case protocol.KindBuiltin:
		return executor.Step{}, fmt.Errorf("the built-in task type %q is not supported by this agent", job.Type)
	}
	return executor.Step{}, fmt.Errorf("unknown job kind %q", job.Kind)
}

// step is the part of every step of this pipeline that does not depend on the job.
func (x *run) step(name, image string, auth *executor.ImageAuth, env map[string]string) executor.Step {
	r := x.lease.Plan.Runner
	s := executor.Step{
		Name: name, Image: image, ImageAuth: auth, Env: env,
		Checkout: x.checkout, CheckoutMount: x.mount,
		CPUs: float64(r.Cpus), MemoryBytes: int64(r.MemoryGiB) << 30,
		// Only the GPUs reserved for this pipeline, never all of the host's.
		GPUs:   x.lease.GPUs,
		Labels: map[string]string{"nimbus.lease": x.lease.ID, "nimbus.job": name},
		Tools:  x.cfg.Tools,
	}
	x.extras.apply(&s)
	return s
}

// jobEnv is a job's environment, lowest layer first: the lease's secrets (they stand for the
// imported variables too), the job's env (pipeline, stage and job, already layered by the
// engine), the exports of earlier jobs, and the built-ins, which nothing overrides.
//
// A job with run-time variables gets its env values expanded first. The engine has already
// substituted everything the env itself defines, so what is left (${NAME} in RuntimeVars) is a
// secret, an export or a run-time built-in, and is expanded against those layers only: an env
// value never sees its siblings, and `TOKEN: ${TOKEN}` passes the secret TOKEN through instead
// of reading itself. A name that is none of them is empty.
func (x *run) jobEnv(st protocol.Stage, job protocol.Job, exports, extra map[string]string) map[string]string {
	return x.jobEnvImported(st, job, exports, extra, nil)
}

// jobEnvImported is jobEnv with the variables of the job's imports, which its own env beats
// (cnb-reference §5.1) and the repo secrets do not.
func (x *run) jobEnvImported(st protocol.Stage, job protocol.Job, exports, extra, imported map[string]string) map[string]string {
	builtins := x.builtins(st, job, extra)
	layer := func(own map[string]string) map[string]string {
		env := make(map[string]string, len(x.lease.Secrets)+len(imported)+len(own)+len(exports)+len(builtins))
		maps.Copy(env, x.lease.Secrets)
		maps.Copy(env, imported)
		maps.Copy(env, own)
		maps.Copy(env, exports)
		maps.Copy(env, builtins)
		return env
	}
	if len(job.RuntimeVars) == 0 {
		return layer(job.Env)
	}
	runtime := layer(nil)
	expanded := make(map[string]string, len(job.Env))
	for k, v := range job.Env {
		expanded[k] = protocol.ExpandVars(v, job.RuntimeVars, runtime)
	}
	return layer(expanded)
}

// builtins are the CNB_* variables of a job: the plan's, the ones only known at run time (from
// the lease), the ones of its group (failStages, endStages) and its own names.
func (x *run) builtins(st protocol.Stage, job protocol.Job, extra map[string]string) map[string]string {
	b := make(map[string]string, len(x.lease.Plan.Builtins)+len(x.lease.Env)+len(extra)+4)
	maps.Copy(b, x.lease.Plan.Builtins)
	maps.Copy(b, extra)
	maps.Copy(b, x.lease.Env)
	b["CNB_BUILD_WORKSPACE"] = x.mount
	if st.Name != "" {
		b["CNB_BUILD_STAGE_NAME"] = st.Name
	}
	if job.Key != "" {
		b["CNB_BUILD_JOB_NAME"] = jobName(job)
		b["CNB_BUILD_JOB_KEY"] = job.Key
	}
	return b
}

// pluginEnv is a plugin container's environment: the built-ins and the settings as
// PLUGIN_<KEY> (JSON for anything but a string), and not the user's env, which for plugins only
// fed the substitution of the settings.
func (x *run) pluginEnv(st protocol.Stage, job protocol.Job, userEnv, extra map[string]string) (map[string]string, error) {
	env := x.builtins(st, job, extra)
	for k, v := range job.Settings {
		if len(job.RuntimeVars) > 0 {
			v = expandAny(v, job.RuntimeVars, userEnv)
		}
		s, err := pluginValue(v)
		if err != nil {
			return nil, fmt.Errorf("setting %s: %w", k, err)
		}
		env["PLUGIN_"+envKey(k)] = s
	}
	return env, nil
}

// pluginValue writes one setting as Drone's runners do, which CNB's plugins (most of them Drone
// plugins) parse: a string as it is, a number or a boolean as YAML wrote it, nothing for null, a
// list of scalars joined with commas (PLUGIN_TAGS=latest,1.0: what drone-plugin flags of type
// StringSlice split), and a map, or a list holding a map or a list, as JSON.
func pluginValue(v any) (string, error) {
	switch t := v.(type) {
	case nil:
		return "", nil
	case string:
		return t, nil
	case []any:
		parts := make([]string, 0, len(t))
		for _, e := range t {
			switch e.(type) {
			case map[string]any, []any:
				return marshalSetting(v)
			}
			s, err := pluginValue(e)
			if err != nil {
				return "", err
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ","), nil
	}
	return marshalSetting(v)
}

func marshalSetting(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// envKey upper-cases a settings key and turns what a variable name cannot hold into "_".
func envKey(k string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			return r
		}
		return '_'
	}, k)
}

// runtimeOptions is a built-in task's options (or a plugin's settings) with its run-time
// variables expanded (a copy; raw as it is when the job has none).
func runtimeOptions(raw map[string]any, names []string, env map[string]string) map[string]any {
	out := make(map[string]any, len(raw))
	for k, v := range raw {
		if len(names) > 0 {
			v = expandAny(v, names, env)
		}
		out[k] = v
	}
	return out
}

// expandAny expands run-time variables in every string of a settings value.
func expandAny(v any, names []string, env map[string]string) any {
	switch t := v.(type) {
	case string:
		return protocol.ExpandVars(t, names, env)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = expandAny(e, names, env)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = expandAny(e, names, env)
		}
		return out
	}
	return v
}

// envImage is the pipeline's environment image: the one docker.build made, else docker.image,
// else the agent's default.
func (x *run) envImage(env map[string]string) (string, *executor.ImageAuth) {
	p := &x.lease.Plan
	if x.extras.image != "" {
		return x.extras.image, x.builtImageAuth()
	}
	if p.Image != nil && p.Image.Name != "" {
		return expandImage(p.Image, p.RuntimeVars, env)
	}
	return x.cfg.DefaultImage, nil
}

// jobImage is the image a job runs in: its own (the engine has folded a stage's image into its
// script jobs), else the pipeline's, else the agent's default.
func (x *run) jobImage(job protocol.Job, env map[string]string) (string, *executor.ImageAuth) {
	if job.Image != nil && job.Image.Name != "" {
		return expandImage(job.Image, job.RuntimeVars, env)
	}
	return x.envImage(env)
}

func expandImage(img *protocol.Image, names []string, env map[string]string) (string, *executor.ImageAuth) {
	expand := func(s string) string {
		if len(names) == 0 {
			return s
		}
		return protocol.ExpandVars(s, names, env)
	}
	var auth *executor.ImageAuth
	if img.User != "" {
		auth = &executor.ImageAuth{User: expand(img.User), Password: expand(img.Password)}
	}
	return expand(img.Name), auth
}

// jobLog is one job's log: masked, then shipped. A step's stdout (Write) and stderr (Stderr)
// are masked each on its own and merged after: a secret printed in pieces to one stream stays
// one secret to its masker whatever the other stream writes in between. The agent's own lines
// (note) go between them. Its writers may be concurrent.
type jobLog struct {
	mu     sync.Mutex
	out    *masker    // stdout, and whatever else writes the log as an io.Writer
	errOut *masker    // stderr
	sink   lineSink   // where both maskers write, in the order they pass bytes on
	stream *logStream // nil when the job has no server id
	last   atomic.Int64
}

func (x *run) openLog(id int64) *jobLog {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.openLogLocked(id)
}

func (x *run) openLogLocked(id int64) *jobLog {
	jl := &jobLog{}
	jl.sink.w = io.Discard
	if id != 0 {
		jl.stream = newLogStream(x.reports, x.cfg.API, x.lease.ID, id, x.cfg.LogFlushInterval, x.leaseLost, x.log)
		jl.sink.w = jl.stream
		x.streams = append(x.streams, jl.stream)
	}
	jl.out, jl.errOut = newMasker(&jl.sink, x.secrets), newMasker(&jl.sink, x.secrets)
	jl.last.Store(time.Now().UnixNano())
	return jl
}

// Write implements io.Writer: a step's stdout.
func (jl *jobLog) Write(p []byte) (int, error) {
	jl.last.Store(time.Now().UnixNano())
	jl.mu.Lock()
	defer jl.mu.Unlock()
	return jl.out.Write(p)
}

// Stderr is the writer of a step's stderr.
func (jl *jobLog) Stderr() io.Writer { return stderrLog{jl} }

type stderrLog struct{ jl *jobLog }

func (e stderrLog) Write(p []byte) (int, error) {
	e.jl.last.Store(time.Now().UnixNano())
	e.jl.mu.Lock()
	defer e.jl.mu.Unlock()
	return e.jl.errOut.Write(p)
}

// addSecrets masks more values in both streams from now on.
func (jl *jobLog) addSecrets(vals []string) {
	jl.mu.Lock()
	defer jl.mu.Unlock()
	jl.out.add(vals)
	jl.errOut.add(vals)
}

// note adds a line of the agent's own to the log, marked so it cannot pass for the job's output.
// The agent speaks between steps, so what the streams hold back is passed on first: nothing of
// a step can follow to complete it.
func (jl *jobLog) note(format string, args ...any) {
	jl.mu.Lock()
	defer jl.mu.Unlock()
	jl.out.Flush()
	jl.errOut.Flush()
	var line []byte
	if jl.sink.midLine {
		line = append(line, '\n')
	}
	line = fmt.Appendf(line, "[nimbus] "+format+"\n", args...)
	jl.out.Write(line)
	jl.out.Flush()
}

// close flushes the maskers and marks the log complete: the stream sends the rest at once, and
// the job's job_finished waits in the outbox until the server has it (waitShipped).
func (jl *jobLog) close() {
	jl.mu.Lock()
	jl.out.Flush()
	jl.errOut.Flush()
	jl.mu.Unlock()
	if jl.stream != nil {
		jl.stream.finish()
	}
}

// lineSink passes masked bytes on and remembers whether they stop in the middle of a line.
type lineSink struct {
	w       io.Writer
	midLine bool
}

func (s *lineSink) Write(p []byte) (int, error) {
	if len(p) > 0 {
		s.midLine = p[len(p)-1] != '\n'
	}
	return s.w.Write(p)
}

// watch calls fire once when nothing was written for d; the returned func stops watching.
func (jl *jobLog) watch(d time.Duration, fire func()) func() {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(min(d/4+1, time.Second))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if time.Since(time.Unix(0, jl.last.Load())) >= d {
					fire()
					return
				}
			}
		}
	}()
	return func() { close(done) }
}
