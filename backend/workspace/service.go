// Package workspace is how people get into cloud workspaces (pipelines with services: vscode):
// the API that lists, shows, keeps alive, stops and restores them, the terminal and SSH
// WebSockets, and the preview proxy for the ports they listen on. Every byte to a workspace
// goes through the agent's tunnel (backend/tunnel) to agent/workspace on its host. README.md
// has the API; start there.
package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/tunnel"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Opener opens a stream to an agent over its tunnel (*tunnel.Hub); OpenBulk for a stream that
// may carry much (a preview), which may get a connection of its own.
type Opener interface {
	Open(ctx context.Context, agentID string, h tunnel.Header) (net.Conn, error)
	OpenBulk(ctx context.Context, agentID string, h tunnel.Header) (net.Conn, error)
}

// Runs is what workspaces need of build (build.Service): their pipelines, opened, read and
// stopped.
type Runs interface {
	// Workspace is gorm.ErrRecordNotFound when there is no such workspace pipeline.
	Workspace(ctx context.Context, id int64) (*build.WorkspaceRun, error)
	Workspaces(ctx context.Context, orgID int64, active bool) ([]build.WorkspaceRun, error)
	// OpenWorkspace fires the vscode event on a branch: a build whose workspace pipelines stay
	// up after their stages.
	OpenWorkspace(ctx context.Context, a *repo.Access, user *auth.User, branch string) (*build.Build, error)
	RequestStop(ctx context.Context, pipelineID int64, reason string) error
	Cancel(ctx context.Context, buildID int64, reason string) error
}

// Config is what a Service needs.
type Config struct {
	Repos  *repo.Service
	Orgs   *org.Service
	Builds Runs
	Tunnel Opener
	Meter  build.Meter // what pipelines cost so far (billing, adapted in app.New); nil: zero
	Links  Links
	// Users finds a user by id (auth.Service.UserByID): preview credentials name their user.
	Users func(ctx context.Context, id int64) (*auth.User, error)
	// Secret signs preview credentials (derived from NIMBUS_SECRET_KEY).
	Secret []byte
	Clock  clock.Clock
	Log    *slog.Logger
}

// Service answers for workspaces.
type Service struct {
	cfg Config

	mu     sync.Mutex
	access map[accessKey]checked // preview access checked (preview_http.go)
	used   map[string]time.Time  // one-time preview logins spent, until they expire
}

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, access: map[accessKey]checked{}, used: map[string]time.Time{}}
}

// record is a workspace pipeline with its build, repo and team, as build reads it.
type record struct{ build.WorkspaceRun }

// errNotFound is every workspace the caller may not see.
func errNotFound() error { return fault.NotFound("workspace not found") }

// load authorizes the caller for workspace id: write access to its repo. A workspace the
// caller cannot read is a 404, as one that does not exist.
func (s *Service) load(ctx context.Context, p *auth.Principal, id int64) (*record, error) {
	if p.Kind == auth.KindJob {
		return nil, fault.Forbidden("a pipeline's job token cannot enter workspaces")
	}
	run, err := s.cfg.Builds.Workspace(ctx, id)
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, errNotFound()
	}
	if err != nil {
		return nil, err
	}
	r := record{*run}
	if _, err := s.cfg.Repos.Resolve(ctx, p, r.OrgName, r.RepoName, repo.Write); err != nil {
		if fault.KindOf(err) == fault.KindNotFound {
			return nil, errNotFound()
		}
		return nil, err
	}
	return &r, nil
}

// View is a workspace as the API shows it.
type View struct {
	ID           int64      `json:"id"`
	Org          string     `json:"org"`
	Repo         string     `json:"repo"`
	Branch       string     `json:"branch"`
	BuildNumber  int64      `json:"build_number"`
	PipelineName string     `json:"pipeline_name"`
	Status       string     `json:"status"`
	State        string     `json:"state"`
	Reason       string     `json:"reason"`
	RunnerTag    string     `json:"runner_tag"`
	CPUs         int        `json:"cpus"`
	GPUs         int        `json:"gpus"`
	CreatedAt    time.Time  `json:"created_at"`
	StartedAt    *time.Time `json:"started_at"`
	ReadyAt      *time.Time `json:"ready_at"`
	FinishedAt   *time.Time `json:"finished_at"`
	CoreSeconds  int64      `json:"core_seconds"`
	Cost         string     `json:"cost"`
	// From the agent, while it runs and can be reached.
	Connections      *int       `json:"connections"`
	IdleTimeoutMs    *int64     `json:"idle_timeout_ms"`
	IdleDeadline     *time.Time `json:"idle_deadline"`
	LifetimeDeadline *time.Time `json:"lifetime_deadline"`
	IDE              *IDEView   `json:"ide"`
	// PreviewURLTemplate has {{port}} for the port (CNB_VSCODE_PROXY_URI).
	PreviewURLTemplate string      `json:"preview_url_template"`
	SavedWork          []SavedWork `json:"saved_work"`
}

