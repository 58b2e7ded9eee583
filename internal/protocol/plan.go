// Package protocol holds the wire types shared by the backend and the agent.
//
// The backend produces them and the agent consumes them, so they live under agent/ (which never
// imports backend/) and use only the standard library. Every type here round-trips through
// encoding/json unchanged; a field added here is a change to the agent contract.
package protocol

import (
	"encoding/json"
	"fmt"
	"time"
)

// PlanSet is what one trigger of one .cnb.yml produces: every pipeline to run, in declaration
// order. All pipelines of a set run concurrently, each on its own node. It is the JSON that
// `nimbus plan` prints.
type PlanSet struct {
	Pipelines []Plan `json:"pipelines"`
}

// Plan is one pipeline: the unit the scheduler queues and one agent leases and runs on one node.
//
// Variable substitution is done when the plan is made, with everything known then. Names, runner
// tags, ifModify patterns and lock keys are final: a variable that only exists at run time reads
// as empty there. The other substituted fields (env values, images, docker build and volumes,
// imports, settings, options, settingsFrom, optionsFrom) may refer to such a variable (one a job
// exports, one an imports file may define, a built-in only the node knows, like CNB_TOKEN, or
// any other name the plan does not define: a repo secret from the lease's Secrets, else empty):
// then the reference is kept as ${NAME}, literal dollars are kept escaped as `\$`, and the names
// are listed in RuntimeVars of the job (or of the plan, for its own fields). When RuntimeVars is
// not empty the agent passes each of those fields through ExpandVars before use; when it is
// empty they are final too.
type Plan struct {
	// Key is CNB_PIPELINE_KEY: "pipeline-<index>" over all pipelines of the set.
	Key string `json:"key"`
	// Name is the declared name, the object key in object form, or pipeline, pipeline-1, ….
	Name string `json:"name"`
	// Event is the value of CNB_EVENT: push, tag_push, crontab, schedule, web_trigger_x, ….
	Event string `json:"event"`
	// BranchKey is the top-level key whose declaration this pipeline comes from ("main", "dev/*", "$").
	BranchKey string `json:"branchKey"`
	// Ref is the branch or tag name the trigger was for.
	Ref string `json:"ref"`
	// Cron is the schedule that fires this pipeline, for crontab and schedule events.
	Cron string `json:"cron,omitempty"`
	// Workspace is true for cloud-IDE pipelines (the vscode event or a vscode service): they are
	// scheduled on dev nodes and billed to the workspace bucket.
	Workspace bool `json:"workspace,omitempty"`

	Runner   Runner       `json:"runner"`
	Image    *Image       `json:"image,omitempty"`
	Build    *DockerBuild `json:"build,omitempty"`
	Volumes  []Volume     `json:"volumes,omitempty"`
	Git      Git          `json:"git"`
	Services []Service    `json:"services,omitempty"`

	// Builtins are the read-only CNB_* variables of this pipeline; they win over Env and imports.
	Builtins map[string]string `json:"builtins,omitempty"`
	// Env is the pipeline-level env after substitution. Jobs carry their own effective env.
	Env     map[string]string   `json:"env,omitempty"`
	Imports []string            `json:"imports,omitempty"`
	Label   map[string][]string `json:"label,omitempty"`

	Stages     []Stage `json:"stages"`
	FailStages []Stage `json:"failStages,omitempty"`
	EndStages  []Stage `json:"endStages,omitempty"`

	Conditions   Conditions `json:"conditions,omitzero"`
	Retry        int        `json:"retry,omitempty"`
	AllowFailure bool       `json:"allowFailure,omitempty"`
	Lock         *Lock      `json:"lock,omitempty"`
	RuntimeVars  []string   `json:"runtimeVars,omitempty"`
}

// Runner is the resolved runner class of a pipeline.
type Runner struct {
	// Tags as declared (after substitution); cnb:arch:default when none were given.
	Tags []string `json:"tags"`
	// Cpus is the effective core count: what is allocated and billed. On a fixed-core class it is
	// the class's cores whatever was requested.
	Cpus int `json:"cpus"`
	// RequestedCpus is runner.cpus as written, 0 when absent.
	RequestedCpus int `json:"requestedCpus,omitempty"`
	// Class is the canonical tag of the runner class the tags resolved to.
	Class       string `json:"class"`
	MemoryGiB   int    `json:"memoryGiB"`
	GPU         string `json:"gpu,omitempty"`
	GPUMemoryGB int    `json:"gpuMemoryGB,omitempty"`
	// MaxDuration is the class's pipeline hard cap; jobs without a timeout may run until it.
	MaxDuration Duration `json:"maxDuration"`
	// NoOutputTimeout kills a job that prints nothing for this long; 0 means off.
	NoOutputTimeout Duration `json:"noOutputTimeout,omitempty"`
	Namespace       string   `json:"namespace,omitempty"`
	// Team says the tag names a team's own runner (a tag outside the cnb: namespace): only an
	// agent that team registered with the tag runs it, and the platform does not size it.
	Team bool `json:"team,omitempty"`
}

// Image is a container image with optional registry credentials.
type Image struct {
	Name     string `json:"name"`
	User     string `json:"user,omitempty"`
	Password string `json:"password,omitempty"`
}

