// Command nimbus is the Nimbus command-line client: it lints and plans .cnb.yml files locally and
// talks to a Nimbus server's /api/v1 for everything else.
//
// Every subcommand takes its own flags; each flag can also be set by an environment variable,
// listed by `nimbus COMMAND --help`.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"syscall"

	"github.com/nimbus-build/nimbus/internal/inpod"

	"github.com/nimbus-build/nimbus/internal/envflag"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// env is what a subcommand may touch of the outside world; tests pass their own.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
}

// command is one subcommand. run returns the process exit code.
type command struct {
	summary string
	run     func(ctx context.Context, e env, args []string) int
}

func commands() map[string]command {
	return map[string]command{
		"version": {summary: "print the client version", run: func(_ context.Context, e env, _ []string) int {
			fmt.Fprintf(e.stdout, "nimbus %s\n", version)
			return 0
		}},
		"lint":            lintCommand(),
		"plan":            planCommand(),
		"artifact":        artifactCommand(),
		"workspace":       workspaceCommand(),
		"pr":              prCommand(),
		"lifeline":        lifelineCommand(),
		inpod.CommandName: podCommand(),
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "nimbus is the Nimbus command-line client.\n\nUsage: nimbus COMMAND [flags] [args]\n\nCommands:")
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun `nimbus COMMAND --help` for a command's flags and the environment variables that set them.")
}

// run dispatches args (without the program name) and returns the exit code.
func run(ctx context.Context, e env, args []string) int {
	if len(args) == 0 {
		usage(e.stderr)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		usage(e.stdout)
		return 0
	}
	cmd, ok := commands()[args[0]]
	if !ok {
		fmt.Fprintf(e.stderr, "nimbus: unknown command %q\n\n", args[0])
		usage(e.stderr)
		return 2
	}
	return cmd.run(ctx, e, args[1:])
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}, os.Args[1:])
	stop()
	os.Exit(code)
}

// verbOf returns the subcommand args starts with when it is one of verbs. Otherwise it prints
// usage, to stdout for help (code 0) or to stderr (code 2), and ok is false.
func verbOf(e env, args []string, usage string, verbs ...string) (verb string, code int, ok bool) {
	if len(args) > 0 && slices.Contains(verbs, args[0]) {
		return args[0], 0, true
	}
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprintln(e.stdout, usage)
		return "", 0, false
	}
	fmt.Fprintln(e.stderr, usage)
	return "", 2, false
}

// serverFlags registers --server and --token; tokenHelp says which tokens the command takes.
func serverFlags(fs *envflag.Set, server, token *string, tokenHelp string) {
	fs.String(server, "server", "NIMBUS_SERVER", "", "the Nimbus server's URL (default: CNB_WEB_ENDPOINT inside a pipeline)")
	fs.String(token, "token", "NIMBUS_TOKEN", "", tokenHelp)
}

// inPipeline fills an empty server and token from a pipeline's CNB_WEB_ENDPOINT and CNB_TOKEN.
func inPipeline(e env, server, token *string) {
	if *server == "" {
		*server = e.getenv("CNB_WEB_ENDPOINT")
	}
	if *token == "" {
		*token = e.getenv("CNB_TOKEN")
	}
}
