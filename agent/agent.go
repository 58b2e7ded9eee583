// Package agent is the Nimbus agent: the process on a CPU or GPU host that runs pipelines. It is
// used by the nimbus-agent binary and, in the all-in-one mode, inside nimbus-server as the
// built-in agent. It never imports backend packages; it talks to the server only through the
// HTTP API whose wire types are in internal/protocol (agent/client).
//
// New establishes the agent's identity (an id kept in its work dir, so a restart recognises what
// the previous run left behind), chooses and verifies its executor (Docker when an engine answers,
// else the host shell with a loud warning), detects GPUs and removes leftovers of earlier runs.
// Run is the loop:
//
//	register (once: the agent token is kept in the work dir) ──► poll while there is capacity
//	    ▲ 401: register again                                     │ lease
//	    └─────────────────────────────────────────────────────────┤
//	                                         run it (agent/runner) in its own goroutine,
//	                                         its cores and GPUs reserved until it ends
//
// Capacity is reported honestly with every poll: the cores and GPU device ids not reserved by a
// running lease, and the running lease ids; the agent does not poll at all while it is full.
//
// Beside the poll, one control long-poll is always held (control): the server answers it the
// moment a running pipeline must stop, so a cancel or a termination kills its containers within
// a second, and each call tells the server the agent is alive.
// Beside them the agent holds its tunnel (agent/tunnel): the one connection the server opens
// streams to this host on, since the host accepts none. It ends with the control long-poll.
//
// Stopping (ctx ends: SIGTERM or SIGINT) is bounded: the agent takes no new work, stops its
// ready workspaces gracefully (their work is saved; at most WorkspaceStopWait), lets running
// pipelines go on for StopGrace (0 by default: they are killed at once), then kills what still
// runs and reports each pipeline failed with reason agent_stopped. Reports get StopTimeout in
// all; what the server has not taken by then is given up (a server that is away must not hold
// the shutdown), and such pipelines end agent_lost on the server one lease TTL later. Then the
// agent deregisters, so the server shows it offline at once.
//
// Dying (kill -9, the OOM killer, a crash, its cgroup killed) skips all that, so what the agent
// started ends by itself: every step runs under a lifeline the agent holds (internal/lifeline,
// with the nimbus CLI as the init; newLifelines), and each docker service engine gets SIGKILL
// from the kernel (agent/dockerservice). Containers stop within about a second of the death,
// with nobody restarting the agent; the server fails the pipelines agent_lost one lease TTL
// later, billed to the last renewal, and the agent's next start removes the stopped containers,
// volumes, engines' state and checkouts (cleanup).
package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nimbus-build/nimbus/agent/client"
	"github.com/nimbus-build/nimbus/agent/dockerservice"
	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/agent/gpu"
	"github.com/nimbus-build/nimbus/agent/runner"
	"github.com/nimbus-build/nimbus/agent/tunnel"
	"github.com/nimbus-build/nimbus/agent/volumes"
	"github.com/nimbus-build/nimbus/agent/workspace"
	"github.com/nimbus-build/nimbus/internal/backoff"
	"github.com/nimbus-build/nimbus/internal/lifeline"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Config is an agent's configuration.