// DockerBuild is docker.build: an environment image built from a Dockerfile before the stages.
type DockerBuild struct {
	Dockerfile               string            `json:"dockerfile"`
	Target                   string            `json:"target,omitempty"`
	By                       []string          `json:"by,omitempty"`
	VersionBy                []string          `json:"versionBy,omitempty"`
	BuildArgs                map[string]string `json:"buildArgs,omitempty"`
	IgnoreBuildArgsInVersion bool              `json:"ignoreBuildArgsInVersion,omitempty"`
	Sync                     bool              `json:"sync,omitempty"`
}

// Volume types, in their long spelling.
const (
	VolumeCopyOnWrite         = "copy-on-write"
	VolumeReadWrite           = "read-write"
	VolumeReadOnly            = "read-only"
	VolumeCopyOnWriteReadOnly = "copy-on-write-read-only"
	VolumeData                = "data"
)

// Volume is one docker.volumes entry.
type Volume struct {
	Group string `json:"group,omitempty"`
	Path  string `json:"path"`
	Type  string `json:"type"`
}

// Git says how the checkout is checked out.
type Git struct {
	Enable           bool `json:"enable"`
	Submodules       bool `json:"submodules"`
	SubmodulesRemote bool `json:"submodulesRemote,omitempty"`
	LFS              bool `json:"lfs"`
}

// Service is a sidecar of the pipeline: docker (docker-in-docker) or vscode (the cloud IDE).
type Service struct {
	Name    string         `json:"name"`
	Version string         `json:"version,omitempty"`
	Options map[string]any `json:"options,omitempty"`
}

// Stage is a step of a pipeline. Stages run in order; the jobs of a stage run in parallel when
// Parallel is true (object form in YAML) and in order otherwise (array form, or one job).
type Stage struct {
	Name       string     `json:"name"`
	Parallel   bool       `json:"parallel"`
	Jobs       []Job      `json:"jobs"`
	Conditions Conditions `json:"conditions,omitzero"`
	Retry      int        `json:"retry,omitempty"`
	Lock       *Lock      `json:"lock,omitempty"`
}

// Job kinds.
const (
	KindScript  = "script"
	KindPlugin  = "plugin"
	KindBuiltin = "builtin"
)

// Job is the smallest unit: one container.
type Job struct {
	// Key is unique within the stage (CNB_BUILD_JOB_KEY): the object key, or job-<index>.
	Key  string `json:"key"`
	Name string `json:"name"`
	// Kind is script, plugin or builtin.
	Kind string `json:"kind"`
	// Script is the shell script of a script job; an array in YAML is joined with " && ".
	Script string `json:"script,omitempty"`
	// Image runs a script job in this image instead of the pipeline's, or is the plugin image.
	Image        *Image         `json:"image,omitempty"`
	Settings     map[string]any `json:"settings,omitempty"`
	SettingsFrom []string       `json:"settingsFrom,omitempty"`
	Args         []string       `json:"args,omitempty"`
	Type         string         `json:"type,omitempty"`
	Options      map[string]any `json:"options,omitempty"`
	OptionsFrom  []string       `json:"optionsFrom,omitempty"`
	// Unsupported, when set, is why this installation cannot run the job; the agent fails the job
	// with exactly this message.
	Unsupported string `json:"unsupported,omitempty"`

	// Env is the job's effective user env (pipeline, then stage, then job). The agent layers it
	// over the imported variables and under the plan's Builtins. Plugin containers do not get it:
	// for them it only fed the substitution of settings.
	Env map[string]string `json:"env,omitempty"`
	// Imports are the env files of the pipeline, the stage and the job, in that order.
	Imports []string `json:"imports,omitempty"`
	// Exports maps a result key of this job to the variable it sets for the rest of the pipeline.
	Exports map[string]string `json:"exports,omitempty"`
	// Timeout is 0 when the job may run until the pipeline's MaxDuration.
	Timeout      Duration `json:"timeout,omitempty"`
	AllowFailure bool     `json:"allowFailure,omitempty"`
	Retry        int      `json:"retry,omitempty"`
	Lock         *Lock    `json:"lock,omitempty"`

	Conditions  Conditions `json:"conditions,omitzero"`
	RuntimeVars []string   `json:"runtimeVars,omitempty"`
}

// Conditions decide whether a pipeline, stage or job runs. The planner has already evaluated
// ifModify and ifNewBranch against the trigger:
//   - Skip set: do not run; Skip is the reason (it becomes the "skip" result for exports).
//   - otherwise, If set: run only when that shell script exits 0.
//   - otherwise: run.
//
// BreakIfModify and SkipIfModify are checked by the agent when the job starts.
type Conditions struct {
	Skip          string   `json:"skip,omitempty"`
	If            string   `json:"if,omitempty"`
	IfModify      []string `json:"ifModify,omitempty"`
	IfNewBranch   bool     `json:"ifNewBranch,omitempty"`
	BreakIfModify bool     `json:"breakIfModify,omitempty"`
	SkipIfModify  bool     `json:"skipIfModify,omitempty"`
}

// Lock serialises runs that share a key within a repository.
type Lock struct {
	Key              string   `json:"key"`
	Expires          Duration `json:"expires"`
	Timeout          Duration `json:"timeout"`
	Wait             bool     `json:"wait,omitempty"`
	CancelInProgress bool     `json:"cancelInProgress,omitempty"`
	CancelInWait     bool     `json:"cancelInWait,omitempty"`
}

// Duration is a time.Duration that reads and writes JSON as Go duration text ("1h30m0s"), so plans
// stay readable and survive a round trip exactly.
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string, or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err2 := json.Unmarshal(b, &n); err2 != nil {
			return fmt.Errorf("duration must be a string like \"1h30m\": %w", err)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// Std returns the duration as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }
