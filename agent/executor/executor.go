// Package executor runs one job step of a pipeline: a script or a plugin image, with its env and
// the pipeline's checkout, streaming its output, until it exits or its context is cancelled.
//
// Two executors share the Executor interface:
//   - Docker: every step in its own container, the checkout bind-mounted at the same path in
//     each, CPU/memory limits, GPUs by device id, containers labelled with the agent id so a
//     restarted agent can remove what a crashed run left behind;
//   - Shell: the step as a host process group, for the all-in-one mode on a machine without
//     Docker. It ignores images and isolates nothing, which is why choosing it logs a loud warning.
//
// Cancellation is the context: when it ends, the step is killed (SIGKILL to the container or the
// process group) and Run returns the context's error.
//
// The agent's death ends the steps too, when the executor has Lifelines (internal/lifeline, whose
// doc says why it is built so): a step's main process runs under the nimbus CLI's `lifeline`
// command (the container's entrypoint, docker-init still PID 1, the binary at InitPath and the
// FIFO at LifelinePath; on the host in front of `sh -c`), which kills it and its process group
// when the agent's end of the lifeline closes, as the kernel closes it when the agent dies in
// any way. The container then stops, within about a second, and stays until the agent's next
// start removes it (Cleanup); it costs no extra engine call to start (the image is inspected
// only for a step that runs the image's own command, for which PATH was mostly looked up
// already). Without Lifelines (no usable nimbus CLI) a crashed agent's containers run until it
// is started again. A host process that leaves its process group (setsid, a daemon) escapes the
// shell executor's lifeline, as it escapes a cancel; in a container nothing escapes.
//
// This package is for the agent only; the backend never runs user code.
package executor

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"time"
)

// Modes accepted by Detect.
const (
	ModeAuto   = "auto"
	ModeDocker = "docker"
	ModeShell  = "shell"
)

// ModeKubernetes runs pipelines as pods on a Kubernetes cluster (package kubernetes, which
// nimbus-agent gives the agent through agent.Config.Executors); Detect never chooses it.
const ModeKubernetes = "kubernetes"

// LabelAgent marks every container an agent creates with the agent's id.
const LabelAgent = "nimbus.agent"

// Step is one unit of user work: a job's container or process.
type Step struct {
	Name string
	// Image to run (Docker only). Script steps need a shell in it.
	Image string
	// Script is run by `sh -c`. When empty, the image's entrypoint runs with Args (plugin jobs).
	Script string
	Args   []string
	Env    map[string]string
	// Checkout is the pipeline's checkout: the host directory its repository is cloned into
	// and that all its steps share (users know it as CNB_BUILD_WORKSPACE). Docker mounts it at
	// CheckoutMount ("/workspace" when empty) and starts there; the shell executor starts in it.
	Checkout      string
	CheckoutMount string
	// Limits (Docker only): cores may be fractional on a shared host, memory in bytes; 0 = none.
	CPUs        float64
	MemoryBytes int64
	// GPUs are device ids (index or UUID) reserved for this pipeline; never "all".
	GPUs []string
	// Labels added to the container, on top of the agent label.
	Labels map[string]string
	// Output receives stdout and stderr, interleaved as the step writes them.
	Output io.Writer
	// Stderr, when set, receives stderr instead of Output, so a caller can tell the streams
	// apart (the stdout and stderr results a job may export). It may be written concurrently
	// with Output.
	Stderr io.Writer
	// ImageAuth logs in to the image's registry when the image must be pulled (Docker only).
	ImageAuth *ImageAuth
	// Mounts are added to the checkout's mount (Docker only): the pipeline's docker service
	// socket and CLI, its cache volumes.
	Mounts []Mount
	// PathAppend is added to the end of the image's PATH (Docker only), so a tool the agent
	// mounts (the docker CLI) is found, and the image's own copy of it wins.
	PathAppend []string
	// Tools are statically linked executables of the agent's host the step calls by their base
	// name (the nimbus CLI): Docker mounts them read-only into ToolDir and puts it at the end of
	// the image's PATH (an image's own copy wins); the shell executor puts their directories at
	// the end of the agent's PATH.
	Tools []string
	// ImageSeen, when set, hears which image the step's container runs, by digest (Docker
	// only; see Docker.imageDigest): the reproducibility record's images.
	ImageSeen func(ref, digest string)
	// NetworkOf, a container's id, runs the step in that container's network namespace (Docker
	// only): a workspace's IDE container serves a port the workspace's own can reach, and the
	// agent dials it as the workspace's.
	NetworkOf string
}

