package runner

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/nimbus-build/nimbus/agent/dockerservice"
	"github.com/nimbus-build/nimbus/agent/executor"
)

// ServiceConfig is how the pipeline services are run.
type ServiceConfig struct {
	// Docker starts the engines of `services: docker`; nil means the service is not offered.
	Docker *dockerservice.Manager
}

// errServiceFailed is the cause of a run stopped because its docker service failed (it died,
// or went over its disk limit): the pipeline fails with the service's message.
type serviceFailed struct{ err error }

func (s *serviceFailed) Error() string { return s.err.Error() }
func (s *serviceFailed) Unwrap() error { return s.err }

// prepareServices starts the pipeline's docker service, when it asks for one. The vscode service
// (cloud workspaces) is not this agent's yet and is left to the planner's verdict.
func (x *run) prepareServices(ctx context.Context) (release, error) {
	var docker bool
	var options map[string]any
	for _, s := range x.lease.Plan.Services {
		switch s.Name {
		case "docker":
			docker, options = true, s.Options
		case "vscode":
		default:
			return nil, fmt.Errorf("services: %q is not a service this agent knows (docker, vscode)", s.Name)
		}
	}
	if !docker {
		return nil, nil
	}
	if x.cfg.Executor.Name() != executor.ModeDocker {
		return nil, errors.New("services: docker needs the Docker executor; this agent runs jobs as host processes (--executor shell), so it cannot give the pipeline a Docker engine")
	}
	mgr := x.cfg.Services.Docker
	if mgr == nil {
		return nil, fmt.Errorf("services: docker: %w", dockerservice.ErrUnavailable)
	}
	if err := mgr.Available(); err != nil {
		return nil, fmt.Errorf("services: docker: %w", err)
	}
	jl := x.setupLog()
	jl.note("services: starting the pipeline's own Docker engine (%s)", mgr.Mode())
	r := x.lease.Plan.Runner
	reg := x.lease.Plan.Builtins["CNB_DOCKER_REGISTRY"]
	user := x.lease.Env["CNB_TOKEN_USER_NAME"]
	if user == "" {
		user = x.lease.Plan.Builtins["CNB_TOKEN_USER_NAME"]
	}
	eng, err := mgr.Start(ctx, dockerservice.Spec{
		ID: x.lease.ID, Checkout: x.checkout, Mount: x.mount,
		CPUs: float64(r.Cpus), MemoryBytes: int64(r.MemoryGiB) << 30, GPUs: x.lease.GPUs,
		Registry: reg, User: user, Password: x.lease.JobToken,
		Insecure: plainHTTP(x.lease.Plan.Builtins["CNB_WEB_ENDPOINT"]),
	})
	if err != nil {
		return nil, fmt.Errorf("services: docker: %w", err)
	}
	jl.note("services: docker is ready after %s (DOCKER_HOST=%s; logged in to %s)",
		eng.Ready.Round(10*time.Millisecond), eng.Env()["DOCKER_HOST"], reg)
	if p := mgr.CLIProblem(); p != "" {
		jl.note("services: %s: only images with their own docker CLI can use the engine", p)
	}
	for _, n := range serviceOptionNotes(options) {
		jl.note("services: %s", n)
	}
	x.extras.addMounts(eng.Mounts()...)
	x.extras.addEnv(eng.Env())
	x.extras.mu.Lock()
	x.extras.pathAppend = append(x.extras.pathAppend, eng.PathAppend()...)
	x.extras.mu.Unlock()
	stopWatch := make(chan struct{})
	go func() {
		select {
		case err := <-eng.Failed():
			x.cancel(&serviceFailed{err: err})
		case <-stopWatch:
		}
	}()
	return func(bool) {
		close(stopWatch)
		if err := eng.Stop(); err != nil {
			x.log.Warn("stopping the pipeline's docker service left something behind; the agent's next start removes it", "err", err)
		}
	}, nil
}

// serviceOptionNotes says what becomes of the docker service's options. BuildKit cannot be
// offered here: no buildkitd ships with the engine, so buildx uses the engine's own builder.
func serviceOptionNotes(options map[string]any) []string {
	keys := make([]string, 0, len(options))
	for k := range options {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		switch k {
		case "rootlessBuildkitd":
			if m, ok := options[k].(map[string]any); ok && m["enabled"] == true {
				out = append(out, "rootlessBuildkitd is not available on this agent (no buildkitd is installed): `docker buildx` uses the engine's built-in builder, so multi-platform builds are not possible")
			}
		default:
			out = append(out, fmt.Sprintf("the option %q of the docker service is not supported and is ignored", k))
		}
	}
	return out
}

// plainHTTP says whether Nimbus is served over plain HTTP, so its registry is too.
func plainHTTP(endpoint string) bool {
	u, err := url.Parse(endpoint)
	return err == nil && strings.EqualFold(u.Scheme, "http")
}