type Config struct {
	ServerURL string
	// Token is the registration token, exchanged once for the agent's own token.
	Token string
	// Name shows the agent in the server's lists; "" means the host name.
	Name string
	// Tags are the runner tags served besides the GPU tags of detected GPUs; nil means
	// DefaultTags() on a host without GPUs, and none on a host with GPUs, so that CPU
	// pipelines never hold a GPU host unless its operator names CPU tags here.
	Tags []string
	CPUs int
	// WholeHost lets a pipeline asking for more cores than CPUs run when the agent runs
	// nothing else, alone on all its cores (protocol.RegisterRequest.WholeHost).
	WholeHost bool
	// MemoryBytes is announced to the server; 0 means the host's memory.
	MemoryBytes int64
	// Concurrency caps the pipelines run at once; 0 means as many as there are cores (each
	// pipeline holds at least one).
	Concurrency int
	Executor    string // auto, docker, shell, or one of Executors
	// Executors make the executors that Detect does not know, by mode (nimbus-agent gives
	// "kubernetes"), from the agent's id and its static nimbus CLI. They are given rather than
	// imported so that only the binaries that offer them link their clients.
	Executors  map[string]NewExecutor
	DockerHost string // "" = DOCKER_HOST or the default socket
	Network    string // container network mode; "" = the engine's default
	WorkDir    string // checkouts, the agent id and the agent token live here
	// DefaultImage runs script jobs whose pipeline names no image.
	DefaultImage string
	// WorkspaceIDEImage is the IDE container of workspaces whose image has no code-server
	// (it must have code-server on its PATH); "" = none: such workspaces offer the terminal.
	WorkspaceIDEImage string
	Version           string // announced to the server
	// DetectGPUs finds the host's GPUs; nil means gpu.Detect (nvidia-smi when it is on PATH).
	DetectGPUs func(context.Context) ([]protocol.GPU, error)
	// SimulatedGPUs says the GPUs DetectGPUs reports are pretend ones (nimbus-agent --gpus
	// simulate:N): pipelines get their ids, but no device is requested from the engine.
	SimulatedGPUs bool
	// Retry is the API client's backoff; the zero value is the protocol's default.
	Retry client.Retry
	// RequireRegistration makes Run fail at once when there is neither a registration token nor
	// a saved registration, instead of idling (what the built-in agent of the server does).
	RequireRegistration bool
	// StopGrace is how long running pipelines may go on after the agent is told to stop, before
	// they are killed; 0 kills them at once.
	StopGrace time.Duration
	// StopTimeout bounds, after the grace, killing the containers and reporting the ends; 0
	// means DefaultStopTimeout. The whole stop takes at most StopGrace + StopTimeout.
	StopTimeout time.Duration
	// DockerService is how pipelines that list `services: docker` get their own engine (Docker
	// executor only). Its Dir "" means DefaultServiceDir/<agent id>.
	DockerService dockerservice.Config
	// CacheBudget is the most bytes the caches of docker.volumes take in WorkDir/caches (least
	// recently used ones are evicted); 0 means volumes.DefaultBudget (20 GiB).
	CacheBudget int64
	// NimbusCLI is the statically linked nimbus CLI every job step gets (cli.go); "" finds it
	// beside the agent's executable or on PATH, CLIOff gives none.
	NimbusCLI string
}

// DefaultServiceDir holds the state of the pipelines' docker services (their images and
// containers), one directory per agent. It is not under the work dir: the engines run as their
// own user, who must be able to reach it.
const DefaultServiceDir = "/var/lib/nimbus-agent/services"

// DefaultStopTimeout leaves room under a service manager's usual 30 s stop timeout (the shipped
// systemd unit's TimeoutStopSec).
const DefaultStopTimeout = 15 * time.Second

// DefaultImage is the image of script jobs when neither the pipeline nor the agent names one,
// as in CNB.
const DefaultImage = "cnbcool/default-build-env:latest"

// Agent is one running agent.
type Agent struct {
	cfg  Config
	log  *slog.Logger
	id   string
	exec executor.Executor
	gpus []protocol.GPU
	tags []string
	// docker runs the pipelines' docker services; nil with the shell executor.
	docker *dockerservice.Manager
	// caches keeps the caches of docker.volumes, for every run of every session.
	caches *volumes.Store
	// cli is the nimbus CLI of the jobs; "" when there is none.
	cli string
	// host is what the agent announces about its host (hostfacts.go).
	host protocol.HostFacts
}

// IDFile holds the agent's id in its work dir; TokenFile its registration with the server.
const (
	IDFile    = "agent-id"
	TokenFile = "agent-token.json"
)

