package executor

// Long-lived containers for cloud workspaces: a pipeline that, after its stages, stays up so
// that users can open terminals in it and reach the ports it listens on. The agent's end of that:
//
//	StartContainer ─► Container ─┬─ Exec ─► ExecSession (io.ReadWriteCloser, Resize, Wait)
//	                             ├─ DialPort ─► net.Conn to 127.0.0.1:port inside the container
//	                             └─ Stop
//
// Both the terminal and the port are plain byte pipes: the tunnel to the server carries them and
// resize messages, and no terminal or HTTP logic lives here.
//
// The agent must run as root on the engine's host, in the engine's PID namespace: DialPort enters
// the container's network namespace through /proc/<pid>/ns/net, and closing a session signals
// the exec'd process by its host pid (the engine has no API to kill an exec). Both check that the
// pid the engine names is in the container's cgroup before using it, so that an agent that sees
// other pids (a remote engine, a different PID namespace) fails instead of touching a stranger.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/versions"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"golang.org/x/sys/unix"

	"github.com/nimbus-build/nimbus/internal/lifeline"
)

// ErrNeedsDocker is returned by the shell executor for what only containers can do.
var ErrNeedsDocker = errors.New("executor: workspaces (long-lived containers, terminals, ports) need the Docker executor, and this agent uses the shell executor")

// StartContainer implements workspaces for the shell executor: there are none without Docker.
func (*Shell) StartContainer(ctx context.Context, s Step) (*Container, error) {
	return nil, fmt.Errorf("step %q: %w", s.Name, ErrNeedsDocker)
}

// keepAlive is the main process of a container that only has to stay up: `sleep` and a shell are
// in every image that has a shell at all. `while sleep` rather than `while :; do sleep` so that an
// image without sleep ends the container instead of spinning a core. No `exec sleep infinity`:
// busybox's sleep does not know "infinity".
const keepAlive = "while sleep 3600; do :; done"

// Container is a long-lived container started by StartContainer. Its methods may be called
// concurrently.
type Container struct {
	d    *Docker
	ID   string
	name string // the step's, for errors

	// line is the container's lifeline (internal/lifeline), released by Stop; nil without one.
	line *lifeline.Line
	// att streams the main process's output to the step's writers; nil when it has none.
	att      *types.HijackedResponse
	copied   chan struct{} // closed when the output copy has ended
	stopOnce sync.Once
}

// StartContainer starts a detached container for s that stays up until Stop (or Cleanup, since it
// carries the agent label): the image, env, checkout mount, extra mounts, PATH additions,
// limits, GPUs and labels are those Run would give the step. Its main process is:
//   - Script, when set, run by `sh -c` (a workspace's IDE: `exec code-server …`); the container
//     ends when the script does;
//   - else, with Args, the image's entrypoint with Args;
//   - else a sleep loop under `sh -c`, or, for an image without a shell (distroless, scratch), the
//     image's own entrypoint and command, which is then what keeps it up.
//
// The main process's output goes to s.Output and s.Stderr, as with Run, when they are set.
func (d *Docker) StartContainer(ctx context.Context, s Step) (*Container, error) {
	line, err := d.hold(s)
	if err != nil {
		return nil, err
	}
	cmd := stepCommand(s)
	keepingAlive := s.Script == "" && len(s.Args) == 0
	if keepingAlive {
		cmd = command{entrypoint: []string{"sh", "-c"}, args: []string{keepAlive}}
	}
	cfg, host, err := d.containerConfig(ctx, s, cmd, line)
	if err != nil {
		line.Release()
		return nil, err
	}
	id, err := d.createContainer(ctx, s, cfg, host)
	if err != nil {
		line.Release()
		return nil, err
	}
	// The container holds its lifeline until Stop.
	c := &Container{d: d, ID: id, name: s.Name, line: line}
	// Until it is handed to the caller, a failure must not leave the container behind, nor its
	// lifeline held.
	started := false
	defer func() {
		if !started {
			c.remove()
			line.Release()
		}
	}()
	if keepingAlive {
		ok, err := d.hasShell(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("executor: look for a shell in %q: %w", s.Name, err)
		}
		if !ok {
			// A shell-less image starts with its own command: there is nothing else in it to
			// run, and for such images (a server, an IDE) that command is what should stay up.
			d.removeContainer(id)
			if cfg, host, err = d.containerConfig(ctx, s, command{}, line); err != nil {
				return nil, err
			}
			if c.ID, err = d.createContainer(ctx, s, cfg, host); err != nil {
				return nil, err
			}
		}
	}
	if s.Output != nil || s.Stderr != nil {
		if err := c.attachOutput(ctx, s); err != nil {
			return nil, err
		}
	}
	if err := d.cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		return nil, fmt.Errorf("executor: start %q: %w", s.Name, err)
	}
	started = true
	return c, nil
}

