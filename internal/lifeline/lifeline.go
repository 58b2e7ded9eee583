// Package lifeline ends what the agent started when the agent is gone, however it went: kill -9,
// the OOM killer, a panic, its whole cgroup killed by systemd or with its Kubernetes pod. The
// agent ends its containers and processes itself on every path it lives through (a step's end,
// a cancel, a graceful stop), and a restarted agent removes what a crashed one left; this
// package covers the time in between, which used to last until someone restarted the agent: a
// job running on, unbilled, holding a GPU for hours.
//
// A lifeline is a FIFO that only the agent holds open, one per step:
//
//	agent: Lines.Hold ─► <dir>/<id>, a FIFO the agent keeps open (never written)
//	                         │ bind-mounted read-only at /.nimbus/lifeline
//	container:  docker-init (PID 1) ─► nimbus lifeline /.nimbus/lifeline -- <the step's command>
//	host shell: (own process group)    nimbus lifeline <dir>/<id> -- sh -c <script>
//
// `nimbus lifeline` (Main, in the static nimbus CLI, mounted at /.nimbus/init) runs the step's
// command as its child and reads the FIFO. The read ends when the last holder of the FIFO's
// other end is gone, and the kernel closes a process's descriptors when it dies, whatever kills
// it. Main then kills its process group, itself included. In a container docker-init, whose
// child it is, exits with it, and the kernel kills everything else in the container's PID
// namespace: the container stops within a second of the agent's death (the next start of the
// agent removes it). On the host the step's process group dies.
//
// Why this design:
//   - Not a supervisor process beside the agent: it would share the agent's cgroup, which
//     systemd (KillMode=control-group) and Kubernetes kill whole, so it would die with the agent
//     exactly when it is needed. The FIFO's end is in the container, outside that cgroup.
//   - Not PR_SET_PDEATHSIG: it reaches one process, whose parent must be the agent; a
//     container's processes are the engine's children, and a script's own children never hear
//     of it. (It does end a pipeline's docker service, a process tree the agent starts itself
//     that passes it down: agent/dockerservice.)
//   - A FIFO, not a socket the agent listens on: the agent holds one descriptor per step and
//     accepts nothing, so a job cannot make it open thousands; and one FIFO per step, so that a
//     job that opens its own for writing (root in a container may) keeps at most itself, never
//     another tenant's step, alive past the agent.
//   - The init is the nimbus CLI the agent already mounts into jobs: statically linked, so it
//     runs in any image, with or without a shell (plugins, distroless). docker-init stays PID 1
//     (zombies reaped, signals forwarded to Main, which forwards them to the step).
//
// What it costs: one more process per step, idle in a read (about 7 MB of memory, counted in
// the step's limit), and Go's start before the step's command, a few milliseconds on an idle
// host (about 40 ms on the loaded test host: BenchmarkLifelineStart in agent/executor). What it
// does not do: a host process that leaves its process group (setsid, a daemon) escapes the
// shell executor's lifeline, as it escapes a cancel; in a container nothing escapes. A job that
// sets out to outlive the agent (tracing its init, holding its own FIFO open) keeps at most its
// own container past the agent's death, until the agent's next start removes it, as before.
//
// This package is for the agent only (and the nimbus CLI's `lifeline` command, which is Main).
package lifeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// CommandName is the nimbus CLI's command that runs a step under a lifeline (Main).
const CommandName = "lifeline"

// Lines makes the lifelines of one agent, in a directory of their own.
type Lines struct {
	dir  string
	init string
}

// New prepares dir for the lifelines of steps that run under init, the statically linked
// nimbus CLI: it creates dir, removes the FIFOs an earlier run of the agent left there, and
// checks that init runs a command under a lifeline (a nimbus CLI older than the agent has no
// `lifeline` command, and every step would fail to start).
func New(ctx context.Context, dir, init string) (*Lines, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("lifeline: %w", err)
	}
	if err := os.RemoveAll(abs); err != nil {
		return nil, fmt.Errorf("lifeline: remove earlier lifelines: %w", err)
	}
	// 0755: the engine's user (a rootless docker service) and a container's user read the FIFOs.
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("lifeline: %w", err)
	}
	ls := &Lines{dir: abs, init: init}
	if err := ls.check(ctx); err != nil {
		return nil, err
	}
	return ls, nil
}

// check runs `init version` under a lifeline, as steps will run.
func (ls *Lines) check(ctx context.Context) error {
	l, err := ls.Hold()
	if err != nil {
		return err
	}
	defer l.Release()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	argv := Command(ls.init, l.Path(), []string{ls.init, "version"})
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "nimbus ") {
		return fmt.Errorf("lifeline: %s cannot run steps under a lifeline (is it older than the agent?): %v: %.200q", ls.init, err, out)
	}
	return nil
}

