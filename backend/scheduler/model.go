// Package scheduler gets queued pipelines to agents quickly, fairly and exactly once.
//
//	build.Service ──Enqueue──► Intake ──► Queue (Redis: per-class, per-team lists; Lua dispatch)
//	                                        ▲ Dispatch
//	agent ──HTTP long-poll──► agentapi ──► Service.Poll ──build.Claim (conditional UPDATE)──► Lease
//	agent ──renew──► agentapi ──► Service.Renew ──► build.Renew, fenced by lease_id
//	build.OnEnded ──► Service.Ended: the team's slot and the locks freed
//	background (one replica at a time, by a Redis lock): Reap expired leases, Reconcile Redis
//	with the database, fire cron schedules, fail what cannot start
//
// The database is the truth and package build owns it: a pipeline is queued, running (under one
// lease) or finished, and every status move is build's conditional UPDATE … WHERE status = … AND
// lease_id = …, so a late, duplicate or fenced-off report never moves a pipeline backwards or
// lets two agents run it. The scheduler keeps the agents table, the Redis queues (only what the
// reconciler rebuilds from the database), and asks billing (its Meter) to freeze a pipeline's
// first window at the claim. README.md draws the flow.
//
// A queued pipeline always says why it waits (Explain): no online agent serves its class, no
// agent is big enough, its team is at its concurrency cap, or its place in the queue.
package scheduler

import "time"

// Agent is a registered agent.
type Agent struct {
	ID          string    `gorm:"primaryKey"`
	Name        string    `gorm:"not null"`
	TokenHash   string    `gorm:"not null"`
	Version     string    `gorm:"not null"`
	Tags        string    `gorm:"not null"` // space-separated
	Executor    string    `gorm:"not null"`
	CPUs        int       `gorm:"column:cpus;not null"`
	MemoryBytes int64     `gorm:"not null"`
	GPUs        string    `gorm:"column:gpus;not null"` // JSON of []protocol.GPU
	Host        string    `gorm:"not null"`             // JSON of protocol.HostFacts
	Concurrency int       `gorm:"not null"`
	FreeCPUs    int       `gorm:"column:free_cpus;not null"`
	FreeGPUs    int       `gorm:"column:free_gpus;not null"`
	LastSeenAt  time.Time `gorm:"not null"`
	// StoppedAt is when the agent deregistered (a graceful stop); it is offline until it is
	// seen again after that.
	StoppedAt *time.Time
	CreatedAt time.Time `gorm:"not null"`
	// OrgID is the team of a team runner (registered with a runner token of that team): it
	// serves only that team's pipelines. Nil for the platform's agents.
	OrgID *int64
	// PausedAt is when a team admin paused the runner: it takes no new pipelines until resumed.
	PausedAt *time.Time
	// WholeHost: a pipeline asking for more cores than CPUs runs alone on the agent, on all its
	// cores (protocol.RegisterRequest.WholeHost).
	WholeHost bool `gorm:"not null"`
}

// RegistrationToken is a platform registration token made on the admin Agents page; only its
// hash is kept.
type RegistrationToken struct {
	ID         int64     `gorm:"primaryKey"`
	Name       string    `gorm:"not null"`
	TokenHash  string    `gorm:"not null"`
	CreatedBy  int64     `gorm:"not null"`
	CreatedAt  time.Time `gorm:"not null"`
	LastUsedAt *time.Time
}

// RunnerToken is a team's registration token for its own runners; only its hash is kept.
type RunnerToken struct {
	ID         int64     `gorm:"primaryKey"`
	OrgID      int64     `gorm:"not null"`
	Name       string    `gorm:"not null"`
	TokenHash  string    `gorm:"not null"`
	CreatedBy  int64     `gorm:"not null"`
	CreatedAt  time.Time `gorm:"not null"`
	LastUsedAt *time.Time
}
