// Package runner runs one leased pipeline (a protocol.Lease) on this host to completion: it
// prepares and clones the checkout, runs the stages and their jobs through an executor, streams
// each job's log with secrets masked, reports events, renews the lease, and finishes it once. It
// is intended for internal use of the agent only.
//
// The flow of one lease:
//
//	checkout <work dir>/workspaces/<lease id>  ── clone lease.CloneURL at lease.Commit
//	    │   (heartbeat: renew every HeartbeatInterval; Cancel or lease_lost cancels the run)
//	    ▼
//	pipeline_started ─► stages in order ─► failStages (on failure) ─► endStages (always)
//	    │                 jobs: parallel or in order; each job_started … job_finished,
//	    │                 its log shipped by offset, its exports passed to later jobs
//	    ▼
//	finish (success | failed | cancelled) ─► checkout removed
//
// Words. The checkout is the directory one pipeline's jobs run in: the repository is cloned into
// it, every job container mounts it (at CNB_BUILD_WORKSPACE, "/workspace" by default), and jobs
// hand files to each other and to the agent through it. CNB and the pipelines call it the
// workspace, and what they see keeps that name (CNB_BUILD_WORKSPACE, the mount path, messages in
// a job's log). Inside the code "workspace" means only the cloud IDE (the vscode event: devenv.go,
// agent/workspace, backend/workspace), and the job's directory is the checkout, the word
// Buildkite and GitLab use for it. "workdir" was the other candidate, but it already names the
// agent's own work dir (Config.WorkDir) and a container's working directory.

// Cancellation is one context with a cause: the server's stop (Stop, from the agent's control
// long-poll, or a renew's Cancel), a lost lease, the pipeline's MaxDuration or the agent
// stopping. The executors kill a step as soon as its context ends, so the containers are gone
// within seconds. After a lost lease nothing more is reported: the server has given the
// pipeline up and would refuse it anyway.
//
// Reports survive outages. Events go through one ordered outbox per run and the finish after
// them; both are retried with backoff until the server takes them, the lease is lost, or the
// reports context given to Run ends (the agent's bounded shutdown). Jobs never wait for the
// server: they keep running while it is away, and their logs are kept and resent from the
// acknowledged offset. The wait for a log before its job is reported finished counts only time
// in which the server answers.
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nimbus-build/nimbus/agent/client"
	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// API is the part of the agent API a run needs; *client.Client implements it. A call on a lease
// the server no longer honours fails with an error that matches client.ErrLeaseLost.
type API interface {
	Renew(ctx context.Context, leaseID string) (protocol.RenewResponse, error)
	Event(ctx context.Context, leaseID string, ev protocol.Event) error
	AppendLog(ctx context.Context, leaseID string, jobID, offset int64, data []byte) (int64, error)
	Finish(ctx context.Context, leaseID string, req protocol.FinishRequest) error
}

// Config is what every run of a Runner shares.
type Config struct {
	API      API
	Executor executor.Executor
	// WorkDir is the agent's work dir; checkouts are WorkDir/CheckoutsDir/<lease id>.
	WorkDir string
	// DefaultImage runs script jobs when neither the job nor the pipeline names an image.
	DefaultImage string
	// IDEImage is the IDE container of workspaces whose image has no code-server (devenv.go).
	IDEImage string
	// GitPath is the git executable; "" means git on PATH.
	GitPath string
	// Intervals, as the server dictated them at registration.
	HeartbeatInterval time.Duration
	LogFlushInterval  time.Duration
	// WaitPollInterval is how often a stage or job that waits for a lock, or a cnb:await, asks
	// again (1 s).
	WaitPollInterval time.Duration
	Log              *slog.Logger
	// Images builds environment images (docker.build, docker:cache); Services runs pipeline
	// services (services: docker); Caches keeps docker.volumes.
	Images   ImageConfig
	Services ServiceConfig
	Caches   CacheConfig
	// Tools are executables of the host every job step can call by name (executor.Step.Tools):
	// the nimbus CLI.
	Tools []string
}