// IDEView says what serves the IDE and where to open it.
type IDEView struct {
	Kind   string  `json:"kind"`
	Reason string  `json:"reason"`
	URL    *string `json:"url"`
}

// SavedWork is the uncommitted work a workspace of the branch saved when it stopped.
type SavedWork struct {
	Ref        string    `json:"ref"`
	PipelineID int64     `json:"pipeline_id"`
	SavedAt    time.Time `json:"saved_at"`
}

// ready says whether streams can be opened to the workspace.
func (r *record) ready() bool {
	return r.Status == build.StatusRunning && r.ReadyAt != nil && r.AgentID != "" && r.LeaseID != ""
}

// view assembles the View of records; live asks the agents of the ready ones.
func (s *Service) view(ctx context.Context, rs []record, live bool) ([]View, error) {
	now := s.cfg.Clock.Now().UTC()
	until := map[int64]time.Time{}
	for _, r := range rs {
		if r.StartedAt != nil {
			until[r.ID] = now
		}
	}
	usage := map[int64]build.Usage{}
	if s.cfg.Meter != nil && len(until) > 0 {
		var err error
		if usage, err = s.cfg.Meter.PipelineUsage(ctx, until); err != nil {
			return nil, err
		}
	}
	out := make([]View, len(rs))
	var wg sync.WaitGroup
	for i := range rs {
		r := &rs[i]
		p := build.Pipeline{Status: r.Status, Workspace: true, ReadyAt: r.ReadyAt, StartedAt: r.StartedAt}
		v := View{ID: r.ID, Org: r.OrgName, Repo: r.RepoName, Branch: r.Branch, BuildNumber: r.BuildNumber,
			PipelineName: r.Name, Status: r.Status, State: build.WorkspaceState(p), Reason: r.Reason,
			RunnerTag: r.RunnerTag, CPUs: r.CPUs, CreatedAt: r.CreatedAt, StartedAt: r.StartedAt, ReadyAt: r.ReadyAt,
			FinishedAt: r.FinishedAt, Cost: build.NoCost,
			PreviewURLTemplate: s.cfg.Links.PreviewTemplate(r.ID), SavedWork: []SavedWork{}}
		if r.Status == build.StatusRunning && r.Reason != "" {
			v.State = build.WorkspaceStopping
		}
		var plan protocol.Plan
		if json.Unmarshal([]byte(r.Plan), &plan) == nil && plan.Runner.GPU != "" {
			v.GPUs = 1
		}
		if u, ok := usage[r.ID]; ok {
			v.CoreSeconds, v.Cost = u.CoreSeconds, u.Cost
		}
		out[i] = v
		if live && r.ready() {
			wg.Go(func() {
				sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				defer cancel()
				if st, err := s.agentStatus(sctx, r, protocol.KindWorkspaceStatus); err == nil {
					s.applyStatus(&out[i], st, now)
				}
			})
		}
	}
	wg.Wait()
	return out, nil
}

func (s *Service) applyStatus(v *View, st protocol.WorkspaceStatus, now time.Time) {
	v.Connections, v.IdleTimeoutMs = &st.Connections, &st.IdleTimeoutMs
	if st.Connections == 0 {
		d := now.Add(time.Duration(st.IdleTimeoutMs-st.IdleForMs) * time.Millisecond)
		v.IdleDeadline = &d
	}
	if !st.Deadline.IsZero() {
		d := st.Deadline.UTC()
		v.LifetimeDeadline = &d
	}
	ide := &IDEView{Kind: st.IDE, Reason: st.IDEReason}
	if st.IDE != protocol.IDENone && st.IDE != "" {
		u := fmt.Sprintf("/api/v1/workspaces/%d/preview/%d", v.ID, protocol.IDEPort)
		ide.URL = &u
	}
	v.IDE = ide
}

