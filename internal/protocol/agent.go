package protocol

import (
	"strings"
	"time"
)

// The agent API: how an agent and the server talk. Every call is HTTP with JSON bodies under
// /api/v1/agent, made by the agent; the server never calls an agent, so agents work from behind
// NAT and hold no Redis or database credentials. The server pops its Redis queues on the agent's
// behalf.
//
//	POST /api/v1/agent/register        Authorization: Bearer <registration token>
//	     RegisterRequest → RegisterResponse (the agent's own token and the intervals to use)
//	POST /api/v1/agent/poll            Authorization: Bearer <agent token>
//	     PollRequest → 200 Lease, or 204 when no work came within PollTimeout (a long-poll)
//	POST /api/v1/agent/leases/{id}/renew
//	     RenewRequest → RenewResponse (new expiry; Cancel when the pipeline must stop)
//	POST /api/v1/agent/leases/{id}/events
//	     Event → 204 (a job or stage started or finished; the pipeline started)
//	POST /api/v1/agent/leases/{id}/jobs/{job}/log?offset=N   (body: raw log bytes)
//	     → LogAck (the offset the server has stored)
//	POST /api/v1/agent/leases/{id}/finish
//	     FinishRequest → 204 (the pipeline's final status)
//	POST /api/v1/agent/control         ControlRequest → ControlResponse (a long-poll, see below)
//	POST /api/v1/agent/deregister      → 204 (the agent is stopping: it is offline at once)
//
// Order: register once (keep the token), then poll in a loop while there is free capacity. For
// each lease: renew every HeartbeatInterval until finished; report events as they happen; stream
// logs (a job's first output and output after a quiet spell at once, else batched every
// LogFlushInterval); finish once. Beside that, always hold one control long-poll: the server
// answers it the moment a running pipeline must stop (a cancel, or billing's termination), and
// otherwise after HeartbeatInterval; each call also tells the server the agent is alive, which is
// what "online" means (heard from within one LeaseTTL). A graceful stop deregisters.
//
// Caches: an agent keeps the docker.volumes caches of the pipelines it ran on its host, per
// repository (the plan's Builtins["CNB_REPO_ID"]), and lists those repositories in every poll
// (PollRequest.Caches). When a queued pipeline uses caches (a Plan.Volumes entry other than
// data) and an agent that holds its repository's is waiting in a poll with room for it, the
// server hands the pipeline to that agent rather than to a cold one; a cold agent is never kept
// from it for long on that account (the scheduler's README states the bound). The list is a
// hint, not a promise: a lease may still come for a repository whose caches the agent does not
// hold, and an agent that lists none is scheduled as before.
//
// Outages: while the server cannot be reached the agent keeps its jobs running and keeps every
// report (events in order, log bytes, the finish) until the server takes it, retrying with
// backoff; the server never counts time it was down against a lease (see scheduler.Reap).
//
// Fencing: every lease call carries the lease id. A lease the server no longer honours (expired
// and reaped, cancelled and settled, or re-queued) answers 409 with code "lease_lost": the agent
// stops that pipeline's containers at once and drops its remaining reports. Status moves on the
// server are conditional on the lease, so a late or duplicate report never moves a pipeline
// backwards.
//
// Retries and idempotency: register, poll and renew are safe to repeat. Events are idempotent per
// (job, kind). Log appends are idempotent by offset: the server keeps what it has and answers the
// offset it holds, and the agent resends from there, so retries neither lose nor double a byte.
// Finish is idempotent. The agent retries network errors and 5xx with backoff (a few seconds,
// capped), never 4xx other than 429.

// API paths.
const (
	PathRegister = "/api/v1/agent/register"
	// PathFacts is where a registered agent restates what it is (a RegisterRequest) each time
	// it starts: executor, cores, memory, GPUs, tags and version change with the host.
	PathFacts      = "/api/v1/agent/facts"
	PathPoll       = "/api/v1/agent/poll"
	PathControl    = "/api/v1/agent/control"
	PathDeregister = "/api/v1/agent/deregister"
	PathLeases     = "/api/v1/agent/leases/" // + {id}/renew, /events, /jobs/{job}/log, /finish
)

// ErrCodeLeaseLost is the error code of a 409 on a lease call: stop the work.
const ErrCodeLeaseLost = "lease_lost"

