package runner

// Environment images: docker.build (the image every job of the pipeline runs in, made before
// the stages) and the built-in task docker:cache (an image made by a job, whose name later jobs
// get through exports). Both go through agent/imagebuild, which versions the image by its
// content and reuses it from this engine or from the registry before it builds anything.
//
// The image is named ${CNB_DOCKER_REGISTRY}/${CNB_REPO_SLUG_LOWERCASE}/nimbus-cache:<version>:
// the repo's own namespace in Nimbus's registry, where the pipeline's job token may push and
// every agent pulls from with the same token. With sync, the push is done before the pipeline
// goes on; without, it runs in the background and the run waits for it before it finishes
// (while the job token is still valid), so the next pipeline, on any agent, can pull it.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/agent/imagebuild"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// imageName is the name of environment images below the repo's namespace in the registry.
const imageName = "nimbus-cache"

// Built-in task types the agent runs itself.
const typeDockerCache = "docker:cache"

// ResultName is the result of docker:cache that exports may name: the image's reference.
const ResultName = "name"

// ImageConfig is how environment images (docker.build, docker:cache) are made. The zero value
// is what every agent uses: images are built on the executor's engine, with the network of the
// job containers.
type ImageConfig struct{}

// pushes are the background pushes of one run (run.pushes), waited for before the finish, so the
// image is in the registry when the pipeline is over.
type pushes struct{ wg sync.WaitGroup }

// prepareImage builds or reuses the environment image of docker.build. Its release waits for
// the run's background pushes (docker:cache's too), so it is returned even without
// docker.build.
func (x *run) prepareImage(ctx context.Context) (release, error) {
	wait := func(bool) { x.pushes.wg.Wait() }
	b := x.lease.Plan.Build
	if b == nil {
		return wait, nil
	}
	jl := x.setupLog()
	// The Dockerfile's RUN steps are the user's code: the server knows before they run.
	if id := x.firstJobID(); id != 0 && !x.startJob(ctx, id) {
		wait(false)
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, errors.New("docker.build: the server could not be told that the pipeline starts, so nothing was built")
	}
	ref, err := x.ensureImage(ctx, ctx, "docker.build", x.buildSpec(b), b.Sync, jl)
	if err != nil {
		wait(false)
		return nil, err
	}
	x.extras.mu.Lock()
	x.extras.image = ref
	x.extras.mu.Unlock()
	jl.note("docker.build: the jobs run in %s", ref)
	return wait, nil
}

// buildSpec is docker.build with the plan's run-time variables expanded.
func (x *run) buildSpec(b *protocol.DockerBuild) imagebuild.Spec {
	s := imagebuild.Spec{Dockerfile: b.Dockerfile, Target: b.Target, By: b.By, VersionBy: b.VersionBy,
		BuildArgs: b.BuildArgs, IgnoreBuildArgsInVersion: b.IgnoreBuildArgsInVersion}
	names := x.lease.Plan.RuntimeVars
	if len(names) == 0 {
		return s
	}
	env := x.jobEnv(protocol.Stage{}, protocol.Job{Env: x.lease.Plan.Env}, nil, nil)
	expand := func(v string) string { return protocol.ExpandVars(v, names, env) }
	each := func(l []string) []string {
		out := make([]string, len(l))
		for i, v := range l {
			out[i] = expand(v)
		}
		return out
	}
	s.Dockerfile, s.Target, s.By, s.VersionBy = expand(s.Dockerfile), expand(s.Target), each(s.By), each(s.VersionBy)
	s.BuildArgs = maps.Clone(s.BuildArgs)
	for k, v := range s.BuildArgs {
		s.BuildArgs[k] = expand(v)
	}
	return s
}

