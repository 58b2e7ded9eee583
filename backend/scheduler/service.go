package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/clock"
)

// Config tunes the scheduler. Zero values take the defaults in NewService.
type Config struct {
	PublicURL         string
	RegistrationToken string        // agents present it to register
	LeaseTTL          time.Duration // 30 s
	// HeartbeatInterval is how often agents renew and how long a control long-poll is held. It
	// is always a third of LeaseTTL (a larger value is lowered to it), so two renewals can be
	// lost before a lease expires: a TTL shorter than the heartbeat would kill every long job.
	HeartbeatInterval time.Duration
	PollTimeout       time.Duration // 30 s: how long a long-poll waits for work
	LogFlushInterval  time.Duration // 1 s
	StarveAfter       time.Duration // 2 min: when a big pipeline that fits nowhere is reserved
	Depth             int           // 50: backfill depth in a team's queue
	// HandOver (1 s) is how long cold agents leave a pipeline that uses caches to a waiting
	// agent that holds them (queue.go, rule 5): the most a cache-bound pipeline can wait for
	// affinity while a cold agent is free. Negative turns cache affinity off.
	HandOver time.Duration
	// GPUSpillAfter (10 s) is how long a CPU pipeline is left to CPU agents before a GPU host
	// that serves its class may take it (agentRules). Negative: at once.
	GPUSpillAfter time.Duration
	// QueueTimeout is how long a pipeline may wait in the queue before it fails with the
	// reasons it waited for (24 h, as GitHub Actions; negative waits forever). A lock's waiters
	// keep their own lock.timeout.
	QueueTimeout time.Duration
	// TeamRunnerCNBTags are the cnb: tags team runners may serve (for their own team only);
	// none by default: a team runner serves the tags outside cnb: (teams.go).
	TeamRunnerCNBTags []string
	// TeamRunnerWait is how long a pipeline of a team tag waits while no runner of its team
	// serves the tag before it fails (24 h; negative waits forever).
	TeamRunnerWait time.Duration
	// Caps limits pipelines per team per class (class canonical tag → cap); 0 or absent = none.
	Caps map[string]int
	// Location is the time zone of cron schedules (UTC+8 when nil).
	Location *time.Location
	// WorkspaceEnv is what a workspace pipeline's lease adds to its built-in variables
	// (CNB_VSCODE_WEB_URL, CNB_VSCODE_PROXY_URI: package workspace); nil adds nothing.
	WorkspaceEnv func(org, repo string, pipelineID int64) map[string]string
}

// Secrets reads the secret values a repository's pipelines get in their lease (package repo's
// SecretValues, for a secret repository a team imports).
type Secrets interface {
	SecretValues(ctx context.Context, repoID int64) (map[string]string, error)
}

// Run is a pipeline as the meter sees it: who pays, on which class, for how many cores, and in
// which bucket (billing.Run, field for field; app.New adapts).
type Run struct {
	PipelineID int64
	OrgID      int64
	RepoID     int64
	Class      string
	Cores      int
	Workspace  bool
}

// Meter is what the scheduler asks of billing (app.New adapts package billing): whether a
// team's account can pay for a pipeline's first window — asked for the blockers and for queued
// pipelines no agent serves — and freezing that window when an agent claims the pipeline.
// An account that cannot pay answers *Refusal; any other error is a failure to ask.
//
// Settling an end and freezing the next windows of running pipelines are billing's own: its
// subscription to build's OnEnded hook and its leader tick (billing.Service.Run).
type Meter interface {
	CanStart(ctx context.Context, r Run) error
	Start(ctx context.Context, r Run, at time.Time) error
}

// Refusal is the meter's "this account cannot pay for it".
type Refusal struct {
	// Reason is the end reason of a pipeline refused for it: build.ReasonInsufficientBalance
	// or build.ReasonSpendingCap.
	Reason string
	// Detail says why for people ("the first 5-minute window costs …, the balance is …").
	Detail string
}

func (r *Refusal) Error() string {
	if r.Detail == "" {
		return r.Reason
	}
	return r.Reason + ": " + r.Detail
}

// refusal is err's *Refusal, or nil when err is nil or another failure.
func refusal(err error) *Refusal {
	var r *Refusal
	if errors.As(err, &r) {
		return r
	}
	return nil
}

// Service is the scheduler.
type Service struct {
	db      *gorm.DB // the agents table; build's tables are reached through builds
	in      *Intake
	queue   *Queue
	locks   *Locks
	builds  build.Lifecycle
	secrets Secrets
	meter   Meter
	clock   clock.Clock
	log     *slog.Logger
	cfg     Config
	// heardSince is when this replica last began to be able to hear renewals: its start, or the
	// end of a database outage the reaper saw. Reap counts lease time only after it (see Reap).
	heardSince atomic.Int64 // unix nanoseconds
}

// NewService returns the scheduler over the intake that the build service enqueues into. meter
// may be nil (tests): then nothing is billed.
func NewService(db *gorm.DB, in *Intake, builds build.Lifecycle, secrets Secrets, meter Meter, clk clock.Clock, log *slog.Logger, cfg Config) *Service {
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 30 * time.Second
	}
	if limit := cfg.LeaseTTL / 3; cfg.HeartbeatInterval <= 0 || cfg.HeartbeatInterval > limit {
		cfg.HeartbeatInterval = limit
	}
	if cfg.PollTimeout <= 0 {
		cfg.PollTimeout = 30 * time.Second
	}
	if cfg.LogFlushInterval <= 0 {
		cfg.LogFlushInterval = time.Second
	}
	if cfg.StarveAfter <= 0 {
		cfg.StarveAfter = 2 * time.Minute
	}
	if cfg.HandOver == 0 {
		cfg.HandOver = time.Second
	}
	if cfg.GPUSpillAfter == 0 {
		cfg.GPUSpillAfter = 10 * time.Second
	}
	if cfg.QueueTimeout == 0 {
		cfg.QueueTimeout = 24 * time.Hour
	}
	if cfg.TeamRunnerWait == 0 {
		cfg.TeamRunnerWait = 24 * time.Hour
	}
	if cfg.Depth <= 0 {
		cfg.Depth = 50
	}
	if cfg.Location == nil {
		cfg.Location = time.FixedZone("UTC+8", 8*3600)
	}
	s := &Service{db: db, in: in, queue: in.queue, locks: &Locks{rdb: in.rdb}, builds: builds, secrets: secrets, meter: meter, clock: clk, log: log, cfg: cfg}
	s.heardSince.Store(clk.Now().UnixNano())
	return s
}

// rules returns the dispatch rules of a class.
func (s *Service) rules(class string) Rules {
	return Rules{Depth: s.cfg.Depth, StarveAfter: s.cfg.StarveAfter, Cap: s.cfg.Caps[class], HandOver: max(s.cfg.HandOver, 0)}
}

// agentRules are the rules of a's dispatch from class: a GPU host takes a CPU class's pipeline
// (only when its operator names CPU tags, agent.DefaultTags) after CPU agents had
// GPUSpillAfter to take it, so that GPU hosts stay free for GPU work ("CPU steps never hold GPU
// time") and still help when no CPU agent can.
func (s *Service) agentRules(a *Agent, class string) Rules {
	r := s.rules(class)
	if a.gpuCount() > 0 && s.in.classes.gpusOf(class) == 0 && !a.isTeam() {
		r.MinAge = max(s.cfg.GPUSpillAfter, 0)
	}
	return r
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
