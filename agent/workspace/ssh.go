package workspace

// The agent's SSH server: `nimbus workspace ssh`, and OpenSSH, VS Code Remote-SSH, Cursor or
// JetBrains Gateway with `nimbus workspace ssh --stdio` as their ProxyCommand, speak SSH to it
// over the server's WebSocket and the agent's tunnel. It runs in the agent's process, not in the
// container: images need no sshd, no keys and no user database, and every process it starts is a
// Target.Exec like a terminal's.

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/nimbus-build/nimbus/agent/executor"
)

// SSHConfig is what ServeSSH needs.
type SSHConfig struct {
	// HostKey is the key the server proves itself with. Clients are told not to check it (the
	// Nimbus server already authenticated the stream), but keeping one per workspace spares
	// those that do a "host key changed" warning on every reconnect.
	HostKey ssh.Signer
	// WorkDir is where shells and commands start; "" is the container's working directory (the
	// workspace mount).
	WorkDir string
	// User, when set, is USER and LOGNAME of the processes. They run as the container's user
	// either way: the name a client logs in with means nothing here.
	User string
	// Env is added to the environment of every process; what the client sends (env requests:
	// LANG, LC_*) overrides it.
	Env map[string]string
	Log *slog.Logger
}

// NewHostKey makes a host key for SSHConfig.HostKey.
func NewHostKey() (ssh.Signer, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("workspace ssh: generate a host key: %w", err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, fmt.Errorf("workspace ssh: host key: %w", err)
	}
	return s, nil
}

// sshShell is what a "shell" request runs: bash where the image has it, as OpenSSH would run
// the user's login shell.
var sshShell = []string{"/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi"}

// sshFindSFTPServer prints where the image's sftp-server is: on the PATH, or where Debian, Arch,
// Alpine and Fedora install it (outside the PATH).
const sshFindSFTPServer = `for p in "$(command -v sftp-server)" /usr/lib/openssh/sftp-server /usr/lib/ssh/sftp-server /usr/libexec/openssh/sftp-server /usr/libexec/sftp-server; do
  if [ -n "$p" ] && [ -x "$p" ]; then echo "$p"; exit 0; fi
done
exit 1`

// sshHandshakeTimeout bounds a client that connects and never finishes the handshake.
const sshHandshakeTimeout = 30 * time.Second

// ServeSSH serves one SSH connection into t until the client disconnects or ctx ends, then closes
// conn and ends every process and forwarded connection it started. A connection that ends
// normally is no error; a cancelled ctx returns ctx.Err().
//
// The Nimbus server has authenticated and authorized the user before the stream exists, so the
// SSH server takes any client: "none" authentication, and any key, password or keyboard answer
// of clients that insist on offering one.
func ServeSSH(ctx context.Context, t Target, conn net.Conn, cfg SSHConfig) error {
	defer conn.Close()
	if cfg.HostKey == nil {
		return errors.New("workspace ssh: no host key")
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	parent := ctx
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	// Closing conn is how both a cancelled ctx and a stuck handshake end the connection:
	// x/crypto/ssh takes no context.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	timer := time.AfterFunc(sshHandshakeTimeout, func() { conn.Close() })
	sconn, chans, reqs, err := ssh.NewServerConn(conn, sshServerConfig(cfg.HostKey))
	timer.Stop()
	if err != nil {
		if parent.Err() != nil {
			return parent.Err()
		}
		return fmt.Errorf("workspace ssh: handshake: %w", err)
	}
	defer sconn.Close()
	log.Debug("ssh connection", "client", string(sconn.ClientVersion()))

	s := &sshServer{ctx: ctx, t: t, cfg: cfg, log: log}
	go s.globalRequests(reqs)
	for nc := range chans {
		switch nc.ChannelType() {
		case "session":
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.session(nc)
			}()
		case "direct-tcpip":
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.directTCPIP(nc)
			}()
		default:
			nc.Reject(ssh.UnknownChannelType, fmt.Sprintf("channel type %q is not supported", nc.ChannelType()))
		}
	}
	// chans is closed: the connection has ended, and every channel with it.
	cancel()
	s.wg.Wait()
	err = sconn.Wait()
	if parent.Err() != nil {
		return parent.Err()
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isDisconnect(err) {
		return nil
	}
	return fmt.Errorf("workspace ssh: %w", err)
}

// isDisconnect reports whether err is the client's SSH_MSG_DISCONNECT (OpenSSH sends one when
// it is done): the end of a connection, not its failure. x/crypto/ssh's type for it is not
// exported, its message is.
func isDisconnect(err error) bool {
	return strings.HasPrefix(err.Error(), "ssh: disconnect, reason ")
}