// ensureImage puts the image of spec on the engine and in the registry, as sync asks, and
// returns its reference. What happens is written to jl, each line of ours headed by what. A
// background push lives on runCtx, not ctx: it outlasts a docker:cache job.
func (x *run) ensureImage(ctx, runCtx context.Context, what string, spec imagebuild.Spec, sync bool, jl *jobLog) (string, error) {
	b, err := x.imageBuilder(what)
	if err != nil {
		return "", err
	}
	repo, err := x.imageRepository()
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	auth := x.registryAuth()
	r := x.lease.Plan.Runner
	img, err := b.Ensure(ctx, imagebuild.Request{Spec: spec, Checkout: x.checkout, Repository: repo, Auth: auth,
		CPUs: float64(r.Cpus), MemoryBytes: int64(r.MemoryGiB) << 30, Out: jl,
		Note: func(format string, args ...any) { jl.note(what+": "+format, args...) }})
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if img.InRegistry {
		return img.Ref, nil
	}
	if !sync {
		x.pushInBackground(runCtx, b, img.Ref, auth, what)
		jl.note("%s: pushing %s to the registry in the background; the pipeline waits for it before it finishes", what, img.Ref)
		return img.Ref, nil
	}
	jl.note("%s: pushing %s to the registry (sync)", what, img.Ref)
	digest, err := b.Push(ctx, img.Ref, auth, jl)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	jl.note("%s: pushed %s (%s)", what, img.Ref, digest)
	return img.Ref, nil
}

// pushInBackground pushes while the pipeline goes on. Its job's log may be closed by the time
// it ends, so the outcome goes to the agent's log.
func (x *run) pushInBackground(ctx context.Context, b *imagebuild.Builder, ref string, auth imagebuild.Auth, what string) {
	x.pushes.wg.Go(func() {
		digest, err := b.Push(ctx, ref, auth, nil)
		if err != nil {
			x.log.Warn("pushing an environment image in the background failed; the next pipeline builds it again",
				"what", what, "image", ref, "err", err)
			return
		}
		x.log.Info("environment image pushed", "what", what, "image", ref, "digest", digest)
	})
}

// errNeedsDocker fails docker.build and docker:cache on the shell executor.
var errNeedsDocker = errors.New("it builds the image on a Docker engine (start the agent with the Docker executor)")

// imageBuilder is the image builder on the executor's engine.
func (x *run) imageBuilder(what string) (*imagebuild.Builder, error) {
	d, ok := x.cfg.Executor.(*executor.Docker)
	if !ok {
		if what == typeDockerCache {
			// The wording of an unsupported built-in task, and why.
			return nil, fmt.Errorf("built-in task %q is not supported by the shell executor: %w", what, errNeedsDocker)
		}
		return nil, fmt.Errorf("%s is not supported by the shell executor: %w", what, errNeedsDocker)
	}
	return &imagebuild.Builder{Engine: d.Client(), NetworkMode: d.NetworkMode}, nil
}

// imageRepository is where the repo's environment images live in Nimbus's registry.
func (x *run) imageRepository() (string, error) {
	b := x.lease.Plan.Builtins
	reg, slug := b["CNB_DOCKER_REGISTRY"], b["CNB_REPO_SLUG_LOWERCASE"]
	if reg == "" || slug == "" {
		return "", errors.New("the plan names no registry to keep the image in (CNB_DOCKER_REGISTRY and CNB_REPO_SLUG_LOWERCASE are empty)")
	}
	return reg + "/" + slug + "/" + imageName, nil
}

// registryAuth logs in to Nimbus's registry as the pipeline: CNB_TOKEN_USER_NAME and the job
// token, which may push to the repo's namespace.
func (x *run) registryAuth() imagebuild.Auth {
	if x.lease.JobToken == "" {
		return imagebuild.Auth{}
	}
	user := x.lease.Plan.Builtins["CNB_TOKEN_USER_NAME"]
	if user == "" {
		user = x.lease.Env["CNB_TOKEN_USER_NAME"]
	}
	if user == "" {
		user = "cnb"
	}
	return imagebuild.Auth{User: user, Password: x.lease.JobToken}
}

// builtImageAuth are the credentials to pull the image docker.build made.
func (x *run) builtImageAuth() *executor.ImageAuth {
	a := x.registryAuth()
	if a.User == "" {
		return nil
	}
	return &executor.ImageAuth{User: a.User, Password: a.Password}
}

// builtinFunc runs a built-in task in the agent.
type builtinFunc func(ctx context.Context, job protocol.Job, env map[string]string, jl *jobLog) jobResult

// builtin is the agent's implementation of a built-in task type; nil when it has none.
func (x *run) builtin(typ string) builtinFunc {
	switch typ {
	case typeDockerCache:
		return x.dockerCache
	case "vscode:go":
		return x.vscodeGo
	case typeGitRelease:
		return x.gitRelease
	case typeGitAutoMerge:
		return x.gitAutoMerge
	case typeGitReviewer:
		return x.gitReviewer
	case "cnb:apply":
		return x.cnbApply
	case "cnb:trigger":
		return x.cnbTrigger
	case "cnb:resolve":
		return x.cnbResolve
	case "cnb:await":
		return x.cnbAwait
	}
	return nil
}