// Runner runs leases; one Runner serves many concurrent runs.
type Runner struct {
	cfg Config

	mu      sync.Mutex
	runs    map[string]*run // by lease id, while they run
	changed chan struct{}   // a run started, ended or was stopped
}

// New checks cfg and returns a Runner.
func New(cfg Config) (*Runner, error) {
	if cfg.API == nil || cfg.Executor == nil || cfg.WorkDir == "" {
		return nil, errors.New("runner: API, Executor and WorkDir are required")
	}
	abs, err := filepath.Abs(cfg.WorkDir)
	if err != nil {
		return nil, fmt.Errorf("runner: work dir: %w", err)
	}
	cfg.WorkDir = abs
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 10 * time.Second
	}
	if cfg.LogFlushInterval <= 0 {
		cfg.LogFlushInterval = time.Second
	}
	if cfg.WaitPollInterval <= 0 {
		cfg.WaitPollInterval = time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.GitPath == "" {
		cfg.GitPath = "git"
	}
	return &Runner{cfg: cfg, runs: map[string]*run{}, changed: make(chan struct{}, 1)}, nil
}

// Stop stops the run of a lease as the server asked (a cancel, or billing's termination): its
// containers are killed and it finishes cancelled (the server records its own reason). It
// reports whether such a run was going.
func (r *Runner) Stop(leaseID, reason string) bool {
	r.mu.Lock()
	x := r.runs[leaseID]
	r.mu.Unlock()
	if x == nil {
		return false
	}
	x.stop(reason)
	return true
}

// Unstopped lists the leases being run that the server has not stopped: what the agent's
// control long-poll asks about.
func (r *Runner) Unstopped() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.runs))
	for id, x := range r.runs {
		if !x.stopping.Load() && !x.softStopped.Load() {
			out = append(out, id)
		}
	}
	return out
}

// Changed signals when the set Unstopped returns may have changed.
func (r *Runner) Changed() <-chan struct{} { return r.changed }

func (r *Runner) signal() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *Runner) track(x *run) {
	r.mu.Lock()
	r.runs[x.lease.ID] = x
	r.mu.Unlock()
	r.signal()
}

func (r *Runner) untrack(x *run) {
	r.mu.Lock()
	delete(r.runs, x.lease.ID)
	r.mu.Unlock()
	r.signal()
}

// Pipeline statuses reported by finish, and job statuses reported by job_finished.
const (
	StatusSuccess   = "success"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
	StatusSkipped   = "skipped"
)

// Result is how a run ended, as reported to the server.
type Result struct {
	Status string
	Reason string
}

// Causes of a cancelled run, read back with context.Cause.
var (
	errPipelineTimeout = errors.New("the pipeline ran past its maximum duration")
	errJobTimeout      = errors.New("job timed out")
	errNoOutput        = errors.New("job printed nothing for too long")
)

// cancelled is the cause when the server asks to stop the pipeline.
type cancelled struct{ reason string }

func (c *cancelled) Error() string { return "cancelled: " + c.reason }

// run is the state of one lease being run.
type run struct {
	*Runner
	lease    *protocol.Lease
	log      *slog.Logger
	cancel   context.CancelCauseFunc
	lost     atomic.Bool
	stopping atomic.Bool // the server asked to stop it
	// softStopped: the server asked a ready workspace to stop, and it is ending gracefully.
	softStopped atomic.Bool
	heard       atomic.Int64 // when the server last answered a renew or an event (unix ns)
	reports     context.Context
	outbox      chan report // events, in order, for the sender (deliverEvents)
	sent        chan struct{}
	// startKnown: the server has taken a job_started of this lease, so it knows user code may
	// run (an expired lease now fails the pipeline instead of re-queueing it): see startJob.
	startKnown atomic.Bool
	secrets    []string
	jobIDs     map[[2]int]int64 // (stage index over all groups, job index) → server job id

	checkout string // the pipeline's checkout on this host
	mount    string // where jobs see it

	extras extras  // what the preparations add to every step (prepare.go)
	dev    *devEnv // the cloud development environment of a workspace pipeline (devenv.go)
	// deadline is the pipeline's lifetime cap (zero: none).
	deadline time.Time
	pushes   pushes // background pushes of environment images, waited for before the finish (envimage.go)

	mu      sync.Mutex
	exports map[string]string // variables exported so far, for later jobs
	streams []*logStream      // every job log of the run, drained before the finish
	setup   *jobLog           // the first job's log while the preparations write to it
	setupID int64
}