// attachOutput copies the main process's stdout and stderr to the step's writers. It is attached
// before the start so that nothing the process writes first is lost.
func (c *Container) attachOutput(ctx context.Context, s Step) error {
	att, err := c.d.cli.ContainerAttach(ctx, c.ID, container.AttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return fmt.Errorf("executor: attach to %q: %w", s.Name, err)
	}
	out := s.Output
	if out == nil {
		out = io.Discard
	}
	errOut := s.Stderr
	if errOut == nil {
		errOut = out
	}
	c.att = &att
	c.copied = make(chan struct{})
	go func() {
		defer close(c.copied)
		// It ends when the container does or Stop closes the stream; either is a normal end.
		stdcopy.StdCopy(out, errOut, att.Reader)
	}()
	return nil
}

// Stop removes the container and everything running in it, exec sessions included (their
// streams then end). A container that is gone already is no error. Pass a live context: Stop is
// usually called on the way out of a cancelled one, and needs a few seconds of its own.
func (c *Container) Stop(ctx context.Context) error {
	if c == nil || c.d == nil {
		return ErrNeedsDocker
	}
	err := c.d.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	// Whatever the engine answered, the lifeline goes: what may still run in the container ends.
	c.line.Release()
	if err != nil && !isGone(err) {
		return fmt.Errorf("executor: stop %q: %w", c.name, err)
	}
	c.stopOnce.Do(func() {
		if c.att != nil {
			c.att.Close()
			<-c.copied
		}
	})
	return nil
}

// remove is Stop for the failure paths of StartContainer, with its own context since the
// caller's may be the reason for the failure.
func (c *Container) remove() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.Stop(ctx)
}

// removeContainer removes a container StartContainer made and will not use.
func (d *Docker) removeContainer(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
}

// Wait blocks until the container's main process exits (or ctx ends) and returns its exit code:
// how the runner learns that a workspace's IDE died.
func (c *Container) Wait(ctx context.Context) (int, error) {
	if c == nil || c.d == nil {
		return -1, ErrNeedsDocker
	}
	waitc, errc := c.d.cli.ContainerWait(ctx, c.ID, container.WaitConditionNotRunning)
	select {
	case res := <-waitc:
		if res.Error != nil {
			return -1, fmt.Errorf("executor: wait for %q: %s", c.name, res.Error.Message)
		}
		return int(res.StatusCode), nil
	case err := <-errc:
		return -1, fmt.Errorf("executor: wait for %q: %w", c.name, err)
	}
}

// hasShell reports whether `sh` is on the PATH of the created (not yet started) container. The
// engine only finds out when it starts the process, and with the init process in front even
// that start succeeds: the container would just exit with 127 a moment later.
func (d *Docker) hasShell(ctx context.Context, id string) (bool, error) {
	info, err := d.cli.ContainerInspect(ctx, id)
	if err != nil {
		return false, err
	}
	searchPath := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	if info.Config != nil {
		for _, kv := range info.Config.Env {
			if v, ok := strings.CutPrefix(kv, "PATH="); ok {
				searchPath = v
			}
		}
	}
	for _, dir := range strings.Split(searchPath, ":") {
		if !path.IsAbs(dir) {
			continue
		}
		st, err := d.cli.ContainerStatPath(ctx, id, path.Join(dir, "sh"))
		if err == nil && !st.Mode.IsDir() {
			return true, nil
		}
		if err != nil && !client.IsErrNotFound(err) {
			return false, err
		}
	}
	return false, nil
}