// Get is one workspace, with what its agent says and the work saved on its branch.
func (s *Service) Get(ctx context.Context, p *auth.Principal, id int64) (*View, error) {
	r, err := s.load(ctx, p, id)
	if err != nil {
		return nil, err
	}
	vs, err := s.view(ctx, []record{*r}, true)
	if err != nil {
		return nil, err
	}
	v := vs[0]
	if v.SavedWork, err = s.savedWork(ctx, r); err != nil {
		s.cfg.Log.Warn("listing saved work failed", "workspace", r.ID, "err", err)
		v.SavedWork = []SavedWork{}
	}
	return &v, nil
}

// List is a team's workspaces in repos the caller may write to, newest first: the active
// ones, or all.
func (s *Service) List(ctx context.Context, p *auth.Principal, orgName string, all bool) ([]View, error) {
	if p.Kind == auth.KindJob {
		return nil, fault.Forbidden("a pipeline's job token cannot list workspaces")
	}
	// As every org route (org.Load): anonymous callers 401, non-members 404, then the scope.
	if !p.Authenticated() {
		return nil, fault.Unauthenticated("sign in or send a token")
	}
	o, role, err := s.cfg.Orgs.Access(ctx, p, orgName)
	if err != nil {
		return nil, err
	}
	if !role.IsMember() {
		return nil, fault.NotFound("team not found")
	}
	// The list shows what GET /workspaces/{id} shows, which needs repo:write.
	if err := p.Need(auth.ScopeRepoWrite); err != nil {
		return nil, err
	}
	if !role.CanWrite() {
		return []View{}, nil
	}
	runs, err := s.cfg.Builds.Workspaces(ctx, o.ID, !all)
	if err != nil {
		return nil, err
	}
	rs := make([]record, len(runs))
	for i := range runs {
		rs[i] = record{runs[i]}
	}
	return s.view(ctx, rs, true)
}

// Stop asks a running workspace to stop gracefully: its endStages run and its work is saved.
func (s *Service) Stop(ctx context.Context, p *auth.Principal, id int64) (*View, error) {
	r, err := s.load(ctx, p, id)
	if err != nil {
		return nil, err
	}
	if r.Status != build.StatusRunning && r.Status != build.StatusQueued {
		return nil, fault.Conflict("workspace %d has already ended (%s)", id, r.Status)
	}
	if r.Status == build.StatusQueued {
		// Not started: nothing to save; its build is cancelled (a workspace's build holds
		// the pipelines of one vscode event).
		if err := s.cfg.Builds.Cancel(ctx, r.BuildID, build.ReasonCancelled); err != nil {
			return nil, err
		}
	} else if err := s.cfg.Builds.RequestStop(ctx, id, ReasonUser); err != nil {
		return nil, err
	}
	return s.Get(ctx, p, id)
}

// ReasonUser is why a workspace the user stopped stopped.
const ReasonUser = "by the user"

// KeepAlive starts the workspace's idle countdown again.
func (s *Service) KeepAlive(ctx context.Context, p *auth.Principal, id int64) (*View, error) {
	r, err := s.load(ctx, p, id)
	if err != nil {
		return nil, err
	}
	if !r.ready() {
		return nil, fault.Conflict("workspace %d is not ready (%s)", id, r.Status)
	}
	if _, err := s.agentStatus(ctx, r, protocol.KindWorkspaceKeepAlive); err != nil {
		return nil, err
	}
	return s.Get(ctx, p, id)
}

// Restore applies a saved work of the workspace's branch to its tree.
func (s *Service) Restore(ctx context.Context, p *auth.Principal, id int64, ref string) (*protocol.WorkspaceRestore, error) {
	r, err := s.load(ctx, p, id)
	if err != nil {
		return nil, err
	}
	if !r.ready() {
		return nil, fault.Conflict("workspace %d is not ready (%s)", id, r.Status)
	}
	saved, err := s.savedWork(ctx, r)
	if err != nil {
		return nil, err
	}
	found := false
	for _, w := range saved {
		found = found || w.Ref == ref
	}
	if !found {
		return nil, fault.Invalid("ref", "%q is not a saved work of branch %s", ref, r.Branch)
	}
	conn, err := s.open(ctx, r, protocol.KindWorkspaceRestore, map[string]string{"ref": ref})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var out protocol.WorkspaceRestore
	if err := protocol.ReadTunnelLine(conn, &out); err != nil {
		return nil, fault.New(fault.KindUpstreamFailed, fault.CodeUnavailable, "the workspace's agent did not answer: %v", err)
	}
	if out.Error != "" {
		return nil, fault.Conflict("%s", out.Error)
	}
	return &out, nil
}

