package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/crypto/ssh"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// hostTarget is a Target whose processes run on the test's host, on a real pty when asked for
// one, and whose ports are the host's loopback ports.
type hostTarget struct {
	path string // put in front of PATH (a fake sftp-server)

	mu      sync.Mutex
	specs   []executor.ExecSpec
	procs   []*hostProc
	dialed  []int
	resized chan [2]uint
}

func newHostTarget() *hostTarget { return &hostTarget{resized: make(chan [2]uint, 16)} }

func (h *hostTarget) Exec(ctx context.Context, spec executor.ExecSpec) (Process, error) {
	if len(spec.Cmd) == 0 {
		return nil, errors.New("no command")
	}
	cmd := exec.Command(spec.Cmd[0], spec.Cmd[1:]...)
	cmd.Dir = spec.WorkingDir
	cmd.Env = os.Environ()
	if h.path != "" {
		cmd.Env = append(cmd.Env, "PATH="+h.path+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	for k, v := range spec.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &hostProc{cmd: cmd, done: make(chan struct{}), resized: h.resized}
	if spec.TTY {
		f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: uint16(spec.Rows), Cols: uint16(spec.Cols)})
		if err != nil {
			return nil, err
		}
		p.tty = f
	} else {
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		cmd.Stdout = w
		cmd.Stderr = w
		if spec.Stderr != nil {
			cmd.Stderr = spec.Stderr
		}
		// Its own group, so Close ends what a shell started too.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			r.Close()
			w.Close()
			return nil, err
		}
		w.Close()
		p.stdin, p.stdout = stdin, r
	}
	go p.wait()
	h.mu.Lock()
	h.specs = append(h.specs, spec)
	h.procs = append(h.procs, p)
	h.mu.Unlock()
	return p, nil
}

func (h *hostTarget) DialPort(ctx context.Context, port int) (net.Conn, error) {
	h.mu.Lock()
	h.dialed = append(h.dialed, port)
	h.mu.Unlock()
	var d net.Dialer
	return d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
}

func (h *hostTarget) lastSpec(t *testing.T) executor.ExecSpec {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.specs) == 0 {
		t.Fatal("nothing was started")
	}
	return h.specs[len(h.specs)-1]
}

func (h *hostTarget) allProcs() []*hostProc {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*hostProc(nil), h.procs...)
}

type hostProc struct {
	cmd     *exec.Cmd
	tty     *os.File // the pty's master; nil without one
	stdin   io.WriteCloser
	stdout  *os.File
	resized chan [2]uint

	done      chan struct{}
	code      int
	closeOnce sync.Once
	closed    chan struct{}
}

func (p *hostProc) wait() {
	err := p.cmd.Wait()
	p.code = 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		ws := ee.Sys().(syscall.WaitStatus)
		p.code = ws.ExitStatus()
		if ws.Signaled() {
			p.code = 128 + int(ws.Signal())
		}
	} else if err != nil {
		p.code = -1
	}
	close(p.done)
}

func (p *hostProc) Read(b []byte) (int, error) {
	if p.tty == nil {
		return p.stdout.Read(b)
	}
	n, err := p.tty.Read(b)
	// Linux ends a pty whose last process has gone with EIO.
	if errors.Is(err, syscall.EIO) {
		err = io.EOF
	}
	return n, err
}

func (p *hostProc) Write(b []byte) (int, error) {
	if p.tty != nil {
		return p.tty.Write(b)
	}
	return p.stdin.Write(b)
}

func (p *hostProc) CloseWrite() error {
	if p.tty != nil {
		return nil
	}
	return p.stdin.Close()
}

func (p *hostProc) Resize(rows, cols uint) error {
	if p.tty == nil {
		return errors.New("no tty")
	}
	if err := pty.Setsize(p.tty, &pty.Winsize{Rows: uint16(rows), Cols: uint16(cols)}); err != nil {
		return err
	}
	p.resized <- [2]uint{rows, cols}
	return nil
}

func (p *hostProc) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
		return p.code, nil
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