// Init is the executable steps run under, on the agent's host.
func (ls *Lines) Init() string { return ls.init }

// Hold makes a new lifeline and holds it until Release.
func (ls *Lines) Hold() (*Line, error) {
	b := make([]byte, 8)
	rand.Read(b)
	path := filepath.Join(ls.dir, hex.EncodeToString(b))
	if err := unix.Mkfifo(path, 0o600); err != nil {
		return nil, fmt.Errorf("lifeline: %w", err)
	}
	// Readable by anyone (a container's user, the docker service's), written by no one: the
	// agent's own descriptor is what keeps the line up. Chmod, because the umask narrows Mkfifo.
	if err := os.Chmod(path, 0o644); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("lifeline: %w", err)
	}
	// Read-write, so that the open does not wait for a reader (Linux allows it on a FIFO). The
	// descriptor is close-on-exec, as all of Go's: no child of the agent holds the line up.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("lifeline: %w", err)
	}
	return &Line{path: path, f: f}, nil
}

// Line is one held lifeline.
type Line struct {
	path    string
	f       *os.File
	release sync.Once
	err     error
}

// Path is the FIFO on the agent's host.
func (l *Line) Path() string { return l.path }

// Release lets the lifeline go: what still runs under it is killed. Releasing again does
// nothing; a nil Line is none.
func (l *Line) Release() error {
	if l == nil {
		return nil
	}
	l.release.Do(func() { l.err = errors.Join(l.f.Close(), os.Remove(l.path)) })
	return l.err
}

// Command is the command line that runs argv under init with the lifeline at line, both as the
// step sees them.
func Command(init, line string, argv []string) []string {
	return append([]string{init, CommandName, line, "--"}, argv...)
}

// Main is `nimbus lifeline FIFO -- COMMAND [ARG…]`, the process a step runs under: it runs
// COMMAND as its child, with its own standard input, output and error (they are the step's),
// forwards the signals it gets to it, and exits with its exit code (128 + the signal's number
// when a signal ended it, as a shell and docker-init report it). When the FIFO's last writer,
// the agent, is gone, it kills its process group (it makes one of its own, which the command
// shares unless it makes another) and itself. Messages of its own go to stderr.
func Main(args []string, stderr io.Writer) int {
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintln(stderr, "usage: nimbus lifeline FIFO -- COMMAND [ARG…]\n\nRuns COMMAND until it exits or the process holding FIFO open (nimbus-agent) is gone; then it kills COMMAND and its process group. nimbus-agent runs every job step so.")
		return 2
	}
	// A process group of its own, whatever the caller did: it is what dies with the agent, and
	// a caller's (a shell's) must not.
	unix.Setpgid(0, 0)
	// Non-blocking: opening a FIFO to read waits for a writer, and an agent that died before
	// this point would be waited for forever. Read then waits in the poller, and finds the end
	// of the file at once if no writer is left.
	line, err := os.OpenFile(args[0], os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		fmt.Fprintf(stderr, "nimbus lifeline: %v\n", err)
		return 126
	}
	return run(line, args[2:], stderr)
}

// forwarded are the signals Main passes on to the step's command, as docker-init does: the
// ones a user or the engine sends to end or poke a process. SIGKILL and SIGSTOP cannot be
// caught; SIGCHLD and the like concern Main itself.
var forwarded = []os.Signal{unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGTERM, unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH}

// run runs argv under line, which is open for reading.
func run(line *os.File, argv []string, stderr io.Writer) int {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "nimbus lifeline: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return 127 // as a shell says "not found"
		}
		return 126
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	gone := make(chan error, 1)
	go func() {
		// Nothing is ever written: a read returns only at the end of the file (the agent is
		// gone) or on an error, which cannot be told apart from it and is treated the same.
		var b [1]byte
		for {
			if _, err := line.Read(b[:]); err != nil {
				gone <- err
				return
			}
		}
	}()
	for {
		select {
		case s := <-sigs:
			cmd.Process.Signal(s)
		case <-exited:
			return exitCode(cmd.ProcessState)
		case err := <-gone:
			if !errors.Is(err, io.EOF) {
				fmt.Fprintf(stderr, "nimbus lifeline: reading the lifeline failed, so the agent counts as gone: %v\n", err)
			}
			// The command first, in case it made a process group of its own; then this process
			// group, this process included.
			cmd.Process.Signal(unix.SIGKILL)
			unix.Kill(0, unix.SIGKILL)
			// Not reached, except as PID 1 of a namespace (a container without docker-init),
			// which SIGKILL from inside does not reach: exiting then ends the namespace.
			return 128 + int(unix.SIGKILL)
		}
	}
}

// exitCode is the exit code a shell reports for a finished process.
func exitCode(st *os.ProcessState) int {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}