// savedWork lists refs/nimbus/workspaces/<branch>/* of the repo, newest first, without the
// workspace's own.
func (s *Service) savedWork(ctx context.Context, r *record) ([]SavedWork, error) {
	rp, _, err := s.cfg.Repos.ByID(ctx, r.RepoID)
	if err != nil {
		return nil, err
	}
	prefix := "refs/nimbus/workspaces/" + r.Branch + "/"
	cmd := exec.CommandContext(ctx, "git", "--git-dir", s.cfg.Repos.Path(rp), "for-each-ref",
		"--format=%(refname) %(committerdate:unix)", prefix)
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("workspace: list saved work: %w", err)
	}
	list := []SavedWork{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		ref, ts, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		pid, err := strconv.ParseInt(strings.TrimPrefix(ref, prefix), 10, 64)
		if err != nil || pid == r.ID {
			continue
		}
		sec, _ := strconv.ParseInt(ts, 10, 64)
		list = append(list, SavedWork{Ref: ref, PipelineID: pid, SavedAt: time.Unix(sec, 0).UTC()})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].PipelineID > list[j].PipelineID })
	return list, nil
}

// open opens a workspace stream to the record's agent and reads the workspace's reply line. A
// workspace its agent cannot be reached for is a 503, one it refuses a 409.
func (s *Service) open(ctx context.Context, r *record, kind string, fields map[string]string) (net.Conn, error) {
	if !r.ready() {
		return nil, fault.Conflict("workspace %d is not ready (%s)", r.ID, build.WorkspaceState(build.Pipeline{
			Status: r.Status, Workspace: true, ReadyAt: r.ReadyAt, StartedAt: r.StartedAt}))
	}
	f := map[string]string{"lease": r.LeaseID}
	for k, v := range fields {
		f[k] = v
	}
	open := s.cfg.Tunnel.Open
	if kind == protocol.KindWorkspacePort {
		open = s.cfg.Tunnel.OpenBulk
	}
	conn, err := open(ctx, r.AgentID, tunnel.Header{Kind: kind, Fields: f})
	if errors.Is(err, tunnel.ErrNoTunnel) {
		return nil, fault.Unavailable("the agent of workspace %d is not connected: try again in a moment", r.ID)
	}
	if err != nil {
		return nil, fault.Unavailable("the agent of workspace %d cannot be reached: %v", r.ID, err)
	}
	if d, ok := ctx.Deadline(); ok {
		conn.SetReadDeadline(d)
	} else {
		conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	}
	var reply protocol.TunnelReply
	if err := protocol.ReadTunnelLine(conn, &reply); err != nil {
		conn.Close()
		return nil, fault.Unavailable("the agent of workspace %d did not answer: %v", r.ID, err)
	}
	conn.SetReadDeadline(time.Time{})
	if !reply.Accepted {
		conn.Close()
		if reply.Code == protocol.TunnelPortClosed {
			return nil, &PortClosedError{Message: reply.Message}
		}
		return nil, fault.Conflict("workspace %d refused the connection (%s): %s", r.ID, reply.Code, reply.Message)
	}
	return conn, nil
}

// PortClosedError is a preview of a port nothing listens on.
type PortClosedError struct{ Message string }

func (e *PortClosedError) Error() string { return "nothing listens on that port: " + e.Message }

// agentStatus asks the agent for the workspace's status (or keeps it alive first).
func (s *Service) agentStatus(ctx context.Context, r *record, kind string) (protocol.WorkspaceStatus, error) {
	var st protocol.WorkspaceStatus
	conn, err := s.open(ctx, r, kind, nil)
	if err != nil {
		return st, err
	}
	defer conn.Close()
	if err := protocol.ReadTunnelLine(conn, &st); err != nil {
		return st, fault.Unavailable("the agent of workspace %d did not answer: %v", r.ID, err)
	}
	return st, nil
}
