package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// A workspace pipeline (Plan.Workspace: the vscode event, or services: vscode) is a pipeline
// that stays up after its stages: its cloud development environment. The runner's part:
//
//	prepare ─► dev environment up ─► ready (at once, or when vscode:go is reached)
//	        ─► stages (a failure before ready ends the workspace; after it, it stays)
//	        ─► hold: until the user stops it, it is idle for keepAliveTimeout (no open
//	           connection), its lifetime cap is near, or the server stops it
//	        ─► endStages ─► uncommitted work saved to the repo ─► finish (success, reason
//	           "stopped: <why>")
//
// A stop of a ready workspace is graceful: the hold ends, endStages run and the work is saved
// before the containers go. A second stop, or a stop that takes longer than workspaceStopGrace,
// kills it as any pipeline.

// Defaults of the vscode service (§2.4 of the reference).
const (
	DefaultKeepAlive   = 10 * time.Minute
	workspaceStopGrace = 2 * time.Minute
	// capMargin is how long before its lifetime cap a workspace starts stopping, so its
	// endStages and the save of its work fit.
	capMargin = time.Minute
)

// Reasons a workspace stops, as reported in the finish.
const (
	StopIdle     = "idle"
	StopCap      = "lifetime cap"
	StopByServer = "stopped"
)

// devEnv is the state of one workspace pipeline's environment.
type devEnv struct {
	keepAlive time.Duration
	gated     bool // the plan has a vscode:go task: ready waits for it

	mu        sync.Mutex
	isReady   bool
	readyAt   time.Time
	conns     int       // open connections (terminals, IDE, SSH, previews)
	last      time.Time // last activity
	stopWhy   string
	stopping  chan struct{} // closed by requestStop
	readyOnce sync.Once
	onReady   func() // reports the workspace_ready event
	// container is the long-lived container terminals and previews enter; nil with the shell
	// executor, which has none.
	container *executor.Container
	// ide is what serves the IDE port (protocol.IDE*), ideReason why there is none.
	ide, ideReason string
	// launch and onlyPreview are the vscode service's options (§2.4): a command that serves
	// protocol.IDEPort instead of the IDE.
	launch      string
	onlyPreview bool
	// sidecar is the IDE container beside the workspace's, when the agent runs one.
	sidecar *executor.Container
}

func newDevEnv(p *protocol.Plan, onReady func()) *devEnv {
	d := &devEnv{keepAlive: DefaultKeepAlive, stopping: make(chan struct{}), onReady: onReady}
	for _, s := range p.Services {
		if s.Name == "vscode" {
			if v, ok := s.Options["keepAliveTimeout"]; ok {
				if k, err := parseKeepAlive(v); err == nil && k > 0 {
					d.keepAlive = k
				}
			}
			if v, ok := s.Options["launch"].(string); ok {
				d.launch = strings.TrimSpace(v)
			}
			d.onlyPreview, _ = s.Options["onlyPreview"].(bool)
		}
	}
	for _, group := range [][]protocol.Stage{p.Stages, p.FailStages, p.EndStages} {
		for _, st := range group {
			for _, j := range st.Jobs {
				if j.Kind == protocol.KindBuiltin && j.Type == "vscode:go" {
					d.gated = true
				}
			}
		}
	}
	return d
}

// parseKeepAlive reads keepAliveTimeout: milliseconds as CNB has it (a number, or digits in a
// string), or a duration string such as "18h" or "30m" (seen in real files).
func parseKeepAlive(v any) (time.Duration, error) {
	switch t := v.(type) {
	case float64:
		return time.Duration(t) * time.Millisecond, nil
	case int:
		return time.Duration(t) * time.Millisecond, nil
	case string:
		s := strings.TrimSpace(t)
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Duration(n) * time.Millisecond, nil
		}
		return time.ParseDuration(s)
	}
	return 0, fmt.Errorf("keepAliveTimeout %v is neither milliseconds nor a duration", v)
}

// ready marks the environment ready (once) and reports it.
func (d *devEnv) ready() {
	d.readyOnce.Do(func() {
		d.mu.Lock()
		d.isReady, d.readyAt, d.last = true, time.Now(), time.Now()
		d.mu.Unlock()
		if d.onReady != nil {
			d.onReady()
		}
	})
}

func (d *devEnv) readyYet() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.isReady
}

// attach counts an open connection until the returned func is called.
func (d *devEnv) attach() func() {
	d.mu.Lock()
	d.conns++
	d.last = time.Now()
	d.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			d.mu.Lock()
			d.conns--
			d.last = time.Now()
			d.mu.Unlock()
		})
	}
}

// touch records activity (keep-alive from the dashboard).
func (d *devEnv) touch() {
	d.mu.Lock()
	d.last = time.Now()
	d.mu.Unlock()
}

