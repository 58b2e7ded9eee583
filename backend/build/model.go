// Package build owns builds and their tree — build → pipelines → stages → jobs — from the trigger
// that creates them to the last status change: a git push (push, branch.create, commit.add,
// branch.delete, tag_push), a manual web_trigger/api_trigger from the API, a schedule the
// .cnb.yml declares (registered here on every push, fired by the scheduler), and a rerun; then
// the claim by an agent, job events, stage settling, the pipeline's end, cancel and the reaping
// of a lost agent's work. No other package writes these rows: the scheduler drives the lease
// path through the Lifecycle interface (lifecycle.go), and every move is one conditional UPDATE
// fenced by the pipeline's status and lease id. README.md draws the flow.
//
// A trigger reads .cnb.yml at the commit once per ref update, plans it with package spec for
// every event the update fires and stores one build per event with its pipelines queued. A file
// that does not parse becomes a failed build carrying the error's file, line and column — never
// a silent drop — and a push that matches no pipeline creates nothing.
package build

import (
	"time"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Statuses of builds, pipelines, stages and jobs.
const (
	StatusQueued     = "queued"
	StatusRunning    = "running"
	StatusSuccess    = "success"
	StatusFailed     = "failed"
	StatusCancelled  = "cancelled"
	StatusTerminated = "terminated"
	StatusSkipped    = "skipped"
)

// Reasons a pipeline ended, or stops, other than by its own jobs.
const (
	ReasonAgentLost           = "agent_lost"
	ReasonCancelled           = "cancelled"
	ReasonInsufficientBalance = "insufficient_balance"
	ReasonSpendingCap         = "spending_cap_reached"
	// ReasonLockWaitPrefix starts the reason of a queued pipeline that waits for its lock
	// (package scheduler); the build page asks the scheduler for its current holder.
	ReasonLockWaitPrefix = "waiting for lock "
	// ReasonFundsWaitPrefix starts the reason of a queued pipeline that its team's money could
	// not start when an agent took it (package scheduler): it waits on no queue until the
	// account can pay its first window, or the queue timeout.
	ReasonFundsWaitPrefix = "waiting for money: "
)

// Stage kinds: failStages run when the normal flow failed, endStages always (see the Plan).
const (
	StageFail = "fail"
	StageEnd  = "end"
)

// Build is one trigger of one repo at one commit.
type Build struct {
	ID            int64  `gorm:"primaryKey"`
	RepoID        int64  `gorm:"not null"`
	Number        int64  `gorm:"not null"`
	Event         string `gorm:"not null"`
	Branch        string `gorm:"not null"` // the branch, or "" for tag events
	Tag           string `gorm:"not null"`
	CommitSHA     string `gorm:"not null"`
	CommitMessage string `gorm:"not null"`
	TriggeredBy   *int64 // the user; nil when nobody (a schedule whose author left)
	Status        string `gorm:"not null"`
	ErrorMessage  string `gorm:"not null"`
	ErrorFile     string `gorm:"not null"`
	ErrorLine     int    `gorm:"not null"`
	ErrorColumn   int    `gorm:"not null"`
	// Diagnostics are the file's errors and warnings as JSON ([]Diagnostic), with their excerpts.
	Diagnostics string    `gorm:"not null"`
	CreatedAt   time.Time `gorm:"not null"`
	UpdatedAt   time.Time `gorm:"not null"`
	StartedAt   *time.Time
	FinishedAt  *time.Time
	// A build a pipeline started (cnb:apply, cnb:trigger) names that build and pipeline.
	ParentBuildID    *int64
	ParentPipelineID *int64
	// RerunOf is the build this one re-runs (Re-run, Re-run failed jobs, Re-run exactly).
	RerunOf *int64
	// PullNumber is the pull request of the repository a pull_request* event build is for.
	PullNumber *int64
	// PullHeadSHA is the request's source head when the build was planned ("" for other
	// builds): the merge gate counts a pull_request build's checks for that head only.
	PullHeadSHA string `gorm:"not null"`
	// Untrusted marks a build of a pull request's proposed code from a fork (PullEvent.Fork):
	// its lease has no repo secrets, its jobs read no secret files, and its docker.volumes
	// caches are its request's own, never the ones the repository's branches write.
	Untrusted bool `gorm:"not null"`
}

// Pipeline is the unit that is queued and leased: one agent runs all its stages on one node.
type Pipeline struct {
	ID         int64     `gorm:"primaryKey"`
	BuildID    int64     `gorm:"not null"`
	Position   int       `gorm:"not null"`
	Key        string    `gorm:"not null"`
	Name       string    `gorm:"not null"`
	Status     string    `gorm:"not null"`
	Reason     string    `gorm:"not null"`
	RunnerTag  string    `gorm:"not null"` // the class's canonical tag: the queue it waits in
	CPUs       int       `gorm:"not null"`
	Plan       string    `gorm:"not null"` // the protocol.Plan as JSON: the agent's contract
	OrgID      int64     `gorm:"not null"`
	RepoID     int64     `gorm:"not null"`
	CreatedAt  time.Time `gorm:"not null"`
	UpdatedAt  time.Time `gorm:"not null"`
	QueuedAt   *time.Time
	StartedAt  *time.Time // the backend's time of the lease: billing and durations start here
	FinishedAt *time.Time
	// The lease that holds a running pipeline (package scheduler). Every status move of a leased
	// pipeline is conditional on LeaseID.
	LeaseID        string `gorm:"not null"`
	AgentID        string `gorm:"not null"`
	LeaseExpiresAt *time.Time
	UserStarted    bool `gorm:"not null"` // user code may have run: an expired lease fails, not re-queues
	// WaitReason is why a leased pipeline has not started running yet, as its agent says (a
	// Kubernetes pod Pending for capacity); "" when it does not wait.
	WaitReason      string `gorm:"not null"`
	CancelRequested bool   `gorm:"not null"`
	JobTokenHash    string `gorm:"not null"`
	// Workspace pipelines (a cloud development environment) stay up after their stages;
	// ReadyAt is when the agent reported the environment ready to enter.
	Workspace bool `gorm:"not null"`
	ReadyAt   *time.Time
	// Host is the agent that leased it and its host's facts at the lease (JSON; "" before).
	Host string `gorm:"not null"`
	// SecretNames are the names of the repo secrets its lease handed the jobs (JSON list; the
	// values are never kept here).
	SecretNames string `gorm:"not null"`
}

// HostSnapshot is Pipeline.Host: the agent that leased the pipeline and its host's facts at the
// lease, kept on the pipeline since agents are upgraded and move.
type HostSnapshot struct {
	AgentID  string             `json:"agentId"`
	Name     string             `json:"name"`
	Version  string             `json:"version"`
	Executor string             `json:"executor"`
	GPUs     []protocol.GPU     `json:"gpus,omitempty"`
	Host     protocol.HostFacts `json:"host"`
}

// QueuedSince is when the pipeline entered the queue it waits in (its creation when the row
// predates queued_at): its place, which starvation rules count from.
func (p *Pipeline) QueuedSince() time.Time {
	if p.QueuedAt != nil {
		return *p.QueuedAt
	}
	return p.CreatedAt
}

// Stage is one stage of a pipeline.
type Stage struct {
	ID         int64  `gorm:"primaryKey"`
	PipelineID int64  `gorm:"not null"`
	Position   int    `gorm:"not null"`
	Name       string `gorm:"not null"`
	Parallel   bool   `gorm:"not null"`
	Kind       string `gorm:"not null"` // "" for stages, "fail" for failStages, "end" for endStages
	Status     string `gorm:"not null"`
	StartedAt  *time.Time
	FinishedAt *time.Time
}

// Job is one job of a stage: one container.
type Job struct {
	ID         int64  `gorm:"primaryKey"`
	StageID    int64  `gorm:"not null"`
	PipelineID int64  `gorm:"not null"`
	Position   int    `gorm:"not null"`
	Name       string `gorm:"not null"`
	Status     string `gorm:"not null"`
	ExitCode   *int
	StartedAt  *time.Time
	FinishedAt *time.Time
	Exports    string `gorm:"not null"` // the job's exports as JSON (masked by the agent); "" when none
	Type       string `gorm:"not null"` // a built-in task's type (cnb:await, …); "" for scripts and plugins
	// Image and ImageDigest are the image its container ran, as the agent reported it.
	Image       string `gorm:"not null"`
	ImageDigest string `gorm:"not null"`
}

// Schedule is a cron entry of a branch's .cnb.yml, registered on push. It runs as the user who
// last pushed a change to it.
type Schedule struct {
	ID          int64  `gorm:"primaryKey"`
	RepoID      int64  `gorm:"not null"`
	Branch      string `gorm:"not null"`
	Event       string `gorm:"not null"` // "schedule" or "crontab: …"
	Cron        string `gorm:"not null"`
	UserID      int64  `gorm:"not null"`
	LastFiredAt *time.Time
	CreatedAt   time.Time `gorm:"not null"`
	UpdatedAt   time.Time `gorm:"not null"`
}