// Run runs the lease to completion and reports its end to the server. It returns the result it
// reported, or an error matching client.ErrLeaseLost when the server took the lease away (then
// nothing was reported). Every container of the run is gone when it returns.
//
// Ending ctx kills the run, which is then reported failed with reason agent_stopped (the agent
// is shutting down). reports bounds every report and every wait for the server: while it lives,
// events, logs and the finish are retried until the server takes them, however long it is away;
// when it ends, what is still unsent is given up and Run returns.
func (r *Runner) Run(ctx, reports context.Context, lease *protocol.Lease) (Result, error) {
	if !validLeaseID(lease.ID) {
		return Result{}, fmt.Errorf("runner: lease id %q cannot name a checkout", lease.ID)
	}
	x := &run{Runner: r, lease: lease, exports: map[string]string{}, jobIDs: map[[2]int]int64{},
		log: r.cfg.Log.With("lease_id", lease.ID, "pipeline_id", lease.PipelineID), reports: reports,
		outbox: make(chan report, 256), sent: make(chan struct{})}
	for _, j := range lease.Jobs {
		x.jobIDs[[2]int{j.Stage, j.Job}] = j.ID
	}
	x.secrets = secretValues(lease)
	x.heard.Store(time.Now().UnixNano())

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	x.cancel = cancel
	if lease.Plan.Workspace {
		x.dev = newDevEnv(&lease.Plan, func() { x.event(protocol.Event{Kind: protocol.EventWorkspaceReady}) })
	}
	if max := lease.Plan.Runner.MaxDuration.Std(); max > 0 {
		x.deadline = time.Now().Add(max)
		var stop context.CancelFunc
		runCtx, stop = context.WithTimeoutCause(runCtx, max, errPipelineTimeout)
		defer stop()
	}
	r.track(x)
	defer r.untrack(x)
	// The heartbeat outlives the run context: the lease must hold until finish is sent.
	hbCtx, stopHeartbeat := context.WithCancel(reports)
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		x.heartbeat(hbCtx)
	}()
	defer func() {
		stopHeartbeat()
		<-hbDone
	}()
	go x.deliverEvents()

	x.log.Info("pipeline leased", "name", lease.Plan.Name, "commit", lease.Commit)
	res := x.execute(runCtx)
	ended := time.Now()
	close(x.outbox)
	select {
	case <-x.sent:
	case <-reports.Done():
	}
	x.drainLogs()
	if x.lost.Load() {
		x.log.Warn("lease lost: work stopped, nothing more reported")
		return Result{}, fmt.Errorf("runner: lease %s: %w", lease.ID, client.ErrLeaseLost)
	}
	if ctx.Err() != nil && res.Status != StatusSuccess {
		res = Result{Status: StatusFailed, Reason: "agent_stopped: the agent shut down while the pipeline ran"}
	}
	req := maskReport(protocol.FinishRequest{Status: res.Status, Reason: res.Reason, FinishedAt: ended}, x.secretList())
	err := x.keepTrying("finish", func(ctx context.Context) error { return r.cfg.API.Finish(ctx, lease.ID, req) })
	if err != nil {
		if errors.Is(err, client.ErrLeaseLost) {
			return res, fmt.Errorf("runner: lease %s: %w", lease.ID, err)
		}
		return res, fmt.Errorf("runner: report the end of lease %s: %w", lease.ID, err)
	}
	x.log.Info("pipeline finished", "status", req.Status, "reason", req.Reason)
	return res, nil
}