func sshServerConfig(key ssh.Signer) *ssh.ServerConfig {
	c := &ssh.ServerConfig{
		NoClientAuth: true,
		// OpenSSH tries "none" first and takes its success, but other clients (and OpenSSH told
		// to use a key) may go straight to a method: every one succeeds.
		PublicKeyCallback: func(ssh.ConnMetadata, ssh.PublicKey) (*ssh.Permissions, error) { return nil, nil },
		PasswordCallback:  func(ssh.ConnMetadata, []byte) (*ssh.Permissions, error) { return nil, nil },
		KeyboardInteractiveCallback: func(ssh.ConnMetadata, ssh.KeyboardInteractiveChallenge) (*ssh.Permissions, error) {
			return nil, nil
		},
		ServerVersion: "SSH-2.0-Nimbus",
	}
	c.AddHostKey(key)
	return c
}

// sshServer is one connection's state.
type sshServer struct {
	ctx context.Context // ends with the connection
	t   Target
	cfg SSHConfig
	log *slog.Logger
	wg  sync.WaitGroup // the channels' goroutines
}

// globalRequests refuses every global request. Remote forwarding (tcpip-forward: ssh -R) would
// need the workspace to accept connections for the client, which nothing here can do; and
// keepalive@openssh.com wants any answer, OpenSSH's own server answers it with a failure too.
func (s *sshServer) globalRequests(reqs <-chan *ssh.Request) {
	for req := range reqs {
		if req.Type == "tcpip-forward" || req.Type == "streamlocal-forward@openssh.com" {
			s.log.Debug("ssh: remote port forwarding refused", "request", req.Type)
		}
		req.Reply(false, nil)
	}
}

// sshSession is a "session" channel: at most one shell, command or subsystem.
type sshSession struct {
	s      *sshServer
	ch     ssh.Channel
	ctx    context.Context // ends when the channel closes
	cancel context.CancelFunc

	mu      sync.Mutex
	env     map[string]string
	pty     *sshPTY // nil: no pty-req
	proc    Process // nil until started
	tty     bool    // proc has a terminal
	started bool
	done    chan struct{} // closed when run has ended

	closeOnce sync.Once
}

type sshPTY struct {
	term       string
	rows, cols uint32
}

func (s *sshServer) session(nc ssh.NewChannel) {
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	ss := &sshSession{s: s, ch: ch, ctx: ctx, cancel: cancel, env: map[string]string{}, done: make(chan struct{})}
	// reqs ends when the channel is closed, by the client, by run once the process has exited,
	// or with the connection: whatever still runs then is ended.
	defer func() {
		cancel()
		ss.closeProcess()
		ss.mu.Lock()
		started := ss.started
		ss.mu.Unlock()
		if started {
			<-ss.done
		}
		ch.Close()
	}()
	for req := range reqs {
		ok, proc := ss.handle(req)
		req.Reply(ok, nil)
		// Only after the reply: a command that ends at once must not close the channel before
		// the client has heard that it started (clients take that as a failed exec).
		if proc != nil {
			go ss.run(proc)
		}
	}
}

// handle answers one channel request; a non-nil Process has just been started for it.
func (ss *sshSession) handle(req *ssh.Request) (bool, Process) {
	switch req.Type {
	case "pty-req":
		var p struct {
			Term                      string
			Cols, Rows, Width, Height uint32
			Modes                     string
		}
		if err := ssh.Unmarshal(req.Payload, &p); err != nil {
			return false, nil
		}
		ss.mu.Lock()
		defer ss.mu.Unlock()
		if ss.started {
			return false, nil
		}
		ss.pty = &sshPTY{term: p.Term, rows: p.Rows, cols: p.Cols}
		return true, nil
	case "env":
		var e struct{ Name, Value string }
		if err := ssh.Unmarshal(req.Payload, &e); err != nil || !sshEnvNameOK(e.Name) {
			return false, nil
		}
		ss.mu.Lock()
		ss.env[e.Name] = e.Value
		ss.mu.Unlock()
		return true, nil
	case "shell":
		return ss.start(sshShell, true)
	case "exec":
		var e struct{ Command string }
		if err := ssh.Unmarshal(req.Payload, &e); err != nil {
			return false, nil
		}
		return ss.start([]string{"/bin/sh", "-c", e.Command}, true)
	case "subsystem":
		var e struct{ Name string }
		if err := ssh.Unmarshal(req.Payload, &e); err != nil || e.Name != "sftp" {
			return false, nil
		}
		path, err := ss.sftpServer()
		if err != nil {
			ss.s.log.Debug("ssh: no sftp subsystem", "err", err)
			return false, nil
		}
		// The SFTP protocol is binary: a terminal would mangle it.
		return ss.start([]string{path}, false)
	case "window-change":
		var w struct{ Cols, Rows, Width, Height uint32 }
		if err := ssh.Unmarshal(req.Payload, &w); err != nil {
			return false, nil
		}
		ss.resize(w.Rows, w.Cols)
		return true, nil
	case "signal":
		var sig struct{ Signal string }
		if err := ssh.Unmarshal(req.Payload, &sig); err != nil {
			return false, nil
		}
		ss.signal(sig.Signal)
		return true, nil
	}
	// keepalive@openssh.com among others: OpenSSH's server fails what it does not know, and its
	// client takes the failure as the answer it waited for.
	return false, nil
}