// requestStop ends the hold with a reason; it reports whether this was the first request.
func (d *devEnv) requestStop(why string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopWhy != "" {
		return false
	}
	d.stopWhy = why
	close(d.stopping)
	return true
}

// idleFor is how long nothing has been connected, 0 while something is.
func (d *devEnv) idleFor(now time.Time) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conns > 0 {
		return 0
	}
	return now.Sub(d.last)
}

// hold keeps the workspace up until it is stopped, idle or near its cap, and says why it ended.
// deadline is the run's lifetime cap (zero: none).
func (d *devEnv) hold(ctx context.Context, deadline time.Time) string {
	tick := time.NewTicker(min(time.Second, d.keepAlive/4+time.Millisecond))
	defer tick.Stop()
	var capTimer <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline) - min(capMargin, time.Until(deadline)/10))
		defer t.Stop()
		capTimer = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return StopByServer
		case <-d.stopping:
			d.mu.Lock()
			defer d.mu.Unlock()
			return d.stopWhy
		case <-capTimer:
			return StopCap
		case now := <-tick.C:
			if d.idleFor(now) >= d.keepAlive {
				return StopIdle
			}
		}
	}
}

// vscodeGo is the built-in task vscode:go: the workspace is ready from here on.
func (x *run) vscodeGo(ctx context.Context, job protocol.Job, env map[string]string, jl *jobLog) jobResult {
	if x.dev == nil {
		jl.note("vscode:go: this pipeline is not a workspace; nothing to do")
		return jobResult{status: StatusSuccess}
	}
	x.dev.ready()
	jl.note("vscode:go: the workspace is ready")
	code := 0
	return jobResult{status: StatusSuccess, code: &code}
}

// ErrNoWorkspace means a lease is not a running workspace (or not ready yet).
var ErrNoWorkspace = errors.New("runner: no ready workspace for this lease")

// Attach counts a connection to the workspace of a lease (a terminal, the IDE, SSH, a preview)
// for idle recycling, until the returned release is called. The container is where the
// connection goes (nil with the shell executor).
func (r *Runner) Attach(leaseID string) (*executor.Container, func(), error) {
	r.mu.Lock()
	x := r.runs[leaseID]
	r.mu.Unlock()
	if x == nil || x.dev == nil || !x.dev.readyYet() {
		return nil, nil, ErrNoWorkspace
	}
	return x.dev.container, x.dev.attach(), nil
}

// containerStarter is an executor that can keep a container up (the Docker executor).
type containerStarter interface {
	StartContainer(ctx context.Context, s executor.Step) (*executor.Container, error)
}

// startDevEnv starts the workspace's long-lived container: the pipeline's image with its
// checkout, mounts and limits, which terminals and previews enter. It returns what stops it.
func (x *run) startDevEnv(ctx context.Context) (func(), error) {
	cs, ok := x.cfg.Executor.(containerStarter)
	if !ok {
		return func() {}, nil
	}
	env := x.jobEnv(protocol.Stage{}, x.planJob(), nil, nil)
	image, auth := x.envImage(env)
	c, err := cs.StartContainer(ctx, x.step("workspace", image, auth, env))
	if errors.Is(err, executor.ErrNeedsDocker) {
		x.setupLog().note("workspace: terminals and previews need the Docker executor; this agent runs jobs as host processes")
		return func() {}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("workspace: start the environment: %w", err)
	}
	x.dev.container = c
	x.startIDE(ctx, c, env)
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if x.dev.sidecar != nil {
			if err := x.dev.sidecar.Stop(sctx); err != nil {
				x.log.Warn("removing the workspace's IDE container failed; the agent's next start removes it", "err", err)
			}
		}
		if err := c.Stop(sctx); err != nil {
			x.log.Warn("removing the workspace's container failed; the agent's next start removes it", "err", err)
		}
	}, nil
}