// ToolDir holds the Tools in a step's container.
const ToolDir = "/.nimbus/bin"

// Mount kinds.
const (
	MountBind   = "bind"   // Source is a host path
	MountVolume = "volume" // Source is a named engine volume, created on first use and seeded from the image's content at Target
)

// Mount is one extra mount of a step's container.
type Mount struct {
	Kind     string // MountBind ("" too) or MountVolume
	Source   string
	Target   string
	ReadOnly bool
}

// ImageAuth is a registry user and password.
type ImageAuth struct {
	User, Password string
}

// Executor runs steps.
type Executor interface {
	// Name is "docker" or "shell".
	Name() string
	// Run runs the step to completion and returns its exit code. A non-nil error means the step
	// could not be run or was cancelled (then it is the context's error), not that it failed.
	Run(ctx context.Context, s Step) (exitCode int, err error)
	// Cleanup removes what earlier runs of this agent left behind.
	Cleanup(ctx context.Context) error
	// Close releases the executor's own resources.
	Close() error
}

// ErrNoDocker means Docker was required but no engine answered.
var ErrNoDocker = errors.New("executor: no Docker engine answers")

// Detect picks the executor for mode: Docker when mode is docker (error if the engine does not
// answer) or auto and an engine answers within a few seconds; else the shell executor, with a
// warning the caller must show loudly. dockerHost "" means the environment's DOCKER_HOST or the
// default socket.
func Detect(ctx context.Context, mode, dockerHost, agentID string) (Executor, string, error) {
	if mode == ModeShell {
		return NewShell(), shellWarning, nil
	}
	if mode != ModeAuto && mode != ModeDocker {
		return nil, "", fmt.Errorf("executor: unknown mode %q (want auto, docker or shell)", mode)
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	d, err := NewDocker(pctx, dockerHost, agentID)
	if err == nil {
		return d, "", nil
	}
	if mode == ModeDocker {
		return nil, "", err
	}
	return NewShell(), shellWarning + " (Docker: " + err.Error() + ")", nil
}

const shellWarning = "NO DOCKER ENGINE: jobs run as plain processes on this host with the agent's permissions, images are ignored and nothing is isolated — use only for trusted code on a development machine"

// IsStatic says whether an ELF executable needs no dynamic loader: only such a one runs in any
// image (one may have no libc, or another one), so only such a one is a Tool.
func IsStatic(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

// Pipelines is an executor that sets a pipeline up in one place before its first step and takes
// it down after its last: the Kubernetes executor runs all of a pipeline's steps in one pod. The
// runner calls StartPipeline before the pipeline starts (its billing and its first job) and
// EndPipeline when it has ended, whatever its outcome.
type Pipelines interface {
	Executor
	StartPipeline(ctx context.Context, spec PipelineSpec) error
	EndPipeline(checkout string)
	// CopyOut brings what the steps wrote in the pipeline's place back into the agent's
	// checkout, for what the agent does itself with those files (releases, attachments).
	CopyOut(ctx context.Context, checkout string) error
}

// PipelineSpec is what such an executor needs to know of a pipeline before its first step.
type PipelineSpec struct {
	Lease, Team, Pipeline string
	// Checkout is the agent's copy of the pipeline's checkout (Step.Checkout of its steps);
	// CheckoutMount where the steps see it ("" = /workspace).
	Checkout, CheckoutMount string
	// Images are every image a step of the pipeline may run in, the first the one its
	// preparation uses.
	Images      []PipelineImage
	CPUs        float64
	MemoryBytes int64
	// GPU says the pipeline's class is a GPU one: its place gets the class's GPUs.
	GPU bool
	// Tags are the pipeline's runner tags: they choose where it runs.
	Tags        []string
	MaxDuration time.Duration
	// Waiting, when set, hears why the pipeline waits for a place to run (a pod Pending for
	// capacity), and "" when it no longer does.
	Waiting func(reason string)
}

// PipelineImage is an image of a pipeline, with its registry credentials when it has some.
type PipelineImage struct {
	Name string
	Auth *ImageAuth
}