// ExecSpec is a process to run in a started container.
type ExecSpec struct {
	Cmd []string
	// Env is added to the container's environment.
	Env map[string]string
	// WorkingDir defaults to the container's, the checkout's mount.
	WorkingDir string
	// TTY gives the process a pseudo-terminal: its output is then the raw terminal stream (one
	// stream, colours and all) and Resize changes its size. Rows and Cols are the initial size.
	TTY        bool
	Rows, Cols uint
	// Stderr, when set and TTY is not, receives the process's stderr instead of the session's
	// reader. A slow writer holds up stdout too: both come through one stream.
	Stderr io.Writer
}

// ExecSession is a running Exec: reading gives its output, writing feeds its stdin. Read and
// Write may be used from different goroutines; Resize, Wait and Close from any.
type ExecSession struct {
	c   *Container
	id  string
	tty bool
	hj  types.HijackedResponse
	// out is what Read returns: the hijacked stream itself with a TTY, else the demuxed one.
	out io.Reader
	// ended is closed when the output has ended (the process exited or the stream broke).
	ended     chan struct{}
	endOnce   sync.Once
	closeOnce sync.Once
	closeErr  error
}

// Exec runs spec in the container, with its stdin, stdout and stderr on a stream hijacked from
// the engine's exec API.
func (c *Container) Exec(ctx context.Context, spec ExecSpec) (*ExecSession, error) {
	if c == nil || c.d == nil {
		return nil, ErrNeedsDocker
	}
	if len(spec.Cmd) == 0 {
		return nil, fmt.Errorf("executor: exec in %q: no command", c.name)
	}
	opts := container.ExecOptions{
		Cmd:          spec.Cmd,
		Env:          execEnv(spec.Env),
		WorkingDir:   spec.WorkingDir,
		Tty:          spec.TTY,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
	}
	var size *[2]uint
	if spec.TTY && spec.Rows > 0 && spec.Cols > 0 {
		size = &[2]uint{spec.Rows, spec.Cols}
	}
	opts.ConsoleSize = size
	created, err := c.d.cli.ContainerExecCreate(ctx, c.ID, opts)
	if err != nil {
		return nil, fmt.Errorf("executor: exec in %q: %w", c.name, err)
	}
	hj, err := c.d.cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{Tty: spec.TTY, ConsoleSize: size})
	if err != nil {
		return nil, fmt.Errorf("executor: exec in %q: %w", c.name, err)
	}
	s := &ExecSession{c: c, id: created.ID, tty: spec.TTY, hj: hj, ended: make(chan struct{})}
	if spec.TTY {
		s.out = hj.Reader
	} else {
		// Without a TTY the engine multiplexes stdout and stderr in frames with a header each;
		// the reader gets the payloads.
		pr, pw := io.Pipe()
		errOut := io.Writer(pw)
		if spec.Stderr != nil {
			errOut = spec.Stderr
		}
		go func() {
			defer s.end()
			_, err := stdcopy.StdCopy(pw, errOut, hj.Reader)
			pw.CloseWithError(err) // nil: the reader gets io.EOF
		}()
		s.out = pr
	}
	if size != nil && versions.LessThan(c.d.cli.ClientVersion(), "1.42") {
		// Engines before API 1.42 know no ConsoleSize: set it the old way. The engine waits
		// for the process to start before it resizes.
		if err := s.Resize(spec.Rows, spec.Cols); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// execEnv is the exec's extra env as KEY=VALUE, sorted so that the request is reproducible.
func execEnv(env map[string]string) []string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return out
}

func (s *ExecSession) end() { s.endOnce.Do(func() { close(s.ended) }) }