// startIDE starts what serves the IDE port: the vscode service's launch command when it has
// one (onlyPreview's preview service), else the image's code-server. It runs for the life of
// the container; what it prints goes to the preparation log. Nothing there is an error: the
// terminal is always the way in, and the status says why there is no IDE.
func (x *run) startIDE(ctx context.Context, c *executor.Container, env map[string]string) {
	d := x.dev
	var cmd []string
	switch {
	case d.launch != "":
		d.ide, cmd = protocol.IDELaunch, []string{"/bin/sh", "-c", d.launch}
	case d.onlyPreview:
		d.ide, d.ideReason = protocol.IDENone, "onlyPreview without launch: nothing serves the preview port"
		return
	default:
		probe, err := c.Exec(ctx, executor.ExecSpec{Cmd: []string{"/bin/sh", "-c", "command -v code-server"}})
		code := -1
		if err == nil {
			probe.CloseWrite()
			io.Copy(io.Discard, probe)
			code, _ = probe.Wait(ctx)
			probe.Close()
		}
		if code != 0 {
			x.startSidecarIDE(ctx, c, env)
			return
		}
		d.ide = protocol.IDECodeServer
		cmd = x.ideCommand()
	}
	proc, err := c.Exec(context.WithoutCancel(ctx), executor.ExecSpec{Cmd: cmd, Env: env})
	if err != nil {
		d.ide, d.ideReason = protocol.IDENone, "starting the IDE failed: "+err.Error()
		x.setupLog().note("workspace: " + d.ideReason)
		return
	}
	x.setupLog().note(fmt.Sprintf("workspace: %s serves port %d: %s", d.ide, protocol.IDEPort, strings.Join(cmd, " ")))
	go func() {
		proc.CloseWrite()
		io.Copy(io.Discard, proc)
		proc.Close()
	}()
}

// ideCommand is code-server on the IDE port, without auth (the preview proxy is the gate).
func (x *run) ideCommand() []string {
	return []string{"code-server", "--bind-addr", "127.0.0.1:" + strconv.Itoa(protocol.IDEPort), "--auth", "none",
		"--disable-telemetry", "--disable-update-check", x.mount}
}

// startSidecarIDE runs the agent's IDE image beside the workspace's container, as CNB does for
// images without code-server: the same checkout mount, the workspace container's network (so
// the IDE port is the workspace's), the pipeline's limits. It ends with the workspace.
func (x *run) startSidecarIDE(ctx context.Context, c *executor.Container, env map[string]string) {
	d := x.dev
	if x.cfg.IDEImage == "" {
		d.ide, d.ideReason = protocol.IDENone, "the image has no code-server and this agent has no IDE image (--workspace-ide-image): use the terminal, or an image with code-server on its PATH"
		return
	}
	cs, ok := x.cfg.Executor.(containerStarter)
	if !ok {
		d.ide, d.ideReason = protocol.IDENone, "the IDE container needs the Docker executor"
		return
	}
	st := x.step("workspace-ide", x.cfg.IDEImage, nil, env)
	st.Script = strings.Join(x.ideCommand(), " ")
	st.NetworkOf = c.ID
	st.Mounts = nil // the docker socket and caches stay the workspace's; the IDE gets the tree
	ide, err := cs.StartContainer(ctx, st)
	if err != nil {
		d.ide, d.ideReason = protocol.IDENone, "starting the IDE container failed: "+err.Error()
		x.setupLog().note("workspace: " + d.ideReason)
		return
	}
	d.ide, d.sidecar = protocol.IDESidecar, ide
	x.setupLog().note(fmt.Sprintf("workspace: the IDE container (%s) serves port %d", x.cfg.IDEImage, protocol.IDEPort))
}

// KeepAlive records activity in a lease's workspace (the dashboard's "keep alive").
func (r *Runner) KeepAlive(leaseID string) error {
	r.mu.Lock()
	x := r.runs[leaseID]
	r.mu.Unlock()
	if x == nil || x.dev == nil {
		return ErrNoWorkspace
	}
	x.dev.touch()
	return nil
}

// Status is what a lease's workspace is doing now: its connections, how long it has been
// idle, its cap and its IDE.
func (r *Runner) Status(leaseID string) (protocol.WorkspaceStatus, error) {
	r.mu.Lock()
	x := r.runs[leaseID]
	r.mu.Unlock()
	if x == nil || x.dev == nil {
		return protocol.WorkspaceStatus{}, ErrNoWorkspace
	}
	d := x.dev
	idle := d.idleFor(time.Now())
	d.mu.Lock()
	defer d.mu.Unlock()
	st := protocol.WorkspaceStatus{Connections: d.conns, IdleForMs: idle.Milliseconds(),
		IdleTimeoutMs: d.keepAlive.Milliseconds(), Deadline: x.deadline, IDE: d.ide, IDEReason: d.ideReason}
	if st.IDE == "" {
		st.IDE, st.IDEReason = protocol.IDENone, "the workspace runs without a container (shell executor)"
	}
	return st, nil
}

