//go:build unix

package main

import (
	"context"

	"github.com/nimbus-build/nimbus/internal/lifeline"
)

// lifelineCommand is what nimbus-agent runs each job step under, so that the step ends when the
// agent does, however it dies (internal/lifeline). The CLI is the agent's init because it is
// statically linked and mounted into every job container anyway.
func lifelineCommand() command {
	return command{summary: "run a command until the agent holding its lifeline is gone (used by nimbus-agent)",
		run: func(_ context.Context, e env, args []string) int { return lifeline.Main(args, e.stderr) }}
}