// report is one event for the outbox; after, when set, is the log that must reach the server
// before it (a job is reported finished once its log is complete). taken, when set, is told
// whether the server took the event (false once it cannot be sent: the lease lost, the reports
// abandoned, or a refusal).
type report struct {
	ev    protocol.Event
	after *logStream
	taken chan bool
}

// deliverEvents sends the outbox's events in order, each until the server takes it.
func (x *run) deliverEvents() {
	defer close(x.sent)
	for rep := range x.outbox {
		ok := x.deliver(rep)
		if rep.taken != nil {
			rep.taken <- ok
		}
	}
}

// deliver sends one report and says whether the server took it.
func (x *run) deliver(rep report) bool {
	if rep.after != nil && !x.lost.Load() {
		if !x.waitShipped(rep.after, jobLogWaitFlushes*x.cfg.LogFlushInterval) && !x.lost.Load() && x.reports.Err() == nil {
			x.log.Warn("the server has not taken the whole log of a job; reporting the job finished anyway", "job_id", rep.after.jobID)
		}
	}
	if x.lost.Load() || x.reports.Err() != nil {
		return false // drain: nothing more can be sent
	}
	ev := maskReport(rep.ev, x.secretList()) // reports.go
	err := x.keepTrying("event "+ev.Kind, func(ctx context.Context) error { return x.cfg.API.Event(ctx, x.lease.ID, ev) })
	if err != nil && !errors.Is(err, client.ErrLeaseLost) && x.reports.Err() == nil {
		x.log.Warn("the server refused an event", "kind", ev.Kind, "job_id", ev.JobID, "err", err)
	}
	return err == nil
}

