package protocol

// Stage and job locks (`lock:` of a stage or a job, ../../shared/cnb-reference.md §2.6). The
// scheduler takes a pipeline's own lock before the lease exists; the agent takes the locks of
// stages and jobs when they start, through the server, which keeps every lock in Redis per
// repository (backend/scheduler/locks.go):
//
//	POST /api/v1/agent/leases/{lease}/locks          LockRequest → 200 LockResponse
//	POST /api/v1/agent/leases/{lease}/locks/release  LockRequest → 204
//
// A busy lock answers Acquired false and who holds it; the agent fails the stage or job at once,
// or with `wait` asks again every WaitPollInterval until `timeout`. The agent releases a lock
// when its stage or job ends; the server releases whatever a pipeline still holds when it ends.

// PathLocksSuffix and PathLocksReleaseSuffix follow /api/v1/agent/leases/{lease}/.
const (
	PathLocksSuffix        = "locks"
	PathLocksReleaseSuffix = "locks/release"
)

// LockRequest names a lock and who in the pipeline takes or releases it.
type LockRequest struct {
	// Key is the lock's key, variables substituted.
	Key string `json:"key"`
	// Scope says which stage or job of the pipeline holds it (`stage "build"`, `job "build/test"`):
	// a pipeline's stage and one of its jobs are different holders.
	Scope string `json:"scope"`
	// Expires is how long the hold lasts at most (an hour when 0).
	Expires Duration `json:"expires,omitempty"`
}

// LockResponse says whether the lock is held by the asker now, and otherwise by whom.
type LockResponse struct {
	Acquired bool   `json:"acquired"`
	Holder   string `json:"holder,omitempty"`
}