// New prepares an agent: work dir, id, executor, GPUs, cleanup of earlier runs. The caller must
// Close it.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Agent, error) {
	if cfg.WorkDir == "" {
		return nil, errors.New("agent: work dir is required")
	}
	// Absolute, because the Docker engine bind-mounts paths under it (the CLI, checkouts)
	// and refuses relative ones: `--work-dir ./nimbus-agent`, the default, failed every job
	// with "mount path must be absolute".
	abs, err := filepath.Abs(cfg.WorkDir)
	if err != nil {
		return nil, fmt.Errorf("agent: work dir: %w", err)
	}
	cfg.WorkDir = abs
	if err := os.MkdirAll(filepath.Join(cfg.WorkDir, runner.CheckoutsDir), 0o755); err != nil {
		return nil, fmt.Errorf("agent: create work dir: %w", err)
	}
	id, err := loadID(cfg.WorkDir)
	if err != nil {
		return nil, err
	}
	detect := cfg.DetectGPUs
	if detect == nil {
		detect = gpu.Detect
	}
	gpus, err := detect(ctx)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	ex, warning, err := newExecutor(ctx, cfg, id)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if d, ok := ex.(*executor.Docker); ok {
		d.NetworkMode = cfg.Network
		d.SimulateGPUs = cfg.SimulatedGPUs
		if w := unreachableServer(cfg.ServerURL, cfg.Network); w != "" {
			log.Warn("!!! " + w + " !!!")
		}
	}
	log = log.With("agent_id", id)
	if warning != "" {
		log.Warn("!!! " + warning + " !!!")
	}
	a := &Agent{cfg: cfg, log: log, id: id, exec: ex, gpus: gpus, tags: servedTags(cfg.Tags, gpus)}
	if ex.Name() == executor.ModeDocker {
		a.docker = newDockerService(cfg.DockerService, id, log)
	}
	if err := a.cleanup(ctx); err != nil {
		ex.Close()
		return nil, err
	}
	// After the cleanup: the containers of a crashed run no longer hold its cache mounts.
	a.caches, err = volumes.Open(volumes.Config{Dir: filepath.Join(cfg.WorkDir, "caches"), Budget: cfg.CacheBudget, Log: log})
	if err != nil {
		ex.Close()
		return nil, fmt.Errorf("agent: %w", err)
	}
	a.host = hostFacts(ctx, ex, len(gpus), cfg.SimulatedGPUs)
	var lines *lifeline.Lines
	a.cli, lines = setUpCLI(ctx, cfg.WorkDir, cfg.NimbusCLI, log)
	switch ex := ex.(type) {
	case *executor.Docker:
		ex.Lifelines = lines
	case *executor.Shell:
		ex.Lifelines = lines
	}
	log.Info("agent ready", "executor", ex.Name(), "tags", strings.Join(a.tags, ","), "cpus", cfg.CPUs,
		"gpus", len(gpus), "work_dir", cfg.WorkDir, "nimbus_cli", a.cli, "lifelines", lines != nil)
	return a, nil
}

// NewExecutor makes an executor for the agent with the id; cli is its static nimbus CLI.
type NewExecutor func(ctx context.Context, agentID, cli string) (executor.Executor, error)

// newExecutor is the configured executor: one of cfg.Executors, else what Detect finds.
func newExecutor(ctx context.Context, cfg Config, id string) (executor.Executor, string, error) {
	mk, ok := cfg.Executors[cfg.Executor]
	if !ok {
		return executor.Detect(ctx, cfg.Executor, cfg.DockerHost, id)
	}
	// Such an executor gets the CLI even when the jobs' PATH is to have none (CLIOff): it runs
	// the steps (the Kubernetes executor's pods).
	configured := cfg.NimbusCLI
	if configured == CLIOff {
		configured = ""
	}
	cli, problem := findCLI(configured)
	if cli == "" {
		return nil, "", fmt.Errorf("the %s executor runs every step through the static nimbus CLI: %s", cfg.Executor, problem)
	}
	ex, err := mk(ctx, id, cli)
	return ex, "", err
}

// ID returns the agent's stable id.
func (a *Agent) ID() string { return a.id }

// Executor returns the executor the agent chose.
func (a *Agent) Executor() executor.Executor { return a.exec }

// Tags returns the tags the agent serves: the configured ones and those of its GPUs.
func (a *Agent) Tags() []string { return slices.Clone(a.tags) }