// GPU is one GPU of the agent's host.
type GPU struct {
	Index     int    `json:"index"`
	UUID      string `json:"uuid,omitempty"`
	Name      string `json:"name"`
	MemoryMiB int    `json:"memoryMiB"`
}

// HostFacts describe the agent's host for the reproducibility records of the pipelines it
// runs: what a result may depend on beyond the code and the image. Empty when unknown.
type HostFacts struct {
	OS       string `json:"os,omitempty"`       // runtime.GOOS/GOARCH
	Kernel   string `json:"kernel,omitempty"`   // /proc/sys/kernel/osrelease
	CPUModel string `json:"cpuModel,omitempty"` // /proc/cpuinfo "model name"
	// GPUDriver and CUDAVersion come from nvidia-smi ("simulated" for simulated GPUs).
	GPUDriver   string `json:"gpuDriver,omitempty"`
	CUDAVersion string `json:"cudaVersion,omitempty"`
	// Engine is the Docker engine's version ("" for the shell executor).
	Engine string `json:"engine,omitempty"`
}

// RegisterRequest announces an agent.
type RegisterRequest struct {
	Name        string    `json:"name"`
	Version     string    `json:"version"`
	Tags        []string  `json:"tags"`
	CPUs        int       `json:"cpus"`
	MemoryBytes int64     `json:"memoryBytes"`
	GPUs        []GPU     `json:"gpus,omitempty"`
	Concurrency int       `json:"concurrency"`
	Executor    string    `json:"executor"`
	Host        HostFacts `json:"host,omitzero"`
	// WholeHost: the agent takes a pipeline asking for more cores than CPUs when it runs
	// nothing else, and runs it alone on all its cores (the all-in-one's built-in agent, whose
	// laptop has fewer cores than the brief's examples ask for). CPUs stay what the host has.
	WholeHost bool `json:"wholeHost,omitempty"`
}

// FactsResponse answers PathFacts: the tags the server ignores, as RegisterResponse's.
type FactsResponse struct {
	IgnoredTags []string `json:"ignoredTags,omitempty"`
}

// RegisterResponse gives the agent its identity and the intervals it must use, so the fleet can be
// slowed down without a new agent release.
type RegisterResponse struct {
	AgentID           string   `json:"agentId"`
	Token             string   `json:"token"`
	HeartbeatInterval Duration `json:"heartbeatInterval"`
	PollTimeout       Duration `json:"pollTimeout"`
	LogFlushInterval  Duration `json:"logFlushInterval"`
	LeaseTTL          Duration `json:"leaseTtl"`
	// IgnoredTags are the agent's tags the server does not serve it with: cnb: tags of a team
	// runner that the operator does not let team runners serve.
	IgnoredTags []string `json:"ignoredTags,omitempty"`
}

// PollRequest asks for work that fits the agent's free capacity.
type PollRequest struct {
	FreeCPUs int      `json:"freeCpus"`
	FreeGPUs []string `json:"freeGpus,omitempty"` // device ids (index or UUID) not in use
	Running  []string `json:"running,omitempty"`  // lease ids the agent is working on
	// Caches are the repositories (CNB_REPO_ID values) whose docker.volumes caches this host
	// holds, for cache affinity (see Caches above). The server reads at most MaxPollCaches of
	// them and ignores any that is not a repository id.
	Caches []string `json:"caches,omitempty"`
}

// MaxPollCaches is how many entries of PollRequest.Caches the server reads; an agent holding
// more should list the ones it used most recently first.
const MaxPollCaches = 256

// JobRef names the server's id of one job of the plan, for events and logs.
type JobRef struct {
	Stage int   `json:"stage"` // index in Plan.Stages (failStages and endStages follow on)
	Job   int   `json:"job"`   // index in the stage's Jobs
	ID    int64 `json:"id"`
}

// Lease is a pipeline handed to an agent.
type Lease struct {
	ID         string    `json:"id"`
	PipelineID int64     `json:"pipelineId"`
	BuildID    int64     `json:"buildId"`
	ExpiresAt  time.Time `json:"expiresAt"`
	Plan       Plan      `json:"plan"`
	// CloneURL and Commit say what to check out into the checkout; JobToken (CNB_TOKEN)
	// authenticates the clone, registry pushes and artifact uploads while the pipeline runs.
	CloneURL string `json:"cloneUrl"`
	Commit   string `json:"commit"`
	JobToken string `json:"jobToken"`
	// Env holds the built-ins only known at run time (CNB_BUILD_ID, CNB_PIPELINE_ID, CNB_TOKEN…).
	Env map[string]string `json:"env,omitempty"`
	// Secrets reach jobs as variables and are masked in every log line.
	Secrets map[string]string `json:"secrets,omitempty"`
	Jobs    []JobRef          `json:"jobs"`
	// GPUs are the device ids reserved for this pipeline.
	GPUs []string `json:"gpus,omitempty"`
}

