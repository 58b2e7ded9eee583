package main

import (
	"context"

	"github.com/nimbus-build/nimbus/internal/inpod"
)

// podCommand is what nimbus-agent's Kubernetes executor runs inside a pipeline's pod: each step
// (`nimbus pod step`, its script and environment on stdin), and the checkout's way in and out
// (`nimbus pod untar|tar DIR`). internal/inpod says why it is built so.
func podCommand() command {
	return command{summary: "run a step inside a pipeline's Kubernetes pod (used by nimbus-agent)",
		run: func(_ context.Context, e env, args []string) int {
			return inpod.Main(args, e.stdin, e.stdout, e.stderr)
		}}
}