// Close releases the executor and the cache store, and removes this agent's directory under
// DefaultServiceDir when nothing is left in it: it is named for the agent, so a later agent
// (another work dir) would never reuse it, and agents that came and went left one each.
func (a *Agent) Close() error {
	err := errors.Join(a.exec.Close(), a.caches.Close())
	if a.docker != nil && a.cfg.DockerService.Dir == "" {
		dir := filepath.Join(DefaultServiceDir, a.id)
		if rmErr := os.Remove(dir); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) && !errors.Is(rmErr, syscall.ENOTEMPTY) {
			err = errors.Join(err, fmt.Errorf("agent: remove %s: %w", dir, rmErr))
		}
	}
	return err
}

// cleanup removes containers and checkouts that an earlier run of this agent left behind: a
// crash or kill -9 skips the normal teardown, and the next start must not inherit its debris.
func (a *Agent) cleanup(ctx context.Context) error {
	if err := a.exec.Cleanup(ctx); err != nil {
		return fmt.Errorf("agent: clean up earlier containers: %w", err)
	}
	if a.docker != nil {
		if err := a.docker.Cleanup(); err != nil {
			return fmt.Errorf("agent: clean up earlier docker services: %w", err)
		}
	}
	dir := filepath.Join(a.cfg.WorkDir, runner.CheckoutsDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("agent: read checkouts: %w", err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("agent: remove stale checkout: %w", err)
		}
	}
	if len(entries) > 0 {
		a.log.Info("removed stale checkouts", "count", len(entries))
	}
	return nil
}

// newDockerService prepares the docker service of pipelines and says in the log whether it can
// be offered, and why not.
func newDockerService(cfg dockerservice.Config, agentID string, log *slog.Logger) *dockerservice.Manager {
	if cfg.Dir == "" {
		cfg.Dir = filepath.Join(DefaultServiceDir, agentID)
	}
	cfg.Log = log
	m := dockerservice.New(cfg)
	if err := m.Available(); err != nil {
		log.Warn("pipelines with services: docker will fail on this agent", "why", err.Error())
	} else {
		log.Info("docker service ready", "mode", m.Mode(), "dir", cfg.Dir)
		if p := m.CLIProblem(); p != "" {
			log.Warn("docker service: only images with their own docker CLI can use it", "why", p)
		}
	}
	return m
}

func loadID(workDir string) (string, error) {
	path := filepath.Join(workDir, IDFile)
	b, err := os.ReadFile(path)
	if err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("agent: read id: %w", err)
	}
	r := make([]byte, 8)
	if _, err := rand.Read(r); err != nil {
		return "", fmt.Errorf("agent: generate id: %w", err)
	}
	id := "agent-" + hex.EncodeToString(r)
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("agent: write id: %w", err)
	}
	return id, nil
}

// mergeTags appends the GPU tags to the configured ones, without duplicates.
// unreachableServer says why the jobs' containers cannot reach the server at serverURL, or "":
// a loopback address inside a container is the container itself, unless the containers share
// the host's network. Every job that calls the server (nimbus artifact push, the registry,
// imports, CNB_API_ENDPOINT) would fail with "connection refused".
func unreachableServer(serverURL, network string) string {
	u, err := url.Parse(serverURL)
	if err != nil || network == "host" {
		return ""
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); !(host == "localhost" || ip != nil && ip.IsLoopback()) {
		return ""
	}
	return fmt.Sprintf("job containers cannot reach the server at %s: a loopback address in a container is the container. "+
		"Set NIMBUS_AGENT_NETWORK=host (containers share the host's network), or give NIMBUS_SERVER_URL an address the containers reach", serverURL)
}

// DefaultTags are the CPU classes a host without GPUs serves when its operator names none.
func DefaultTags() []string { return []string{"cnb:arch:default", "cnb:arch:amd64"} }

// servedTags are the tags an agent registers with: the configured ones (or DefaultTags on a
// host without GPUs) and the GPU tags of what was detected.
func servedTags(configured []string, gpus []protocol.GPU) []string {
	if len(configured) == 0 && len(gpus) == 0 {
		configured = DefaultTags()
	}
	return mergeTags(configured, gpu.Tags(gpus))
}