// ControlRequest holds the control long-poll. Running lists the leases the agent runs and has
// not been told to stop yet: only those can be answered.
type ControlRequest struct {
	Running []string `json:"running,omitempty"`
}

// ControlResponse lists what the agent must do now; empty when the poll timed out.
type ControlResponse struct {
	Stop []Stop `json:"stop,omitempty"`
}

// Stop tells the agent to stop a lease's pipeline: kill its containers and finish it.
type Stop struct {
	LeaseID string `json:"leaseId"`
	Reason  string `json:"reason"`
}

// RenewRequest extends a lease.
type RenewRequest struct{}

// RenewResponse says until when the lease holds, and whether to stop.
type RenewResponse struct {
	ExpiresAt time.Time `json:"expiresAt"`
	Cancel    bool      `json:"cancel,omitempty"`
	Reason    string    `json:"reason,omitempty"`
}

// Event kinds.
const (
	EventPipelineStarted = "pipeline_started"
	EventJobStarted      = "job_started"
	EventJobFinished     = "job_finished"
	// EventWorkspaceReady: a workspace pipeline's environment is up and may be entered (at once
	// after its preparation, or when its vscode:go task is reached).
	EventWorkspaceReady = "workspace_ready"
	// EventWaiting: the leased pipeline waits for a place to run (Reason says why, "" that it
	// no longer does): a Kubernetes pod Pending for capacity.
	EventWaiting = "waiting"
)

// MaxWaitReason bounds Event.Reason.
const (
	MaxWaitReason = 1000
)

// Bounds of a job's metrics (Event.Metrics), checked by the agent and again by the server.
const (
	MaxMetricsPerJob = 100
	MaxMetricName    = 100
)

// ValidMetricName says whether name may name a metric: 1 to MaxMetricName letters, digits and
// "_.-/".
func ValidMetricName(name string) bool {
	if name == "" || len(name) > MaxMetricName {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_.-/", r)) {
			return false
		}
	}
	return true
}

// Event is one step of a running pipeline. At is when it happened on the agent's clock; the
// server records it, bounded by its own clock (not before the pipeline started, not in the
// future), so a report that arrives late — the server was down — keeps the real time.
type Event struct {
	Kind     string            `json:"kind"`
	JobID    int64             `json:"jobId,omitempty"`
	Status   string            `json:"status,omitempty"` // for job_finished: success, failed, skipped, cancelled
	ExitCode *int              `json:"exitCode,omitempty"`
	Exports  map[string]string `json:"exports,omitempty"`
	// Metrics, on job_finished, are the numbers the job reported with
	// `##[set-output metric.<name>=<number>]` lines: the dashboard charts them across builds.
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Image, on job_finished, is the image the job's container ran, as the engine resolved it
	// (nil for built-in tasks and the shell executor).
	Image *ImageUse `json:"image,omitempty"`
	// Waited, on pipeline_started, says the pipeline waited for a place to run after its lease
	// (a Kubernetes pod Pending for capacity): its run time, and its bill, start at this event
	// rather than at the lease.
	Waited bool `json:"waited,omitempty"`
	// Reason, on waiting, is why the pipeline waits ("" = it no longer does), at most
	// MaxWaitReason bytes.
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// ImageUse is an image a job ran: the reference it was started from and the digest it had,
// the registry's manifest digest (repo@sha256:…) when the engine knows one, else the image's
// own id (sha256:…, for an image built or imported on the host).
type ImageUse struct {
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
}

// LogAck is the byte offset of a job's log that the server has stored.
type LogAck struct {
	Offset int64 `json:"offset"`
}

// FinishRequest is a pipeline's final status: success, failed or cancelled.
type FinishRequest struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// FinishedAt is when the pipeline ended on the agent's clock (bounded by the server's as
	// Event.At is): the end of the billed run time, even when the report comes late.
	FinishedAt time.Time `json:"finishedAt,omitzero"`
}
