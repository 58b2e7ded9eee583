//go:build !unix

package main

import (
	"context"
	"fmt"
)

// lifelineCommand exists only where agents run (internal/lifeline needs FIFOs and process groups).
func lifelineCommand() command {
	return command{summary: "run a command under an agent's lifeline (Linux only, used by nimbus-agent)",
		run: func(_ context.Context, e env, _ []string) int {
			fmt.Fprintln(e.stderr, "nimbus lifeline: only on Linux and other Unix systems, where nimbus-agent runs")
			return 2
		}}
}