func mergeTags(tags, more []string) []string {
	out := slices.Clone(tags)
	for _, t := range more {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// pause waits d or until ctx ends, and reports whether ctx is still alive.
func pause(ctx context.Context, d time.Duration) bool {
	return backoff.Sleep(ctx, d) == nil
}

// Run registers if needed, then polls for work while there is capacity and runs each lease in
// its own goroutine, until ctx ends. Then it stops as the package comment says, in at most
// StopGrace + StopTimeout, and returns once every container is gone. Without a registration
// token and without a saved registration it fails when RequireRegistration is set, and
// otherwise only logs why and waits for ctx: the all-in-one server starts its built-in agent
// before anything may have provisioned one.
func (a *Agent) Run(ctx context.Context) error {
	api, err := client.New(a.cfg.ServerURL, "", client.Options{Retry: a.cfg.Retry, UserAgent: "nimbus-agent/" + a.cfg.Version})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	reg, err := a.registration(ctx, api, false)
	if errors.Is(err, errNoToken) && a.cfg.RequireRegistration {
		return errors.New("agent: a registration token is required (--token or NIMBUS_AGENT_TOKEN) until the agent has registered once")
	}
	if errors.Is(err, errNoToken) {
		a.log.Error("not registered and no registration token (NIMBUS_AGENT_TOKEN): this agent runs nothing")
		<-ctx.Done()
		return nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	// Three lifetimes: ctx (taking work), runs (killed after the grace) and reports (given up
	// after the grace and the stop timeout).
	runs, killRuns := context.WithCancel(context.WithoutCancel(ctx))
	reports, abandon := context.WithCancel(context.WithoutCancel(ctx))
	defer killRuns()
	defer abandon()
	l := &loop{Agent: a, api: api, cap: newCapacity(a.cfg.CPUs, a.concurrency(), a.gpus), runs: runs, reports: reports}
	controlDone := make(chan struct{})
	err = l.serve(ctx, reg, controlDone)
	a.stop(l, killRuns, abandon)
	<-controlDone
	a.log.Info("agent stopped")
	return err
}

// WorkspaceStopWait bounds how long a stopping agent waits for its workspaces to save.
const WorkspaceStopWait = 90 * time.Second

// stop is the bounded shutdown: workspaces saved, grace, kill, reports, deregistration.
func (a *Agent) stop(l *loop, killRuns, abandon context.CancelFunc) {
	timeout := a.cfg.StopTimeout
	if timeout <= 0 {
		timeout = DefaultStopTimeout
	}
	finished := make(chan struct{})
	go func() {
		l.running.Wait()
		close(finished)
	}()
	if n := l.cap.runningCount(); n > 0 {
		a.log.Info("stopping: no new work; running pipelines are killed after the grace period",
			"running", n, "grace", a.cfg.StopGrace, "timeout", timeout)
	}
	// Workspaces first: each runs its endStages and saves its users' work to the repo before
	// anything is killed (bounded by WorkspaceStopWait), so stopping an agent loses no edit.
	l.mu.Lock()
	sess := l.session
	l.mu.Unlock()
	if sess != nil {
		if n, saved := sess.run.StopWorkspaces("the agent is stopping"); n > 0 {
			a.log.Info("stopping: saving the work of open workspaces", "workspaces", n)
			wait := time.NewTimer(WorkspaceStopWait)
			select {
			case <-saved:
			case <-wait.C:
				a.log.Warn("stopping: workspaces did not save their work in time; killing them", "wait", WorkspaceStopWait)
			}
			wait.Stop()
		}
	}
	grace := time.NewTimer(a.cfg.StopGrace)
	select {
	case <-finished:
	case <-grace.C:
	}
	grace.Stop()
	killRuns()
	hard := time.NewTimer(timeout)
	select {
	case <-finished:
	case <-hard.C:
		a.log.Warn("stopping: the server did not take every report in time; giving them up", "timeout", timeout)
		abandon()
		<-finished
	}
	hard.Stop()
	abandon() // ends the control long-poll
	if api := l.current(); api != nil {
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := api.Deregister(dctx); err != nil {
			a.log.Warn("could not deregister; the server marks the agent offline one lease TTL after it last heard from it", "err", err)
		}
		cancel()
	}
}

// concurrency is the effective cap on pipelines at once.
func (a *Agent) concurrency() int {
	if a.cfg.Concurrency > 0 {
		return a.cfg.Concurrency
	}
	return max(a.cfg.CPUs, 1)
}

// loop is the state of one Run.
type loop struct {
	*Agent
	api     *client.Client // without a token; each registration makes its own copy
	cap     *capacity
	running sync.WaitGroup
	runs    context.Context // ends when running pipelines must be killed
	reports context.Context // ends when unsent reports are given up

	mu      sync.Mutex
	session *session
	changed chan struct{} // a new session began
}

// session is the client and runner of one registration.
type session struct {
	api   *client.Client
	run   *runner.Runner
	token string
}

// current returns the API client of the current registration, nil before the first.
func (l *loop) current() *client.Client {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.session == nil {
		return nil
	}
	return l.session.api
}

// serve is the poll loop. It starts the control loop, which closes controlDone when it ends
// (with the reports context).
func (l *loop) serve(ctx context.Context, reg protocol.RegisterResponse, controlDone chan struct{}) error {
	l.changed = make(chan struct{}, 1)
	sess, err := l.newSession(reg)
	if err != nil {
		close(controlDone)
		return err
	}
	go func() {
		defer close(controlDone)
		// The tunnel lives beside the control long-poll, until the reports context ends too.
		var tunnel sync.WaitGroup
		tunnel.Go(l.holdTunnel)
		l.control(reg.HeartbeatInterval.Std())
		tunnel.Wait()
	}()
	a := l.Agent
	for {
		if !l.cap.waitFree(ctx) {
			return nil
		}
		req := l.cap.request()
		// Cache affinity: the server prefers this agent for pipelines of these repositories.
		if repos := a.caches.Repos(); len(repos) > 0 {
			req.Caches = repos[:min(len(repos), protocol.MaxPollCaches)]
		}
		// The server holds a poll for PollTimeout; allow for the network on top.
		pctx, cancel := context.WithTimeout(ctx, reg.PollTimeout.Std()+30*time.Second)
		lease, err := sess.api.Poll(pctx, req)
		cancel()
		switch {
		case ctx.Err() != nil:
			if lease != nil {
				// Leased while stopping: run it anyway rather than strand it until its TTL;
				// the stop kills it at once and reports agent_stopped.
				l.start(sess, lease)
			}
			return nil
		case errors.Is(err, client.ErrUnauthenticated):
			a.log.Warn("the server refused the agent token; registering again")
			if reg, err = a.registration(ctx, l.api, true); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			if sess, err = l.newSession(reg); err != nil {
				return err
			}
			continue
		case err != nil:
			// The client has already retried what can be retried; wait a little more so an
			// outage or a misconfiguration does not become a hot loop.
			a.log.Warn("poll failed", "err", err)
			if !pause(ctx, 5*time.Second) {
				return nil
			}
			continue
		case lease == nil:
			continue
		}
		l.start(sess, lease)
	}
}

// start runs a lease in its own goroutine, its capacity reserved until it ends.
func (l *loop) start(sess *session, lease *protocol.Lease) {
	a := l.Agent
	l.cap.take(lease)
	// gpu_devices are the ids of the GPUs handed to the lease (nvidia-smi's indexes), not a
	// count: "0" is the first GPU; a CPU lease has none and logs none.
	attrs := []any{"lease_id", lease.ID, "pipeline_id", lease.PipelineID, "cpus", lease.Plan.Runner.Cpus}
	if len(lease.GPUs) > 0 {
		attrs = append(attrs, "gpu_devices", strings.Join(lease.GPUs, ","))
	}
	a.log.Info("lease received", attrs...)
	l.running.Go(func() {
		defer l.cap.release(lease)
		res, err := sess.run.Run(l.runs, l.reports, lease)
		if err != nil {
			a.log.Warn("lease ended without a report", "lease_id", lease.ID, "err", err)
			return
		}
		a.log.Info("lease done", "lease_id", lease.ID, "status", res.Status)
	})
}

// control holds the control long-poll until the reports context ends, and stops the runs the
// server names. A poll in flight is started again when the set of runs changes, so a pipeline
// is covered from the moment it starts.
func (l *loop) control(heartbeat time.Duration) {
	// A failing poll waits 250 ms doubling to 5 s; an answer starts over.
	policy := backoff.Policy{Initial: 250 * time.Millisecond, Max: 5 * time.Second}
	var wait time.Duration
	for l.reports.Err() == nil {
		l.mu.Lock()
		sess := l.session
		l.mu.Unlock()
		cctx, cancel := context.WithTimeout(l.reports, heartbeat+30*time.Second)
		watch := make(chan struct{})
		go func() {
			select {
			case <-sess.run.Changed():
				cancel()
			case <-l.changed:
				cancel()
			case <-watch:
			}
		}()
		resp, err := sess.api.Control(cctx, protocol.ControlRequest{Running: sess.run.Unstopped()})
		restarted := cctx.Err() != nil && l.reports.Err() == nil
		close(watch)
		cancel()
		switch {
		case l.reports.Err() != nil:
			return
		case restarted:
			continue
		case errors.Is(err, client.ErrUnauthenticated):
			// The poll loop registers again; wait for its new session.
			pause(l.reports, time.Second)
			continue
		case err != nil:
			wait = policy.Next(wait)
			if !pause(l.reports, wait) {
				return
			}
			continue
		}
		wait = 0
		for _, st := range resp.Stop {
			if sess.run.Stop(st.LeaseID, st.Reason) {
				l.log.Info("stop requested by the server", "lease_id", st.LeaseID, "reason", st.Reason)
			}
		}
	}
}

// holdTunnel holds the agent's tunnel (agent/tunnel), the connection the server opens streams
// to this host on, with the current registration's token until the reports context ends. It
// serves the workspaces' streams (agent/workspace): terminals, ports, SSH.
func (l *loop) holdTunnel() {
	t, err := tunnel.New(tunnel.Config{ServerURL: l.cfg.ServerURL, Token: l.token,
		UserAgent: "nimbus-agent/" + l.cfg.Version, Log: l.log})
	if err != nil {
		l.log.Error("the agent holds no tunnel", "err", err)
		return
	}
	ws := workspace.New(workspace.Config{Runtime: l.workspaces, Log: l.log})
	defer ws.Close()
	for kind, h := range ws.Handlers() {
		t.Register(kind, h)
	}
	t.Run(l.reports)
}

// workspaces is the current registration's runner, as agent/workspace sees it.
func (l *loop) workspaces() workspace.Runtime {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.session == nil {
		return nil
	}
	return workspaceRuntime{l.session.run}
}

// workspaceRuntime adapts the runner's workspaces to agent/workspace.
type workspaceRuntime struct{ *runner.Runner }

func (w workspaceRuntime) Attach(leaseID string) (workspace.Target, func(), error) {
	c, release, err := w.Runner.Attach(leaseID)
	if err != nil {
		return nil, nil, err
	}
	if c == nil {
		release()
		return nil, nil, errors.New("this agent runs jobs as host processes: its workspaces have no container to enter")
	}
	return workspace.ContainerTarget(c), release, nil
}

// tools are the host executables every job step gets.
func (a *Agent) tools() []string {
	if a.cli == "" {
		return nil
	}
	return []string{a.cli}
}

// token is the agent token of the current registration.
func (l *loop) token() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.session == nil {
		return ""
	}
	return l.session.token
}

// newSession makes the client and runner of one registration and makes them current.
func (l *loop) newSession(reg protocol.RegisterResponse) (*session, error) {
	api := l.api.WithToken(reg.Token)
	image := l.cfg.DefaultImage
	if image == "" {
		image = DefaultImage
	}
	run, err := runner.New(runner.Config{
		API: api, Executor: l.exec, WorkDir: l.cfg.WorkDir, DefaultImage: image,
		HeartbeatInterval: reg.HeartbeatInterval.Std(), LogFlushInterval: reg.LogFlushInterval.Std(),
		Log:      l.log,
		Services: runner.ServiceConfig{Docker: l.docker},
		IDEImage: l.cfg.WorkspaceIDEImage,
		Caches:   runner.CacheConfig{Store: l.caches},
		Tools:    l.tools(),
	})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	sess := &session{api: api, run: run, token: reg.Token}
	l.mu.Lock()
	l.session = sess
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
	return sess, nil
}