// Read reads the process's output: the raw terminal stream with a TTY, else stdout and stderr
// (unless ExecSpec.Stderr took it) as they arrive. io.EOF once the process has exited.
func (s *ExecSession) Read(p []byte) (int, error) {
	n, err := s.out.Read(p)
	if err != nil && s.tty {
		s.end()
	}
	return n, err
}

// Write writes to the process's stdin (with a TTY: keystrokes, so "\x03" is Ctrl-C).
func (s *ExecSession) Write(p []byte) (int, error) { return s.hj.Conn.Write(p) }

// CloseWrite closes the process's stdin (end of file for `cat`), leaving the output open.
func (s *ExecSession) CloseWrite() error { return s.hj.CloseWrite() }

// Resize sets the terminal's size; the process gets SIGWINCH. An error for a session without a
// TTY. It takes no context because it is called for each resize message of a terminal and
// must not hang one: it gives the engine ten seconds.
func (s *ExecSession) Resize(rows, cols uint) error {
	if !s.tty {
		return fmt.Errorf("executor: resize exec in %q: it has no TTY", s.c.name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.c.d.cli.ContainerExecResize(ctx, s.id, container.ResizeOptions{Height: rows, Width: cols}); err != nil {
		return fmt.Errorf("executor: resize exec in %q: %w", s.c.name, err)
	}
	return nil
}

// execState is what the engine knows of an exec.
type execState struct {
	started, exited bool
	pid, code       int
}

func (s *ExecSession) state(ctx context.Context) (execState, error) {
	info, err := s.c.d.cli.ContainerExecInspect(ctx, s.id)
	if err != nil {
		return execState{}, err
	}
	st := execState{pid: info.Pid, code: info.ExitCode}
	// The engine reports "not running" both before the process starts and after it exits; a pid
	// (kept after the exit) or an exit code (126 and 127 when it could not start) tell the two
	// apart, and so does the end of its output.
	ended := false
	select {
	case <-s.ended:
		ended = true
	default:
	}
	st.exited = !info.Running && (info.Pid != 0 || info.ExitCode != 0 || ended)
	// Running comes a moment before the pid, which Close needs.
	st.started = (info.Running && info.Pid != 0) || st.exited
	return st, nil
}

// Wait blocks until the process has exited (or ctx ends) and returns its exit code. It does not
// need the output to be read, and output not read yet can still be read after it returns. Once
// the container is removed the engine forgets its execs: Wait then returns an error.
func (s *ExecSession) Wait(ctx context.Context) (int, error) {
	// The engine has no wait for execs: poll, quickly at first (most commands are short), then
	// every half second, and at once when the output ends.
	delay := 10 * time.Millisecond
	for {
		st, err := s.state(ctx)
		if err != nil {
			return -1, fmt.Errorf("executor: wait for exec in %q: %w", s.c.name, err)
		}
		if st.exited {
			return st.code, nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return -1, ctx.Err()
		case <-s.ended:
			t.Stop()
		case <-t.C:
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// Close ends the session and its process: stdin is closed, then the process gets SIGHUP with a
// TTY (what closing a terminal does: a shell hangs up its jobs) or SIGTERM without, and SIGKILL
// if it is still there two seconds later. The engine does not do this itself: an exec outlives
// its stream, and a browser tab closed on a shell would leave it running in the workspace.
func (s *ExecSession) Close() error {
	s.closeOnce.Do(func() {
		s.hj.CloseWrite()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.closeErr = s.kill(ctx)
		s.hj.Close()
		s.end()
	})
	return s.closeErr
}

func (s *ExecSession) kill(ctx context.Context) error {
	st, err := s.waitStarted(ctx)
	if err != nil {
		if isGone(err) {
			return nil // the container is gone, and its processes with it
		}
		return fmt.Errorf("executor: close exec in %q: %w", s.c.name, err)
	}
	if st.exited {
		return nil
	}
	first := syscall.SIGTERM
	if s.tty {
		first = syscall.SIGHUP
	}
	pid := st.pid
	for _, sig := range []syscall.Signal{first, syscall.SIGKILL} {
		if err := signalInContainer(s.c.ID, pid, sig); err != nil {
			return fmt.Errorf("executor: close exec in %q: %w", s.c.name, err)
		}
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			st, err := s.state(ctx)
			if isGone(err) || (err == nil && st.exited) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("executor: close exec in %q: %w", s.c.name, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return fmt.Errorf("executor: close exec in %q: pid %d survives SIGKILL", s.c.name, pid)
}

// waitStarted returns the exec's state once it has started (or exited): a session closed right
// after Exec may be closed before the engine has started the process, which would then run on.
func (s *ExecSession) waitStarted(ctx context.Context) (execState, error) {
	for {
		st, err := s.state(ctx)
		if err != nil || st.started {
			return st, err
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// signalInContainer sends sig to pid, a host pid the engine named for a process of container id,
// and to its process group when it leads one (a TTY's shell does: its foreground job follows the
// hangup through the terminal, and without a TTY the children of a script die with it).
func signalInContainer(id string, pid int, sig syscall.Signal) error {
	proc, err := openContainerProc(id, pid)
	if err != nil {
		return err
	}
	defer proc.Close()
	target := pid
	if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
		target = -pid
	}
	if err := syscall.Kill(target, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal pid %d: %w", pid, err)
	}
	return nil
}

// openContainerProc opens /proc/<pid> after checking that the process is in container id's
// cgroup: the engine's pids are only the agent's when both share a PID namespace, and a pid of
// another namespace names some other process here. Files opened with openat on the returned
// directory are that process's even if it exits and its pid is reused (they fail instead); a
// signal sent by pid number right after the check has only that instant's window.
func openContainerProc(id string, pid int) (*os.File, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("the engine gave no pid")
	}
	dir, err := os.Open(fmt.Sprintf("/proc/%d", pid))
	if err != nil {
		return nil, fmt.Errorf("process %d of the container is not visible to the agent (does it share the engine's PID namespace?): %w", pid, err)
	}
	fd, err := unix.Openat(int(dir.Fd()), "cgroup", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		dir.Close()
		return nil, fmt.Errorf("read cgroup of pid %d: %w", pid, err)
	}
	f := os.NewFile(uintptr(fd), "cgroup")
	cg, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		dir.Close()
		return nil, fmt.Errorf("read cgroup of pid %d: %w", pid, err)
	}
	if !strings.Contains(string(cg), id) {
		dir.Close()
		return nil, fmt.Errorf("pid %d is not in container %.12s's cgroup: the agent must run in the engine's PID namespace", pid, id)
	}
	return dir, nil
}

// DialPort connects to 127.0.0.1:port inside the container's network namespace: what a server in
// the container listens on, with no published port, and with network mode "none" too. The agent
// must run as root on the engine's host.
func (c *Container) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if c == nil || c.d == nil {
		return nil, ErrNeedsDocker
	}
	if port <= 0 || port > 65535 {
		return nil, fmt.Errorf("executor: dial port %d in %q: not a port", port, c.name)
	}
	info, err := c.d.cli.ContainerInspect(ctx, c.ID)
	if err != nil {
		return nil, fmt.Errorf("executor: dial port %d in %q: %w", port, c.name, err)
	}
	if info.State == nil || !info.State.Running {
		return nil, fmt.Errorf("executor: dial port %d in %q: the container is not running", port, c.name)
	}
	proc, err := openContainerProc(c.ID, info.State.Pid)
	if err != nil {
		return nil, fmt.Errorf("executor: dial port %d in %q: %w", port, c.name, err)
	}
	nsfd, err := unix.Openat(int(proc.Fd()), "ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	proc.Close()
	if err != nil {
		return nil, fmt.Errorf("executor: dial port %d in %q: open its network namespace: %w", port, c.name, err)
	}
	ns := os.NewFile(uintptr(nsfd), "netns")
	defer ns.Close()

	sock, err := socketInNetns(ns)
	if err != nil {
		return nil, fmt.Errorf("executor: dial port %d in %q: %w", port, c.name, err)
	}
	// A socket stays in the namespace it was created in: connecting it needs no namespace, so it
	// happens here, on any thread, with the runtime's poller and ctx.
	conn, err := connectLoopback(ctx, sock, port)
	if err != nil {
		return nil, fmt.Errorf("executor: dial port %d in %q: %w", port, c.name, err)
	}
	return conn, nil
}

// socketInNetns creates a TCP socket in the network namespace ns. The namespace belongs to the
// thread, not the process: the work is done on a goroutine locked to its thread, which enters ns,
// creates the socket (a net.Dialer cannot be told where: it creates its socket on whatever thread
// runs it, and a Control func runs after the socket exists) and goes back to the namespace it was
// in before the thread is unlocked.
func socketInNetns(ns *os.File) (*os.File, error) {
	type result struct {
		fd  int
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		// This thread's own namespace, the agent's: it must be back in it before the runtime may
		// run anything else on it.
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{-1, fmt.Errorf("open the agent's network namespace: %w", err)}
			return
		}
		defer own.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread() // setns failed: the thread never left
			done <- result{-1, fmt.Errorf("enter the container's network namespace: %w", err)}
			return
		}
		fd, sockErr := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
			// The thread is stuck in the container's namespace. Unlocking it would let the
			// runtime run other goroutines there, and every socket they made (the agent's
			// connection to the server, its HTTP clients) would silently live in the
			// container's network. Returning while still locked makes the runtime end the
			// thread instead.
			if sockErr == nil {
				unix.Close(fd)
			}
			done <- result{-1, fmt.Errorf("return to the agent's network namespace: %w", err)}
			return
		}
		runtime.UnlockOSThread()
		if sockErr != nil {
			done <- result{-1, fmt.Errorf("create a socket in the container's network namespace: %w", sockErr)}
			return
		}
		done <- result{fd, nil}
	}()
	res := <-done
	if res.err != nil {
		return nil, res.err
	}
	// A non-blocking fd is registered with the runtime's poller by os.NewFile.
	return os.NewFile(uintptr(res.fd), "tcp-in-container"), nil
}

// connectLoopback connects sock to 127.0.0.1:port and makes a net.Conn of it. sock is closed.
func connectLoopback(ctx context.Context, sock *os.File, port int) (net.Conn, error) {
	defer sock.Close() // net.FileConn has its own copy of the fd
	raw, err := sock.SyscallConn()
	if err != nil {
		return nil, err
	}
	sa := &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}
	var connErr error
	if err := raw.Control(func(fd uintptr) { connErr = unix.Connect(int(fd), sa) }); err != nil {
		return nil, err
	}
	if errors.Is(connErr, unix.EINPROGRESS) {
		// Wait for the handshake as the net package does: writable, then SO_ERROR, and a peer
		// name to be sure (an unconnected socket is writable too).
		stop := context.AfterFunc(ctx, func() { sock.SetWriteDeadline(time.Unix(1, 0)) })
		defer stop()
		connErr = nil
		werr := raw.Write(func(fd uintptr) bool {
			soerr, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
			if err != nil {
				connErr = err
				return true
			}
			switch e := syscall.Errno(soerr); e {
			case 0, unix.EISCONN:
				if _, err := unix.Getpeername(int(fd)); err == nil {
					return true
				}
				return false
			case unix.EINPROGRESS, unix.EALREADY, unix.EINTR:
				return false
			default:
				connErr = e
				return true
			}
		})
		if werr != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, werr
		}
	}
	if connErr != nil {
		return nil, fmt.Errorf("connect to 127.0.0.1:%d: %w", port, connErr)
	}
	conn, err := net.FileConn(sock)
	if err != nil {
		return nil, fmt.Errorf("wrap the connection: %w", err)
	}
	return conn, nil
}
