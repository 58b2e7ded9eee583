// Package agentapi is the agent API room: the routes under /api/v1/agent that agents (the
// platform's and teams' runners) call, and nothing else. It owns no tables and no rules of its
// own; it composes three small interfaces it defines here, each met by one domain package and
// wired in app.New:
//
//	agent ──HTTP──► agentapi ──Dispatch──► scheduler   register, poll (claim, lease), renew, control, locks
//	                         ──Runs──────► build       events, finish, child builds, imports, cnb:resolve/await
//	                         ──LogSink───► logs        log chunks by offset
//
// Repositories are build's business: a job's imports are read, and the repo a child build names
// is resolved, with the pipeline's own rights inside build, which already reads the repo for
// every build it starts.
//
// What follows a pipeline's end (the team's slot and locks, the bill) is not here: build's
// OnEnded hook starts it from the agent's finish and the reaper alike. Billing's freeze at claim
// is the scheduler's (its Meter), inside Poll.
//
// The routes decode with api.BindLenient: agents are upgraded apart from the server, so a field
// one side does not know yet is ignored rather than refused (a 4xx is never retried and would
// take the agent out of service). Trailing data and wrong types are refused as anywhere.
package agentapi

import (
	"context"
	"log/slog"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/scheduler"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Dispatch is the scheduler's side of an agent: who it is, the work it is leased, how long a
// lease lasts, what it must stop, and the locks its pipelines hold.
type Dispatch interface {
	AgentByToken(ctx context.Context, token string) (*scheduler.Agent, error)
	Register(ctx context.Context, registrationToken string, req protocol.RegisterRequest) (*protocol.RegisterResponse, error)
	UpdateFacts(ctx context.Context, a *scheduler.Agent, req protocol.RegisterRequest) ([]string, error)
	Poll(ctx context.Context, a *scheduler.Agent, req protocol.PollRequest, draining <-chan struct{}) (*protocol.Lease, error)
	Control(ctx context.Context, a *scheduler.Agent, req protocol.ControlRequest, draining <-chan struct{}) (*protocol.ControlResponse, error)
	Deregister(ctx context.Context, a *scheduler.Agent) error
	Renew(ctx context.Context, a *scheduler.Agent, leaseID string) (*protocol.RenewResponse, error)
	Lock(ctx context.Context, a *scheduler.Agent, leaseID string, req protocol.LockRequest) (protocol.LockResponse, error)
	Unlock(ctx context.Context, a *scheduler.Agent, leaseID string, req protocol.LockRequest) error
}

// Runs is build's side of a leased pipeline: every call is fenced by the agent's lease.
type Runs interface {
	Leased(ctx context.Context, agentID, leaseID string) (*build.Pipeline, error)
	RunInfo(ctx context.Context, p *build.Pipeline) (*build.RunInfo, error)
	Event(ctx context.Context, agentID, leaseID string, ev protocol.Event) error
	// Finish ends the pipeline; an end goes to build's OnEnded subscribers.
	Finish(ctx context.Context, agentID, leaseID string, req protocol.FinishRequest) (*build.Pipeline, bool, error)
	CheckJob(ctx context.Context, agentID, leaseID string, jobID int64) error
	StartChild(ctx context.Context, parent *build.Pipeline, rq build.ChildRequest) (*build.ChildState, error)
	Child(ctx context.Context, parent *build.Pipeline, slug string, number int64) (*build.ChildState, error)
	Resolve(ctx context.Context, p *build.Pipeline, key string, data map[string]any) error
	Await(ctx context.Context, p *build.Pipeline, key string) (map[string]any, bool, error)
	// ReadImport reads a file a job imports, with the pipeline's own rights.
	ReadImport(ctx context.Context, p *build.Pipeline, raw, kind, image string) (protocol.ImportFile, error)
}

// LogSink stores job logs by offset (package logs).
type LogSink interface {
	Append(ctx context.Context, jobID, offset int64, data []byte) (int64, error)
}

// Config is what the room is built from.
type Config struct {
	Dispatch Dispatch
	Runs     Runs
	// Logs may be nil (tests): log uploads are then refused as unavailable.
	Logs LogSink
	// PublicURL is the server's own URL, for the links to the builds pipelines start.
	PublicURL string
	// ResolveToken resolves the token a cnb:trigger task names (auth.Service.PrincipalForToken);
	// nil refuses every cnb:trigger.
	ResolveToken func(ctx context.Context, token string) (*auth.Principal, error)
	// Draining is the server's shutdown signal, which releases long-polls at once.
	Draining func() <-chan struct{}
	Log      *slog.Logger
}

// Handler serves the agent API.
type Handler struct {
	cfg Config
	log *slog.Logger
}

// NewHandler returns the agent API over cfg.
func NewHandler(cfg Config) *Handler {
	if cfg.Draining == nil {
		cfg.Draining = func() <-chan struct{} { return nil }
	}
	return &Handler{cfg: cfg, log: cfg.Log}
}