// sshEnvNameOK refuses names that would corrupt the NAME=value list the engine gets.
func sshEnvNameOK(name string) bool {
	return name != "" && !strings.ContainsAny(name, "=\x00")
}

// start runs cmd for the session, on a terminal when the client asked for one and ttyOK.
func (ss *sshSession) start(cmd []string, ttyOK bool) (bool, Process) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.started {
		return false, nil
	}
	tty := ss.pty != nil && ttyOK
	spec := executor.ExecSpec{Cmd: cmd, Env: ss.execEnv(tty), WorkingDir: ss.s.cfg.WorkDir, TTY: tty}
	if tty {
		spec.Rows, spec.Cols = uint(ss.pty.rows), uint(ss.pty.cols)
	} else {
		spec.Stderr = ss.ch.Stderr()
	}
	proc, err := ss.s.t.Exec(ss.ctx, spec)
	if err != nil {
		ss.s.log.Warn("ssh: start a process in the workspace", "cmd", cmd, "err", err)
		fmt.Fprintf(ss.ch.Stderr(), "nimbus: %v\r\n", err)
		return false, nil
	}
	ss.proc, ss.tty, ss.started = proc, tty, true
	return true, proc
}

// execEnv is the process's environment: the config's, then the client's, then the terminal's.
func (ss *sshSession) execEnv(tty bool) map[string]string {
	env := map[string]string{}
	for k, v := range ss.s.cfg.Env {
		env[k] = v
	}
	if u := ss.s.cfg.User; u != "" {
		env["USER"], env["LOGNAME"] = u, u
	}
	for k, v := range ss.env {
		env[k] = v
	}
	if tty {
		term := ss.pty.term
		if term == "" {
			term = "xterm-256color"
		}
		env["TERM"] = term
	}
	return env
}

// run copies the process's input and output over the channel and, once it has exited, tells the
// client its exit status and closes the channel.
func (ss *sshSession) run(proc Process) {
	defer close(ss.done)
	ss.mu.Lock()
	tty := ss.tty
	ss.mu.Unlock()
	go func() {
		io.Copy(proc, ss.ch)
		// On a terminal, end of input is a keystroke (^D), not a closed stream: OpenSSH's
		// server keeps the terminal open too, and the output must go on.
		if !tty {
			proc.CloseWrite()
		}
	}()
	if _, err := io.Copy(ss.ch, proc); err != nil {
		// The client is gone (or the stream broke): nobody will read what comes next.
		ss.closeProcess()
	}
	code, err := proc.Wait(ss.ctx)
	ss.ch.CloseWrite()
	if err == nil && code >= 0 {
		status := struct{ Status uint32 }{uint32(code)}
		ss.ch.SendRequest("exit-status", false, ssh.Marshal(&status))
	} else if err != nil && ss.ctx.Err() == nil {
		ss.s.log.Warn("ssh: wait for a process in the workspace", "err", err)
	}
	ss.ch.Close()
}

func (ss *sshSession) closeProcess() {
	ss.mu.Lock()
	proc := ss.proc
	ss.mu.Unlock()
	if proc == nil {
		return
	}
	ss.closeOnce.Do(func() {
		if err := proc.Close(); err != nil {
			ss.s.log.Warn("ssh: end a process in the workspace", "err", err)
		}
	})
}

func (ss *sshSession) resize(rows, cols uint32) {
	ss.mu.Lock()
	proc, tty := ss.proc, ss.tty
	if !ss.started && ss.pty != nil {
		ss.pty.rows, ss.pty.cols = rows, cols
	}
	ss.mu.Unlock()
	if proc == nil || !tty || rows == 0 || cols == 0 {
		return
	}
	if err := proc.Resize(uint(rows), uint(cols)); err != nil {
		ss.s.log.Debug("ssh: resize", "err", err)
	}
}

// sshSignaler is a Process that can be signalled. executor.ExecSession cannot (the engine has no
// API for it), so without it signals are approximated.
type sshSignaler interface {
	Signal(sig syscall.Signal) error
}

var sshSignals = map[string]syscall.Signal{
	"ABRT": syscall.SIGABRT, "ALRM": syscall.SIGALRM, "FPE": syscall.SIGFPE, "HUP": syscall.SIGHUP,
	"ILL": syscall.SIGILL, "INT": syscall.SIGINT, "KILL": syscall.SIGKILL, "PIPE": syscall.SIGPIPE,
	"QUIT": syscall.SIGQUIT, "SEGV": syscall.SIGSEGV, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1,
	"USR2": syscall.SIGUSR2,
}

