package runner

import (
	"context"
	"errors"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/agent/protocol"
)

// ImageConfig is how environment images (docker.build, docker:cache) are built.
type ImageConfig struct{}

// prepareImage builds or reuses the environment image of docker.build.
func (x *run) prepareImage(ctx context.Context) (release, error) {
	if x.lease.Plan.Build == nil {
		return nil, nil
	}
	return nil, errors.New("docker.build (an environment image built from a Dockerfile) is not supported by this agent yet")
}

// builtImageAuth are the credentials to pull the image docker.build made.
func (x *run) builtImageAuth() *executor.ImageAuth { return nil }

// builtinFunc runs a built-in task in the agent.
type builtinFunc func(ctx context.Context, job protocol.Job, env map[string]string, jl *jobLog) jobResult

// builtin is the agent's implementation of a built-in task type; nil when it has none.
func (x *run) builtin(typ string) builtinFunc {
	return nil
}