// dockerCache runs docker:cache: the image of its options, made or reused as docker.build's,
// its reference the result "name".
func (x *run) dockerCache(ctx context.Context, job protocol.Job, env map[string]string, jl *jobLog) jobResult {
	if _, err := x.imageBuilder(typeDockerCache); err != nil {
		jl.note("%v", err)
		return x.failure(job, err.Error(), nil)
	}
	spec, sync, err := cacheOptions(job, env, jl)
	if err != nil {
		jl.note("%v", err)
		return x.failure(job, err.Error(), nil)
	}
	jctx := ctx
	if t := job.Timeout.Std(); t > 0 {
		var cancel context.CancelFunc
		jctx, cancel = context.WithTimeoutCause(ctx, t, errJobTimeout)
		defer cancel()
	}
	ref, err := x.ensureImage(jctx, ctx, typeDockerCache, spec, sync, jl)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return x.interrupted(ctx)
	case jctx.Err() != nil:
		jl.note("timed out after %s", job.Timeout.Std())
		return x.failure(job, "timed out after "+job.Timeout.Std().String(), nil)
	default:
		jl.note("%v", err)
		return x.failure(job, err.Error(), nil)
	}
	code := exitSuccess
	return jobResult{status: StatusSuccess, code: &code, exports: exportValues(job, map[string]string{ResultName: ref})}
}

// cacheOptions reads docker:cache's options (optionsFrom already merged in by fromFiles), with the
// job's run-time variables expanded.
// Unknown options are noted and ignored, as lint warns about them.
func cacheOptions(job protocol.Job, env map[string]string, jl *jobLog) (imagebuild.Spec, bool, error) {
	var s imagebuild.Spec
	var sync bool
	for _, k := range slices.Sorted(maps.Keys(job.Options)) {
		v := job.Options[k]
		if len(job.RuntimeVars) > 0 {
			v = expandAny(v, job.RuntimeVars, env)
		}
		var err error
		switch k {
		case "dockerfile":
			s.Dockerfile, err = optionString(v)
		case "target":
			s.Target, err = optionString(v)
		case "by":
			s.By, err = optionStrings(v)
		case "versionBy":
			s.VersionBy, err = optionStrings(v)
		case "buildArgs":
			s.BuildArgs, err = optionMap(v)
		case "sync":
			sync, err = optionBool(v)
		case "ignoreBuildArgsInVersion":
			s.IgnoreBuildArgsInVersion, err = optionBool(v)
		default:
			jl.note("docker:cache: unknown option %q ignored", k)
		}
		if err != nil {
			return s, false, fmt.Errorf("docker:cache: option %s: %w", k, err)
		}
	}
	if s.Dockerfile == "" {
		return s, false, errors.New("docker:cache: the option dockerfile is required")
	}
	return s, sync, nil
}

func optionString(v any) (string, error) {
	switch t := v.(type) {
	case nil:
		return "", nil
	case string:
		return t, nil
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64), nil
	case bool:
		return strconv.FormatBool(t), nil
	}
	return "", fmt.Errorf("want a string, not %T", v)
}

// optionStrings reads a list of strings; one string is a list of one, as in the planner.
func optionStrings(v any) ([]string, error) {
	switch t := v.(type) {
	case nil:
		return nil, nil
	case string:
		return []string{t}, nil
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			s, err := optionString(e)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a list of strings, not %T", v)
}

func optionMap(v any) (map[string]string, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want a map, not %T", v)
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		s, err := optionString(e)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = s
	}
	return out, nil
}

// optionBool reads a boolean, also as the text a variable expands to.
func optionBool(v any) (bool, error) {
	switch t := v.(type) {
	case nil:
		return false, nil
	case bool:
		return t, nil
	case string:
		switch strings.ToLower(strings.TrimSpace(t)) {
		case "true", "yes", "on", "1":
			return true, nil
		case "false", "no", "off", "0", "":
			return false, nil
		}
	}
	return false, fmt.Errorf("want true or false, not %v", v)
}