func (p *hostProc) Close() error {
	p.closeOnce.Do(func() {
		select {
		case <-p.done:
		default:
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		if p.tty != nil {
			p.tty.Close()
		} else {
			p.stdin.Close()
			p.stdout.Close()
		}
	})
	return nil
}

func (p *hostProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// sshServe runs ServeSSH for target on one loopback connection and returns a client of it and
// ServeSSH's result.
func sshServe(ctx context.Context, t *testing.T, target Target, cfg SSHConfig, auth ...ssh.AuthMethod) (*ssh.Client, <-chan error) {
	t.Helper()
	if cfg.HostKey == nil {
		key, err := NewHostKey()
		if err != nil {
			t.Fatal(err)
		}
		cfg.HostKey = key
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		served <- ServeSSH(ctx, target, conn, cfg)
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cc, chans, reqs, err := ssh.NewClientConn(conn, "workspace", &ssh.ClientConfig{
		User:            "root",
		Auth:            auth,
		HostKeyCallback: ssh.FixedHostKey(cfg.HostKey.PublicKey()),
		Timeout:         10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	client := ssh.NewClient(cc, chans, reqs)
	t.Cleanup(func() { client.Close() })
	return client, served
}

func newSession(t *testing.T, c *ssh.Client) *ssh.Session {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// collector gathers what a reader gives, for waitFor.
type collector struct {
	mu  sync.Mutex
	b   bytes.Buffer
	eof chan struct{}
}

func collect(r io.Reader) *collector {
	c := &collector{eof: make(chan struct{})}
	go func() {
		defer close(c.eof)
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			c.mu.Lock()
			c.b.Write(buf[:n])
			c.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return c
}

func (c *collector) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.String()
}

func (c *collector) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(c.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output within 10s; got %q", want, c.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func exitStatus(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var ee *ssh.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("not an exit: %v", err)
	}
	return ee.ExitStatus()
}

func TestSSHExec(t *testing.T) {
	target := newHostTarget()
	dir := t.TempDir()
	client, _ := sshServe(t.Context(), t, target, SSHConfig{WorkDir: dir, User: "dev", Env: map[string]string{"FROM_CFG": "cfg", "LANG": "C"}})

	s := newSession(t, client)
	out, err := s.Output("echo hi")
	if err != nil || string(out) != "hi\n" {
		t.Fatalf("echo hi = %q, %v", out, err)
	}
	if spec := target.lastSpec(t); spec.TTY || spec.WorkingDir != dir || strings.Join(spec.Cmd, " ") != "/bin/sh -c echo hi" {
		t.Fatalf("spec = %+v", spec)
	}

	s = newSession(t, client)
	if code := exitStatus(t, s.Run("exit 3")); code != 3 {
		t.Fatalf("exit status %d, want 3", code)
	}

	s = newSession(t, client)
	var stdout, stderr bytes.Buffer
	s.Stdout, s.Stderr = &stdout, &stderr
	if err := s.Setenv("LANG", "en_US.UTF-8"); err != nil {
		t.Fatal(err)
	}
	if err := s.Run(`echo "$FROM_CFG $LANG $USER $LOGNAME $(pwd)"; echo oops >&2`); err != nil {
		t.Fatal(err)
	}
	if want := "cfg en_US.UTF-8 dev dev " + dir + "\n"; stdout.String() != want || stderr.String() != "oops\n" {
		t.Fatalf("stdout %q (want %q), stderr %q", stdout.String(), want, stderr.String())
	}
}

func TestSSHStdinEOFReachesTheProcess(t *testing.T) {
	client, _ := sshServe(t.Context(), t, newHostTarget(), SSHConfig{})
	s := newSession(t, client)
	s.Stdin = strings.NewReader("line one\nline two\n")
	out, err := s.Output("cat; echo done")
	if err != nil || string(out) != "line one\nline two\ndone\n" {
		t.Fatalf("cat = %q, %v", out, err)
	}
}

func TestSSHShellOnPTY(t *testing.T) {
	target := newHostTarget()
	client, _ := sshServe(t.Context(), t, target, SSHConfig{})
	s := newSession(t, client)
	if err := s.RequestPty("xterm", 24, 80, ssh.TerminalModes{ssh.ECHO: 1}); err != nil {
		t.Fatal(err)
	}
	stdin, err := s.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := s.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	out := collect(stdout)
	if err := s.Shell(); err != nil {
		t.Fatal(err)
	}
	spec := target.lastSpec(t)
	if !spec.TTY || spec.Rows != 24 || spec.Cols != 80 || spec.Env["TERM"] != "xterm" || strings.Join(spec.Cmd, " ") != strings.Join(sshShell, " ") {
		t.Fatalf("spec = %+v", spec)
	}
	// The terminal echoes what is typed, and the shell runs it.
	io.WriteString(stdin, "echo hello-$((6*7))\n")
	out.waitFor(t, "echo hello-$((6*7))")
	out.waitFor(t, "hello-42")

	if err := s.WindowChange(40, 120); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-target.resized:
		if got != [2]uint{40, 120} {
			t.Fatalf("Resize(%v), want 40 rows, 120 cols", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("window-change did not reach Resize")
	}
	io.WriteString(stdin, "stty size\n")
	out.waitFor(t, "40 120")

	io.WriteString(stdin, "exit 5\n")
	if code := exitStatus(t, s.Wait()); code != 5 {
		t.Fatalf("exit status %d, want 5", code)
	}
}

// echoServer accepts connections on loopback and sends back what each sends, until its EOF.
func echoServer(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestSSHDirectTCPIP(t *testing.T) {
	target := newHostTarget()
	client, _ := sshServe(t.Context(), t, target, SSHConfig{})
	port := echoServer(t)
	for _, host := range []string{"127.0.0.1", "localhost"} {
		c, err := client.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		if _, err := io.WriteString(c, "ping "+host); err != nil {
			t.Fatal(err)
		}
		// The client's end of stream reaches the server as a half-close, and the reply still
		// comes back.
		if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(c)
		if err != nil || string(got) != "ping "+host {
			t.Fatalf("%s: echo = %q, %v", host, got, err)
		}
		c.Close()
	}

	_, err := client.Dial("tcp", "10.1.2.3:80")
	var oce *ssh.OpenChannelError
	if !errors.As(err, &oce) || oce.Reason != ssh.Prohibited {
		t.Fatalf("dial another host: %v, want a prohibited open", err)
	}

	// A port nothing listens on is a failed open, as with OpenSSH.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if _, err := client.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(closed))); !errors.As(err, &oce) || oce.Reason != ssh.ConnectionFailed {
		t.Fatalf("dial a closed port: %v, want a failed open", err)
	}
	target.mu.Lock()
	dialed := fmt.Sprint(target.dialed)
	target.mu.Unlock()
	if want := fmt.Sprint([]int{port, port, closed}); dialed != want {
		t.Fatalf("DialPort calls %s, want %s", dialed, want)
	}
}

func TestSSHRefusesRemoteForwardingAndAnswersKeepalives(t *testing.T) {
	client, _ := sshServe(t.Context(), t, newHostTarget(), SSHConfig{})
	if ln, err := client.Listen("tcp", "127.0.0.1:8080"); err == nil {
		ln.Close()
		t.Fatal("remote forwarding was accepted")
	}
	if ok, _, err := client.SendRequest("keepalive@openssh.com", true, nil); ok || err != nil {
		t.Fatalf("global keepalive = %v, %v; want a failure reply", ok, err)
	}
	s := newSession(t, client)
	if ok, err := s.SendRequest("keepalive@openssh.com", true, nil); ok || err != nil {
		t.Fatalf("channel keepalive = %v, %v; want a failure reply", ok, err)
	}
	// The connection is still good.
	if out, err := s.Output("echo still here"); err != nil || string(out) != "still here\n" {
		t.Fatalf("after keepalives: %q, %v", out, err)
	}
}

func TestSSHAcceptsClientsThatOfferKeysOrPasswords(t *testing.T) {
	key, err := NewHostKey() // any key will do as the client's
	if err != nil {
		t.Fatal(err)
	}
	client, _ := sshServe(t.Context(), t, newHostTarget(), SSHConfig{}, ssh.PublicKeys(key), ssh.Password("x"))
	if out, err := newSession(t, client).Output("echo in"); err != nil || string(out) != "in\n" {
		t.Fatalf("%q, %v", out, err)
	}
}

func TestSSHSFTPSubsystem(t *testing.T) {
	hostHasOne := false
	for _, p := range []string{"/usr/lib/openssh/sftp-server", "/usr/lib/ssh/sftp-server", "/usr/libexec/openssh/sftp-server", "/usr/libexec/sftp-server"} {
		if _, err := os.Stat(p); err == nil {
			hostHasOne = true
		}
	}
	if _, err := exec.LookPath("sftp-server"); err == nil {
		hostHasOne = true
	}
	if !hostHasOne {
		client, _ := sshServe(t.Context(), t, newHostTarget(), SSHConfig{})
		if err := newSession(t, client).RequestSubsystem("sftp"); err == nil {
			t.Fatal("sftp accepted without an sftp-server")
		}
	}

	// An sftp-server on the PATH is the subsystem, without a terminal even if one was asked.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sftp-server"), []byte("#!/bin/sh\nread line\necho \"sftp got $line\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	target := newHostTarget()
	target.path = dir
	client, _ := sshServe(t.Context(), t, target, SSHConfig{})
	s := newSession(t, client)
	if err := s.RequestPty("xterm", 24, 80, nil); err != nil {
		t.Fatal(err)
	}
	// RequestSubsystem starts no copying: the pipes are the channel itself.
	stdin, err := s.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := s.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RequestSubsystem("sftp"); err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdin, "hello\n")
	if out, err := io.ReadAll(stdout); err != nil || string(out) != "sftp got hello\n" {
		t.Fatalf("sftp = %q, %v", out, err)
	}
	if spec := target.lastSpec(t); spec.TTY || spec.Cmd[0] != filepath.Join(dir, "sftp-server") {
		t.Fatalf("spec = %+v", spec)
	}
}

func TestSSHEndsProcessesWhenTheClientGoes(t *testing.T) {
	target := newHostTarget()
	client, served := sshServe(t.Context(), t, target, SSHConfig{})
	s := newSession(t, client)
	if err := s.Start("sleep 60"); err != nil {
		t.Fatal(err)
	}
	client.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("ServeSSH = %v after the client left", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeSSH did not return after the client left")
	}
	for _, p := range target.allProcs() {
		if !p.exited() {
			t.Fatalf("%v still runs", p.cmd.Args)
		}
	}
}

func TestSSHEndsEverythingWhenCancelled(t *testing.T) {
	target := newHostTarget()
	ctx, cancel := context.WithCancel(t.Context())
	client, served := sshServe(ctx, t, target, SSHConfig{})
	s := newSession(t, client)
	if err := s.Start("sleep 60"); err != nil {
		t.Fatal(err)
	}
	port := echoServer(t)
	fwd, err := client.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-served:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("ServeSSH = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeSSH did not return when cancelled")
	}
	for _, p := range target.allProcs() {
		if !p.exited() {
			t.Fatalf("%v still runs", p.cmd.Args)
		}
	}
	if _, err := io.ReadAll(fwd); err != nil && !errors.Is(err, io.EOF) {
		t.Logf("forwarded connection ended with %v", err)
	}
	if err := s.Wait(); err == nil {
		t.Fatal("the session ended well after a cancel")
	}
}

// TestSSHProxyHelper is not a test: TestSSHWithOpenSSH runs the test binary as the ssh client's
// ProxyCommand, and this connects its stdin and stdout to the address in the variable.
func TestSSHProxyHelper(t *testing.T) {
	addr := os.Getenv("NIMBUS_TEST_SSH_PROXY")
	if addr == "" {
		t.Skip("a helper process of TestSSHWithOpenSSH")
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	go func() {
		io.Copy(c, os.Stdin)
		c.(*net.TCPConn).CloseWrite()
	}()
	io.Copy(os.Stdout, c)
	os.Exit(0)
}

// TestSSHWithOpenSSH checks what the unit tests cannot: that OpenSSH's client, as VS Code and
// the others run it, gets along with the server (auth, keepalives, exit status, -W forwarding).
func TestSSHWithOpenSSH(t *testing.T) {
	sshBin, err := exec.LookPath("ssh")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no OpenSSH client (e2e/testenv.sh installs openssh-client)")
		}
		t.Skip("no OpenSSH client")
	}
	key, err := NewHostKey()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	served := make(chan error, 16)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { served <- ServeSSH(t.Context(), newHostTarget(), conn, SSHConfig{HostKey: key}) }()
		}
	}()
	home := t.TempDir()
	sshCmd := func(stdin string, args ...string) (string, int) {
		t.Helper()
		base := []string{"-F", "/dev/null",
			"-o", "ProxyCommand=" + os.Args[0] + " -test.run=^TestSSHProxyHelper$",
			"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
			"-o", "LogLevel=ERROR", "-o", "ServerAliveInterval=1", "-o", "ConnectTimeout=10"}
		cmd := exec.Command(sshBin, append(base, args...)...)
		cmd.Env = append(os.Environ(), "NIMBUS_TEST_SSH_PROXY="+ln.Addr().String(), "HOME="+home)
		cmd.Stdin = strings.NewReader(stdin)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		if stderr.Len() > 0 {
			t.Logf("ssh %v: stderr %q", args, stderr.String())
		}
		select {
		case err := <-served:
			if err != nil {
				t.Fatalf("ServeSSH = %v, want an orderly end", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("ServeSSH did not return after ssh ended")
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	if out, code := sshCmd("", "root@workspace", "echo hi"); out != "hi\n" || code != 0 {
		t.Fatalf("echo hi = %q, exit %d", out, code)
	}
	// Two keepalive intervals pass while it sleeps.
	if out, code := sshCmd("typed\n", "root@workspace", "sleep 2.5; cat; exit 3"); out != "typed\n" || code != 3 {
		t.Fatalf("cat = %q, exit %d; want exit 3", out, code)
	}
	port := echoServer(t)
	if out, code := sshCmd("through -W", "-W", "127.0.0.1:"+strconv.Itoa(port), "root@workspace"); out != "through -W" || code != 0 {
		t.Fatalf("-W = %q, exit %d", out, code)
	}
}

// TestSSHInContainer runs the server against a real workspace container.
func TestSSHInContainer(t *testing.T) {
	host := testenv.DockerHost(t)
	img := testenv.Image(t)
	ctx := context.Background()
	d, err := executor.NewDocker(ctx, host, "test-"+strings.ReplaceAll(t.Name(), "/", "-"))
	if err != nil {
		t.Fatal(err)
	}
	d.NetworkMode = "none"
	t.Cleanup(func() { d.Close() })
	c, err := d.StartContainer(ctx, executor.Step{Name: "ws", Image: img, Checkout: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(context.Background()) })
	client, served := sshServe(t.Context(), t, ContainerTarget(c), SSHConfig{Env: map[string]string{"GREETING": "hi"}})

	if out, err := newSession(t, client).Output("echo $GREETING"); err != nil || string(out) != "hi\n" {
		t.Fatalf("echo hi = %q, %v", out, err)
	}
	if code := exitStatus(t, newSession(t, client).Run("exit 3")); code != 3 {
		t.Fatalf("exit status %d, want 3", code)
	}
	s := newSession(t, client)
	var stdout, stderr bytes.Buffer
	s.Stdout, s.Stderr = &stdout, &stderr
	s.Stdin = strings.NewReader("to cat\n")
	if err := s.Run("cat; echo oops >&2"); err != nil || stdout.String() != "to cat\n" || stderr.String() != "oops\n" {
		t.Fatalf("cat = %q, stderr %q, %v", stdout.String(), stderr.String(), err)
	}

	// busybox has no sftp-server.
	if err := newSession(t, client).RequestSubsystem("sftp"); err == nil {
		t.Fatal("sftp accepted without an sftp-server")
	}

	// A port forwarded into the container (which has no network but its loopback).
	srv := newSession(t, client)
	if err := srv.Start("exec nc -ll -p 8080 -e cat"); err != nil {
		t.Fatal(err)
	}
	var fwd net.Conn
	for deadline := time.Now().Add(10 * time.Second); ; {
		if fwd, err = client.Dial("tcp", "localhost:8080"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("forward to nc in the container: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	io.WriteString(fwd, "ping")
	fwd.(interface{ CloseWrite() error }).CloseWrite()
	if got, err := io.ReadAll(fwd); err != nil || string(got) != "ping" {
		t.Fatalf("through the forwarded port: %q, %v", got, err)
	}
	fwd.Close()
	srv.Close()

	s = newSession(t, client)
	if err := s.RequestPty("xterm", 24, 80, nil); err != nil {
		t.Fatal(err)
	}
	stdin, err := s.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdoutPipe, err := s.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	out := collect(stdoutPipe)
	if err := s.Shell(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdin, "echo hello-$((6*7))\n")
	out.waitFor(t, "hello-42")
	if err := s.WindowChange(40, 120); err != nil {
		t.Fatal(err)
	}
	// The resize is asynchronous: ask until the shell sees it.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "\n40 120") {
		if time.Now().After(deadline) {
			t.Fatalf("no new size in %q", out.String())
		}
		io.WriteString(stdin, "stty size\n")
		time.Sleep(200 * time.Millisecond)
	}
	io.WriteString(stdin, "exit 4\n")
	if code := exitStatus(t, s.Wait()); code != 4 {
		t.Fatalf("shell exit status %d, want 4", code)
	}

	client.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ServeSSH did not return after the client left")
	}
}