// signal delivers a client's signal as well as the Process allows: by Signal when it has one;
// on a terminal, INT and QUIT as the keys that make the terminal send them (^C, ^\); HUP, TERM
// and KILL by ending the process (Close: SIGHUP or SIGTERM, then SIGKILL); others not at all.
func (ss *sshSession) signal(name string) {
	sig, ok := sshSignals[name]
	ss.mu.Lock()
	proc, tty := ss.proc, ss.tty
	ss.mu.Unlock()
	if !ok || proc == nil {
		return
	}
	if sp, ok := proc.(sshSignaler); ok {
		if err := sp.Signal(sig); err != nil {
			ss.s.log.Debug("ssh: signal", "signal", name, "err", err)
		}
		return
	}
	switch {
	case tty && sig == syscall.SIGINT:
		proc.Write([]byte{0x03})
	case tty && sig == syscall.SIGQUIT:
		proc.Write([]byte{0x1c})
	case sig == syscall.SIGHUP || sig == syscall.SIGTERM || sig == syscall.SIGKILL:
		ss.closeProcess()
	}
}

// sftpServer finds the image's sftp-server: an SFTP client (scp too, since OpenSSH 9) needs one
// in the container, and is told the subsystem failed when there is none.
func (ss *sshSession) sftpServer() (string, error) {
	ctx, cancel := context.WithTimeout(ss.ctx, 30*time.Second)
	defer cancel()
	proc, err := ss.s.t.Exec(ctx, executor.ExecSpec{Cmd: []string{"/bin/sh", "-c", sshFindSFTPServer}, Stderr: io.Discard})
	if err != nil {
		return "", fmt.Errorf("look for sftp-server: %w", err)
	}
	defer proc.Close()
	out, err := io.ReadAll(io.LimitReader(proc, 4096))
	if err != nil {
		return "", fmt.Errorf("look for sftp-server: %w", err)
	}
	code, err := proc.Wait(ctx)
	if err != nil {
		return "", fmt.Errorf("look for sftp-server: %w", err)
	}
	path := strings.TrimSpace(string(out))
	if code != 0 || path == "" {
		return "", errors.New("the workspace's image has no sftp-server (install openssh-sftp-server or openssh-server)")
	}
	return path, nil
}

// sshLoopbackHosts are the names a client may forward to: the workspace's own loopback, where
// DialPort connects. A server listening on 0.0.0.0 or [::] is reached there too.
var sshLoopbackHosts = map[string]bool{"127.0.0.1": true, "localhost": true, "0.0.0.0": true, "::1": true, "[::1]": true}

// directTCPIP serves a "direct-tcpip" channel (ssh -L, and how VS Code Remote-SSH and JetBrains
// Gateway reach their servers in the workspace): a connection to a port of the workspace.
func (s *sshServer) directTCPIP(nc ssh.NewChannel) {
	var d struct {
		Host     string
		Port     uint32
		OrigHost string
		OrigPort uint32
	}
	if err := ssh.Unmarshal(nc.ExtraData(), &d); err != nil {
		nc.Reject(ssh.ConnectionFailed, "malformed direct-tcpip request")
		return
	}
	if !sshLoopbackHosts[strings.ToLower(d.Host)] {
		nc.Reject(ssh.Prohibited, fmt.Sprintf("only the workspace's own ports can be forwarded (to localhost), not %s", d.Host))
		return
	}
	if d.Port == 0 || d.Port > 65535 {
		nc.Reject(ssh.ConnectionFailed, fmt.Sprintf("%d is not a port", d.Port))
		return
	}
	dctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	conn, err := s.t.DialPort(dctx, int(d.Port))
	cancel()
	if err != nil {
		s.log.Debug("ssh: forward to a port", "port", d.Port, "err", err)
		nc.Reject(ssh.ConnectionFailed, fmt.Sprintf("connect to port %d in the workspace: %v", d.Port, err))
		return
	}
	ch, reqs, err := nc.Accept()
	if err != nil {
		conn.Close()
		return
	}
	sshForward(ch, reqs, conn)
}

// sshForward copies both ways between a channel and a connection, passing each side's end of
// stream on as a half-close, until both have ended or the channel is closed.
func sshForward(ch ssh.Channel, reqs <-chan *ssh.Request, conn net.Conn) {
	go func() {
		for req := range reqs {
			req.Reply(false, nil)
		}
		// The channel is closed (by the client, or with the connection): a copy that still
		// waits on conn must end.
		conn.Close()
	}()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		io.Copy(conn, ch)
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
	}()
	go func() {
		defer wg.Done()
		io.Copy(ch, conn)
		ch.CloseWrite()
	}()
	wg.Wait()
	ch.Close()
	conn.Close()
}
