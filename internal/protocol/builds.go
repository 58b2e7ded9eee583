package protocol

// Builds that pipelines start: cnb:apply (a build of the pipeline's own repo, optionally from a
// .cnb.yml the task gives) and cnb:trigger (a build of another repo of this install, with a
// token that may start builds there). The agent runs both tasks and asks the server on the
// pipeline's behalf:
//
//	POST /api/v1/agent/leases/{lease}/builds         StartBuildRequest → 201 ChildBuild
//	POST /api/v1/agent/leases/{lease}/builds/status  ChildBuildRef → 200 ChildBuild
//
// The child links to the pipeline and build that started it, and they to it
// (backend/build/trigger.go: StartChild). With `sync` the agent asks for its status until it ends.

// Path suffixes after /api/v1/agent/leases/{lease}/.
const (
	PathBuildsSuffix      = "builds"
	PathBuildStatusSuffix = "builds/status"
)

// Kinds of StartBuildRequest.
const (
	StartApply   = "apply"
	StartTrigger = "trigger"
)

// StartBuildRequest asks for a build.
type StartBuildRequest struct {
	Kind string `json:"kind"`
	// Slug ("org/repo") and Token are cnb:trigger's: the repo and a token of someone who may start
	// builds there. cnb:apply builds the pipeline's own repo as the user it runs as.
	Slug   string            `json:"slug,omitempty"`
	Token  string            `json:"token,omitempty"`
	Event  string            `json:"event"`
	Branch string            `json:"branch,omitempty"`
	Env    map[string]string `json:"env,omitempty"`
	// Config is a .cnb.yml to plan instead of the branch's (cnb:apply's config / configFrom).
	Config string `json:"config,omitempty"`
}

// ChildBuildRef names a child build.
type ChildBuildRef struct {
	Slug   string `json:"slug"`
	Number int64  `json:"number"`
}

// ChildBuild is a child build and how it stands.
type ChildBuild struct {
	Slug   string `json:"slug"`
	Number int64  `json:"number"`
	URL    string `json:"url"` // its page in the dashboard
	Status string `json:"status"`
	// Finished: Status is final.
	Finished bool `json:"finished"`
	// LastJobExports are the exports of its job that finished last.
	LastJobExports map[string]string `json:"lastJobExports,omitempty"`
}

// Keys of cnb:resolve and cnb:await, scoped to the lease's build (backend/build/keys.go):
//
//	POST /api/v1/agent/leases/{lease}/keys/resolve  KeyRequest → 204; 409 "dead lock found." on a second resolve
//	POST /api/v1/agent/leases/{lease}/keys/await    KeyRequest → 200 KeyAnswer; 409 "dead lock found. …"
//
// The agent asks again (every AwaitPoll) while Resolved is false, until the task's timeout.
const (
	PathResolveSuffix = "keys/resolve"
	PathAwaitSuffix   = "keys/await"
)

// KeyRequest names a key, with the data of a resolve.
type KeyRequest struct {
	Key  string         `json:"key"`
	Data map[string]any `json:"data,omitempty"`
}

// KeyAnswer is an await's answer.
type KeyAnswer struct {
	Resolved bool           `json:"resolved"`
	Data     map[string]any `json:"data,omitempty"`
}