// keepTrying sends one report until the server takes it, refuses it for good (a 4xx; lease_lost
// stops the run), or the reports context ends. The client retries with backoff inside each call
// (for about a minute); this goes on after that, so an outage of any length is ridden out.
func (x *run) keepTrying(what string, call func(context.Context) error) error {
	warned := false
	for {
		err := call(x.reports)
		switch {
		case err == nil:
			x.heard.Store(time.Now().UnixNano())
			if warned {
				x.log.Info("the server took the report again", "what", what)
			}
			return nil
		case errors.Is(err, client.ErrLeaseLost):
			x.leaseLost()
			return err
		case x.reports.Err() != nil:
			return fmt.Errorf("%s not sent (the agent is stopping): %w", what, err)
		case !client.Retryable(err):
			return err
		}
		if !warned {
			x.log.Warn("the server cannot be reached; the run goes on and the report is kept", "what", what, "err", err)
			warned = true
		}
		t := time.NewTimer(time.Second)
		select {
		case <-x.reports.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// reachable says whether the server answered within the last two heartbeats.
func (x *run) reachable() bool {
	return time.Since(time.Unix(0, x.heard.Load())) < 2*x.cfg.HeartbeatInterval
}

// waitShipped waits until the server holds the whole of a finished log, and reports whether it
// does. It gives up when the log can never be shipped (lease lost, or the server lost bytes),
// when the reports are abandoned, or after bound of time in which the server answered but did
// not take the log (a failing log store must not hold the pipeline for ever). Time in which the
// server cannot be reached does not count: the log goes once it is back.
func (x *run) waitShipped(s *logStream, bound time.Duration) bool {
	const step = 50 * time.Millisecond
	t := time.NewTicker(step)
	defer t.Stop()
	var waited time.Duration
	for {
		select {
		case <-s.done:
			return s.pending() == 0
		case <-x.reports.Done():
			return false
		case <-t.C:
		}
		if x.lost.Load() {
			return false
		}
		if x.reachable() {
			waited += step
		}
		if waited >= bound {
			return s.pending() == 0
		}
	}
}

// execute runs everything between the lease and the finish, and says how it ended.
func (x *run) execute(ctx context.Context) Result {
	if err := x.prepareCheckout(); err != nil {
		return Result{Status: StatusFailed, Reason: err.Error()}
	}
	defer x.removeCheckout()
	if err := x.clone(ctx); err != nil {
		if res, stopped := x.stopped(ctx); stopped {
			return res
		}
		return Result{Status: StatusFailed, Reason: err.Error()}
	}
	// A place of its own first (a pod on Kubernetes, pod.go), which may wait for capacity.
	endPipeline, waited, err := x.startPipeline(ctx)
	if err != nil {
		if res, stopped := x.stopped(ctx); stopped {
			return res
		}
		return Result{Status: StatusFailed, Reason: err.Error()}
	}
	defer endPipeline()
	// From here on user code runs: the server must not re-queue this pipeline on its own.
	x.event(protocol.Event{Kind: protocol.EventPipelineStarted, Waited: waited})
	done, err := x.prepare(ctx)
	if err != nil {
		if res, stopped := x.stopped(ctx); stopped {
			x.closeSetupLog()
			return res
		}
		x.failSetup(err)
		return Result{Status: StatusFailed, Reason: err.Error()}
	}
	if x.dev != nil {
		stopEnv, err := x.startDevEnv(ctx)
		if err != nil {
			x.failSetup(err)
			done(false)
			return Result{Status: StatusFailed, Reason: err.Error()}
		}
		defer stopEnv()
		if !x.dev.gated {
			x.dev.ready() // the environment is up: it may be entered while the stages run
		}
	}
	res := x.runPlan(ctx)
	x.closeSetupLog()
	done(res.Status == StatusSuccess)
	return res
}

// stopped says whether the run context ended, and the result that follows from why.
func (x *run) stopped(ctx context.Context) (Result, bool) {
	if ctx.Err() == nil {
		return Result{}, false
	}
	cause := context.Cause(ctx)
	var c *cancelled
	switch {
	case errors.As(cause, &c):
		return Result{Status: StatusCancelled, Reason: c.reason}, true
	case errors.As(cause, new(*serviceFailed)):
		return Result{Status: StatusFailed, Reason: cause.Error()}, true
	case errors.Is(cause, errPipelineTimeout):
		return Result{Status: StatusFailed, Reason: fmt.Sprintf("timeout: the pipeline ran past its maximum of %s",
			x.lease.Plan.Runner.MaxDuration.Std())}, true
	}
	// A lost lease or the agent stopping; Run decides what, if anything, to report.
	return Result{Status: StatusCancelled, Reason: cause.Error()}, true
}

// heartbeat renews the lease every interval until ctx ends. A Cancel answer stops the run (and
// renewing goes on, so the lease holds while the run winds down); lease_lost stops everything.
// A failed renew is tried again at the next beat: the run goes on while the server is away.
func (x *run) heartbeat(ctx context.Context) {
	t := time.NewTicker(x.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		resp, err := x.cfg.API.Renew(ctx, x.lease.ID)
		switch {
		case errors.Is(err, client.ErrLeaseLost):
			x.leaseLost()
			return
		case err != nil:
			if ctx.Err() == nil {
				x.log.Warn("renewing the lease failed; trying again at the next heartbeat", "err", err)
			}
		case resp.Cancel:
			x.heard.Store(time.Now().UnixNano())
			x.stop(resp.Reason)
		default:
			x.heard.Store(time.Now().UnixNano())
		}
	}
}

// stop cancels the run because the server asked. A ready workspace stops gracefully first: its
// hold ends, its endStages run and its work is saved; workspaceStopGrace later it is killed if
// it has not ended by then.
func (x *run) stop(reason string) {
	if reason == "" {
		reason = "cancelled by the server"
	}
	if x.dev != nil && x.dev.readyYet() && x.dev.requestStop(StopByServer+": "+reason) {
		x.log.Info("the server stopped the workspace; ending it", "reason", reason)
		x.softStopped.Store(true)
		x.signal()
		time.AfterFunc(workspaceStopGrace, func() { x.kill(reason) })
		return
	}
	if x.softStopped.Load() {
		return // already ending; the grace timer kills it if it must
	}
	x.kill(reason)
}

// kill cancels the run: its containers are killed and it finishes cancelled.
func (x *run) kill(reason string) {
	if x.stopping.CompareAndSwap(false, true) {
		x.log.Info("the server stopped the pipeline", "reason", reason)
		x.cancel(&cancelled{reason: reason})
		x.signal()
	}
}

// drainLogs waits for the job logs still being shipped — without a bound while the server is
// away, a bounded time once it answers — then stops them. After a lost lease nothing more is
// sent at all.
func (x *run) drainLogs() {
	x.mu.Lock()
	streams := x.streams
	x.mu.Unlock()
	for _, s := range streams {
		if !x.lost.Load() && !x.waitShipped(s, runLogWaitFlushes*x.cfg.LogFlushInterval) && !x.lost.Load() {
			x.log.Warn("giving up on the rest of a job's log", "job_id", s.jobID, "unsent_bytes", s.pending())
		}
		s.abandon()
		<-s.done
	}
}

// leaseLost stops the run for good: the server no longer honours the lease.
func (x *run) leaseLost() {
	if x.lost.CompareAndSwap(false, true) {
		x.cancel(client.ErrLeaseLost)
	}
}

// event queues an event for the server, in order, unless the lease is lost; it never waits for
// the network. A job_finished waits in the outbox (not here) for the job's log: after.
func (x *run) event(ev protocol.Event) { x.eventAfter(ev, nil) }

func (x *run) eventAfter(ev protocol.Event, after *logStream) {
	if x.lost.Load() {
		return
	}
	ev.At = time.Now()
	x.outbox <- report{ev: ev, after: after}
}

// startJob reports that job id starts. Until the server has taken one job_started of the
// lease, it also waits for the server to take this one, so that no user code runs before the
// server knows it may have: a lease that expires (the agent killed, its host gone) before any
// job started puts the pipeline back in the queue, and one whose user code ran fails it
// agent_lost instead of running that code a second time. So the first job of a pipeline waits
// out a server outage before it starts (the jobs after it do not wait: the server knows).
// false: the run ended meanwhile, or the event could not be sent (the lease is lost or its
// reports abandoned), and the job must not start.
func (x *run) startJob(ctx context.Context, id int64) bool {
	ev := protocol.Event{Kind: protocol.EventJobStarted, JobID: id}
	if x.startKnown.Load() {
		x.event(ev)
		return true
	}
	if x.lost.Load() {
		return false
	}
	ev.At = time.Now()
	taken := make(chan bool, 1)
	x.outbox <- report{ev: ev, taken: taken}
	select {
	case ok := <-taken:
		if ok {
			x.startKnown.Store(true)
		}
		return ok && ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}

// secretValues are the values masked in every log of the lease: its secrets, the job token and
// the passwords of its images.
func secretValues(l *protocol.Lease) []string {
	out := []string{l.JobToken, l.Env["CNB_TOKEN"]}
	for _, v := range l.Secrets {
		out = append(out, v)
	}
	add := func(img *protocol.Image) {
		if img != nil {
			out = append(out, img.Password)
		}
	}
	add(l.Plan.Image)
	for _, group := range [][]protocol.Stage{l.Plan.Stages, l.Plan.FailStages, l.Plan.EndStages} {
		for _, s := range group {
			for _, j := range s.Jobs {
				add(j.Image)
			}
		}
	}
	return out
}

// validLeaseID keeps a lease id usable as one path element.
func validLeaseID(id string) bool {
	if id == "" || id == "." || id == ".." || len(id) > 200 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// removeCheckout deletes the checkout; a failure is logged, and the agent's start-up cleanup
// will try again.
func (x *run) removeCheckout() {
	if err := os.RemoveAll(x.checkout); err != nil {
		x.log.Warn("removing the checkout failed", "dir", x.checkout, "err", err)
	}
}