// Restore applies a saved work (saveWork's ref, of this workspace's repo) to the workspace's
// tree: what that commit changed against its parent, left uncommitted. It returns the files
// the saved work touched; a change that does not apply (the tree has moved on) changes nothing.
func (r *Runner) Restore(ctx context.Context, leaseID, ref string) ([]string, error) {
	r.mu.Lock()
	x := r.runs[leaseID]
	r.mu.Unlock()
	if x == nil || x.dev == nil || !x.dev.readyYet() {
		return nil, ErrNoWorkspace
	}
	if !strings.HasPrefix(ref, "refs/nimbus/workspaces/") || strings.Contains(ref, "..") {
		return nil, fmt.Errorf("restore: %q is not a saved work", ref)
	}
	u, err := url.Parse(x.lease.CloneURL)
	if err != nil || x.lease.CloneURL == "" || !x.lease.Plan.Git.Enable {
		return nil, errors.New("restore: this workspace has no clone of its repo")
	}
	env := x.gitEnv(u)
	if err := x.gitRetrying(ctx, env, "fetch", "--quiet", "--no-tags", "origin", ref); err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	saved, err := x.gitOutput(ctx, env, "rev-parse", "FETCH_HEAD")
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	saved = strings.TrimSpace(saved)
	names, err := x.gitOutput(ctx, env, "diff", "--name-only", saved+"^", saved)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	patch := filepath.Join(x.cfg.WorkDir, CheckoutsDir, x.lease.ID+".restore.patch")
	defer os.Remove(patch)
	diff, err := x.gitOutput(ctx, env, "diff", "--binary", "--full-index", saved+"^", saved)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	if err := os.WriteFile(patch, []byte(diff), 0o600); err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	if err := x.git(ctx, env, "apply", "--binary", patch); err != nil {
		return nil, fmt.Errorf("restore: the saved work does not apply to this tree: %w", err)
	}
	x.dev.touch()
	return strings.Fields(names), nil
}

// saveWork keeps what the user changed in the workspace and did not push: a commit of the whole
// tree as it is (tracked changes and untracked files not ignored), on top of the checked-out
// commit, pushed to refs/nimbus/workspaces/<branch>/<pipeline id> of the repo. A temporary
// index is used, so the user's own index and branch are left as they were. Nothing is pushed
// when the tree is the checked-out commit's. It reports the ref, or "" when nothing was saved.
func (x *run) saveWork(ctx context.Context) (string, error) {
	p := &x.lease.Plan
	if !p.Git.Enable || x.lease.CloneURL == "" {
		return "", nil
	}
	u, err := url.Parse(x.lease.CloneURL)
	if err != nil {
		return "", fmt.Errorf("save work: %w", err)
	}
	index := filepath.Join(x.cfg.WorkDir, CheckoutsDir, x.lease.ID+".save-index")
	defer os.Remove(index)
	env := append(x.gitEnv(u), "GIT_INDEX_FILE="+index,
		"GIT_AUTHOR_NAME=Nimbus workspace", "GIT_AUTHOR_EMAIL=workspace@nimbus.invalid",
		"GIT_COMMITTER_NAME=Nimbus workspace", "GIT_COMMITTER_EMAIL=workspace@nimbus.invalid")
	if err := x.git(ctx, env, "add", "--all", "--", "."); err != nil {
		return "", fmt.Errorf("save work: %w", err)
	}
	tree, err := x.gitOutput(ctx, env, "write-tree")
	if err != nil {
		return "", fmt.Errorf("save work: %w", err)
	}
	head, err := x.gitOutput(ctx, env, "rev-parse", "HEAD^{tree}")
	if err == nil && strings.TrimSpace(head) == strings.TrimSpace(tree) {
		return "", nil // nothing changed
	}
	commit, err := x.gitOutput(ctx, env, "commit-tree", strings.TrimSpace(tree), "-p", "HEAD",
		"-m", "Work saved from workspace "+x.lease.ID+" when it stopped")
	if err != nil {
		return "", fmt.Errorf("save work: %w", err)
	}
	ref := "refs/nimbus/workspaces/" + p.Ref + "/" + strconv.FormatInt(x.lease.PipelineID, 10)
	if err := x.gitRetrying(ctx, env, "push", "--quiet", "--force", "origin", strings.TrimSpace(commit)+":"+ref); err != nil {
		return "", fmt.Errorf("save work: %w", err)
	}
	return ref, nil
}

// StopWorkspaces stops every ready workspace gracefully (the agent is shutting down): each
// runs its endStages and saves its work. done is closed when all of them have ended.
func (r *Runner) StopWorkspaces(why string) (n int, done <-chan struct{}) {
	r.mu.Lock()
	var ids []string
	for id, x := range r.runs {
		if x.dev != nil && x.dev.readyYet() && x.dev.requestStop(StopByServer+": "+why) {
			x.softStopped.Store(true)
			x.signal()
			ids = append(ids, id)
		}
	}
	r.mu.Unlock()
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for {
			r.mu.Lock()
			left := 0
			for _, id := range ids {
				if r.runs[id] != nil {
					left++
				}
			}
			r.mu.Unlock()
			if left == 0 {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return len(ids), ch
}
