package envflag

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Run is a binary's whole work: its arguments, its environment, where it writes, and a context
// that ends on SIGINT or SIGTERM (the graceful stop). It is what the tests call.
type Run func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// Main is the main function of nimbus-server and nimbus-agent: run with the process's
// arguments, environment and streams, then the exit status from Exit.
func Main(name string, run Run) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(Exit(name, err, os.Stderr))
}

// Exit is the exit status of a run that ended with err: 0 for none and for --help (the flag
// set printed it), else 1 after "name: err" on stderr.
func Exit(name string, err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintln(stderr, name+":", err)
	return 1
}
