package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// DefaultBinary is the git executable the storage helpers run; the handler uses
// HandlerConfig.GitPath and falls back to it.
const DefaultBinary = "git"

// waitDelay bounds how long a finished (or killed) git process may keep our pipes open, so a
// stuck reader or a grandchild holding stdout can never hang a request forever.
const waitDelay = 5 * time.Second

// maxStderr is how much of a failing command's stderr ends up in its error.
const maxStderr = 4 << 10

// baseEnv is the whole environment of every git process we start. Nothing of the server's own
// environment leaks in except PATH: no GIT_DIR, no credentials, no user or system config, so a
// repository behaves the same on every host and under every test.
func baseEnv() []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	return []string{
		"PATH=" + path,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_NO_REPLACE_OBJECTS=1",
		"LC_ALL=C",
	}
}

// command prepares `git --git-dir=<repo> args…` (no --git-dir when repo is ""). Arguments go
// straight to exec, never through a shell.
func command(ctx context.Context, repo string, args ...string) *exec.Cmd {
	full := make([]string, 0, len(args)+1)
	if repo != "" {
		// The "=" form keeps a path that starts with "-" from being read as an option.
		full = append(full, "--git-dir="+repo)
	}
	full = append(full, args...)
	cmd := exec.CommandContext(ctx, DefaultBinary, full...)
	cmd.Env = baseEnv()
	cmd.WaitDelay = waitDelay
	return cmd
}

// run runs git in repo and returns its stdout. A failure carries the command and the start
// of stderr, which is where git explains itself.
func run(ctx context.Context, repo string, stdin io.Reader, args ...string) ([]byte, error) {
	cmd := command(ctx, repo, args...)
	cmd.Stdin = stdin
	var stdout bytes.Buffer
	stderr := &capWriter{max: maxStderr}
	cmd.Stdout = &stdout
	cmd.Stderr = stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), commandError(args, err, stderr)
	}
	return stdout.Bytes(), nil
}

// runTo is run with stdout streamed to w. A writer that refuses more (limitWriter) stops git:
// the error is then the failed write's, and the caller knows it asked for that.
func runTo(ctx context.Context, repo string, w io.Writer, args ...string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := command(ctx, repo, args...)
	stderr := &capWriter{max: maxStderr}
	cmd.Stdout, cmd.Stderr = w, stderr
	if err := cmd.Run(); err != nil {
		return commandError(args, err, stderr)
	}
	return nil
}

// commandError describes a failed git command. The *exec.ExitError stays reachable with
// errors.As so callers can look at the exit code.
func commandError(args []string, err error, stderr *capWriter) error {
	name := "git"
	if len(args) > 0 {
		name += " " + args[0]
	}
	msg := strings.TrimSpace(stderr.String())
	if msg == "" {
		return fmt.Errorf("%s: %w", name, err)
	}
	return fmt.Errorf("%s: %w: %s", name, err, msg)
}

// exitCode is the exit status inside err, or -1 when err is not an exit.
func exitCode(err error) int {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	return -1
}

// capWriter keeps the first max bytes written to it and drops the rest, so a chatty process
// cannot grow our memory.
type capWriter struct {
	max int
	buf bytes.Buffer
}

func (w *capWriter) Write(p []byte) (int, error) {
	if room := w.max - w.buf.Len(); room > 0 {
		w.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (w *capWriter) String() string { return w.buf.String() }
