package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/crypto/ssh"
	"golang.org/x/term"

	"github.com/nimbus-build/nimbus/backend/apiclient"
	"github.com/nimbus-build/nimbus/internal/envflag"
)

func workspaceCommand() command {
	return command{summary: "open, list, stop and SSH into cloud workspaces", run: runWorkspace}
}

const workspaceUsage = `Usage: nimbus workspace open [flags] ORG/REPO [--branch BRANCH]
       nimbus workspace list [flags] ORG [--all]
       nimbus workspace stop [flags] ID
       nimbus workspace ssh [flags] ID [-- COMMAND...]
       nimbus workspace ssh-config [flags] ID

A workspace is a pipeline that stays up after its stages (a .cnb.yml pipeline with services:
vscode); its ID is the pipeline's id.

open starts the workspaces of a branch (the default branch when --branch is not given) and
prints their ids and their pages on the dashboard. list prints a team's workspaces, stop stops
one gracefully: its endStages run and its work is saved.

ssh opens a shell in the workspace, on a terminal when stdin is one, or runs COMMAND there and
exits with its status. The SSH connection goes through the Nimbus server (a WebSocket to
/api/v1/workspaces/ID/ssh), never straight to the agent. With --stdio it only carries the
connection on stdin and stdout: OpenSSH's ProxyCommand, which VS Code Remote-SSH, Cursor and
JetBrains Gateway use. ssh-config prints an ~/.ssh/config entry that does that.

The token is a personal token (a pipeline's job token cannot open workspaces).`

// sshSubprotocol is the WebSocket subprotocol of /api/v1/workspaces/{id}/ssh.
const sshSubprotocol = "nimbus-ssh.v1"

// workspaceClient talks to one server's workspace API (through backend/apiclient; the SSH
// tunnel is a WebSocket of its own).
type workspaceClient struct {
	server, token string
	api           *apiclient.Client
}

func runWorkspace(ctx context.Context, e env, args []string) int {
	verb, code, ok := verbOf(e, args, workspaceUsage, "open", "list", "stop", "ssh", "ssh-config")
	if !ok {
		return code
	}
	c := &workspaceClient{}
	var branch string
	var all, stdio, tty bool
	fs := envflag.New("workspace "+verb, workspaceUsage)
	serverFlags(fs, &c.server, &c.token, "a personal token")
	switch verb {
	case "open":
		fs.String(&branch, "branch", "", "", "the branch (default: the repository's default branch)")
	case "list":
		fs.Bool(&all, "all", "", false, "the ended workspaces too")
	case "ssh":
		fs.Bool(&stdio, "stdio", "", false, "carry the SSH connection on stdin and stdout (an OpenSSH ProxyCommand)")
		fs.Bool(&tty, "tty", "", false, "a terminal for COMMAND too (ssh -t)")
	}
	// ssh takes flags before the ID only: what follows is the command, flags and all.
	interspersed := verb != "ssh"
	rest, err := parseWorkspaceArgs(fs, args[1:], e, interspersed)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(e.stderr, "nimbus:", err)
		return 2
	}
	if c.server == "" {
		c.server = e.getenv("CNB_WEB_ENDPOINT")
	}
	c.server = strings.TrimRight(c.server, "/")
	c.api = apiclient.New(c.server, apiclient.WithToken(c.token), apiclient.WithHTTPClient(&http.Client{Timeout: time.Minute}))
	switch {
	case c.server == "":
		fmt.Fprintf(e.stderr, "nimbus workspace %s: --server (NIMBUS_SERVER) is required\n", verb)
		return 2
	case c.token == "" && verb != "ssh-config":
		fmt.Fprintf(e.stderr, "nimbus workspace %s: --token (NIMBUS_TOKEN) is required: a personal token (%s/settings/tokens)\n", verb, c.server)
		return 2
	case len(rest) == 0 || (verb != "ssh" && len(rest) != 1):
		fmt.Fprintln(e.stderr, workspaceUsage)
		return 2
	}

	if verb == "open" {
		org, name, ok := strings.Cut(rest[0], "/")
		if !ok || org == "" || name == "" || strings.Contains(name, "/") {
			fmt.Fprintf(e.stderr, "nimbus workspace open: %q is not ORG/REPO\n", rest[0])
			return 2
		}
		return c.report(e, verb, c.open(ctx, e.stdout, org, name, branch))
	}
	if verb == "list" {
		return c.report(e, verb, c.list(ctx, e.stdout, rest[0], all))
	}
	id := rest[0]
	if n, err := strconv.ParseInt(id, 10, 64); err != nil || n <= 0 {
		fmt.Fprintf(e.stderr, "nimbus workspace %s: %q is not a workspace id\n", verb, id)
		return 2
	}
	switch verb {
	case "stop":
		return c.report(e, verb, c.stop(ctx, e.stdout, id))
	case "ssh-config":
		printSSHConfig(e.stdout, c.server, id)
		return 0
	}
	cmdArgs := rest[1:]
	if len(cmdArgs) > 0 && cmdArgs[0] == "--" {
		cmdArgs = cmdArgs[1:]
	}
	conn, err := c.dialSSH(ctx, id)
	if err != nil {
		// 255, as ssh exits when it cannot connect: scripts tell that from the command's status.
		fmt.Fprintln(e.stderr, "nimbus workspace ssh:", err)
		return 255
	}
	defer conn.Close()
	if stdio {
		if err := pipeStdio(ctx, conn, e.stdin, e.stdout); err != nil {
			fmt.Fprintln(e.stderr, "nimbus workspace ssh:", err)
			return 255
		}
		return 0
	}
	// Joined with spaces and run by the workspace's shell, as ssh does: `-- ls -l '*.go'`
	// quotes for that shell.
	return runSSHClient(ctx, e, conn, id, strings.Join(cmdArgs, " "), tty)
}

// parseWorkspaceArgs parses the flags and returns the other arguments. Interspersed, flags may
// also follow them (`open ml/trainer --branch dev`) until a "--".
func parseWorkspaceArgs(fs *envflag.Set, args []string, e env, interspersed bool) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args, e.getenv, e.stdout); err != nil {
			return nil, err
		}
		left := fs.Args()
		if !interspersed || len(left) == 0 {
			return append(rest, left...), nil
		}
		if consumed := len(args) - len(left); consumed > 0 && args[consumed-1] == "--" {
			return append(rest, left...), nil
		}
		rest = append(rest, left[0])
		args = left[1:]
	}
}

func (c *workspaceClient) report(e env, verb string, err error) int {
	if err != nil {
		fmt.Fprintf(e.stderr, "nimbus workspace %s: %v\n", verb, err)
		return 1
	}
	return 0
}

func (c *workspaceClient) open(ctx context.Context, out io.Writer, org, repo, branch string) error {
	b, err := c.api.OpenWorkspaces(ctx, org, repo, branch)
	if err != nil {
		return err
	}
	if b.Error != nil {
		return fmt.Errorf("%s:%d: %s", b.Error.File, b.Error.Line, b.Error.Message)
	}
	repoURL := c.server + "/" + url.PathEscape(org) + "/" + url.PathEscape(repo)
	n := 0
	for _, p := range b.Pipelines {
		if !p.Workspace {
			continue
		}
		state := p.Status
		if p.WorkspaceState != nil {
			state = *p.WorkspaceState
		}
		fmt.Fprintf(out, "workspace %d (%s) of %s/%s on %s: %s\n", p.ID, p.Name, org, repo, b.Branch, state)
		fmt.Fprintf(out, "  dashboard: %s/workspaces/%d\n", repoURL, p.ID)
		fmt.Fprintf(out, "  shell:     nimbus workspace ssh %d\n", p.ID)
		n++
	}
	if n == 0 {
		return fmt.Errorf("build %d of %s/%s has no workspace pipeline (%s/builds/%d)", b.Number, org, repo, repoURL, b.Number)
	}
	return nil
}

func (c *workspaceClient) list(ctx context.Context, out io.Writer, org string, all bool) error {
	items, err := c.api.Workspaces(ctx, org, all)
	if err != nil {
		return err
	}
	if len(items) == 0 {
		if all {
			fmt.Fprintf(out, "%s has no workspaces\n", org)
		} else {
			fmt.Fprintf(out, "%s has no active workspaces (--all lists the ended ones too)\n", org)
		}
		return nil
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tREPO\tBRANCH\tSTATE")
	for _, w := range items {
		state := w.State
		if w.Reason != "" {
			state += " (" + w.Reason + ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", w.ID, w.Repo, w.Branch, state)
	}
	return tw.Flush()
}

func (c *workspaceClient) stop(ctx context.Context, out io.Writer, id string) error {
	n, _ := strconv.ParseInt(id, 10, 64) // checked by runWorkspace
	if err := c.api.StopWorkspace(ctx, n); err != nil {
		return err
	}
	fmt.Fprintf(out, "workspace %s is stopping: its endStages run and its work is saved\n", id)
	return nil
}

// printSSHConfig prints an OpenSSH config entry for the workspace. The token is not in it: the
// ProxyCommand reads NIMBUS_TOKEN from the environment ssh (or the editor) runs it with, so
// that the file holds no secret.
func printSSHConfig(out io.Writer, server, id string) {
	host := "nimbus-ws-" + id
	// ssh expands %-tokens in ProxyCommand: an escaped URL's %2F must stay itself.
	proxy := "nimbus workspace ssh --stdio --server " + strings.ReplaceAll(server, "%", "%%") + " " + id
	fmt.Fprintf(out, `# Nimbus workspace %[1]s: add this to ~/.ssh/config, then run `+"`ssh %[2]s`"+`.
# The ProxyCommand authenticates with NIMBUS_TOKEN (a personal token) from the environment of
# ssh, or of the editor that runs it: export NIMBUS_TOKEN there. nimbus must be on that PATH
# too (else write its full path). The host key is not checked: the connection is the Nimbus
# server's authenticated HTTPS, and each workspace gets a new key.
Host %[2]s
  User root
  ProxyCommand %[3]s
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
# VS Code or Cursor: "Remote-SSH: Connect to Host..." and pick %[2]s; JetBrains Gateway: an SSH connection to %[2]s.
`, id, host, proxy)
}

// dialSSH opens the WebSocket that carries an SSH connection to the workspace.
func (c *workspaceClient) dialSSH(ctx context.Context, id string) (*wsConn, error) {
	u, err := url.Parse(c.server + "/api/v1/workspaces/" + id + "/ssh")
	if err != nil {
		return nil, fmt.Errorf("--server: %w", err)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	default:
		return nil, fmt.Errorf("--server %q is not an http:// or https:// URL", c.server)
	}
	d := websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: 30 * time.Second, Subprotocols: []string{sshSubprotocol}}
	ws, resp, err := d.DialContext(ctx, u.String(), http.Header{"Authorization": {"Bearer " + c.token}})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("workspace %s: %w", id, apiclient.ErrorOf(resp))
		}
		return nil, fmt.Errorf("workspace %s: %w", id, err)
	}
	if ws.Subprotocol() != sshSubprotocol {
		ws.Close()
		return nil, fmt.Errorf("workspace %s: the server answered with WebSocket subprotocol %q, not %s", id, ws.Subprotocol(), sshSubprotocol)
	}
	return newWSConn(ws), nil
}

// wsConn is a WebSocket as the byte stream it carries: binary messages, each a piece of the
// stream in order, in both directions.
type wsConn struct {
	ws        *websocket.Conn
	r         io.Reader // the message being read, nil between messages
	wmu       sync.Mutex
	closeOnce sync.Once
	closeErr  error
}

func newWSConn(ws *websocket.Conn) *wsConn { return &wsConn{ws: ws} }

func (c *wsConn) Read(p []byte) (int, error) {
	for {
		if c.r == nil {
			typ, r, err := c.ws.NextReader()
			if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) {
				return 0, io.EOF
			}
			if err != nil {
				return 0, err
			}
			if typ != websocket.BinaryMessage {
				continue // the protocol has no text messages yet: skip what a later one adds
			}
			c.r = r
		}
		n, err := c.r.Read(p)
		if err == io.EOF {
			c.r = nil
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}

func (c *wsConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.ws.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// closeStream tells the other end that no more is coming, without waiting for it to agree.
func (c *wsConn) closeStream() error {
	msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
	return c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
}

// Close ends the connection with a close message first, so the server sees an orderly end and
// not a broken connection.
func (c *wsConn) Close() error {
	c.closeOnce.Do(func() {
		c.closeStream()
		c.closeErr = c.ws.Close()
	})
	return c.closeErr
}

func (c *wsConn) LocalAddr() net.Addr  { return c.ws.LocalAddr() }
func (c *wsConn) RemoteAddr() net.Addr { return c.ws.RemoteAddr() }

func (c *wsConn) SetDeadline(t time.Time) error {
	if err := c.ws.SetReadDeadline(t); err != nil {
		return err
	}
	return c.ws.SetWriteDeadline(t)
}

func (c *wsConn) SetReadDeadline(t time.Time) error  { return c.ws.SetReadDeadline(t) }
func (c *wsConn) SetWriteDeadline(t time.Time) error { return c.ws.SetWriteDeadline(t) }

// pipeStdio carries the connection on stdin and stdout until either ends: the server closing
// the connection, or the SSH client closing our stdin or hanging us up, which OpenSSH does when
// it is done.
func pipeStdio(ctx context.Context, conn *wsConn, stdin io.Reader, stdout io.Writer) error {
	// Without this the hangup would kill the process before the close message goes out, and
	// the server would log every ended session as a broken connection.
	hup := make(chan os.Signal, 1)
	notifyHangup(hup)
	defer signal.Stop(hup)
	fromServer := make(chan error, 1)
	go func() {
		_, err := io.Copy(stdout, conn)
		fromServer <- err
	}()
	fromClient := make(chan error, 1)
	go func() {
		_, err := io.Copy(conn, stdin)
		fromClient <- err
	}()
	select {
	case err := <-fromServer:
		return err
	case err := <-fromClient:
		if err != nil {
			return err
		}
		// Let the server answer the close, so that it ends the SSH connection as an orderly one
		// and what it still had to say reaches the client.
		conn.closeStream()
		select {
		case <-fromServer:
		case <-time.After(5 * time.Second):
		case <-ctx.Done():
		}
		return nil
	case <-hup:
		return nil // the caller's Close sends the close message
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sshKeepalive is how often the client proves the connection alive: proxies in front of the
// server cut idle WebSockets.
const sshKeepalive = 30 * time.Second

// runSSHClient runs a shell (command "") or a command in the workspace over conn and returns
// its exit status, 255 when there is none.
func runSSHClient(ctx context.Context, e env, conn net.Conn, id, command string, forceTTY bool) int {
	fail := func(err error) int {
		fmt.Fprintln(e.stderr, "nimbus workspace ssh:", err)
		return 255
	}
	cc, chans, reqs, err := ssh.NewClientConn(conn, "nimbus-ws-"+id, &ssh.ClientConfig{
		User: "root",
		// The host key is not checked. The connection is the WebSocket to the Nimbus server,
		// over its TLS, which authenticated this user and routes the stream to the workspace's
		// agent over the agent's own tunnel; an impostor would have to be the server. Nor is
		// there anything to check against: each workspace makes a new key.
		HostKeyCallback: ssh.InsecureIgnoreHostKey(),
	})
	if err != nil {
		return fail(fmt.Errorf("SSH handshake with workspace %s: %w", id, err))
	}
	client := ssh.NewClient(cc, chans, reqs)
	defer client.Close()
	kctx, stopKeepalive := context.WithCancel(ctx)
	defer stopKeepalive()
	go keepalive(kctx, client)

	sess, err := client.NewSession()
	if err != nil {
		return fail(err)
	}
	defer sess.Close()
	for _, k := range []string{"LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "COLORTERM"} {
		if v := e.getenv(k); v != "" {
			sess.Setenv(k, v) // a refusal only loses the setting
		}
	}
	sess.Stdin, sess.Stdout, sess.Stderr = e.stdin, e.stdout, e.stderr

	inFd, inTerm := terminalFd(e.stdin)
	if forceTTY || (command == "" && inTerm) {
		restore, err := startTerminal(ctx, e, sess, inFd, inTerm)
		if err != nil {
			return fail(err)
		}
		defer restore()
	}
	if command == "" {
		err = sess.Shell()
	} else {
		err = sess.Start(command)
	}
	if err != nil {
		return fail(err)
	}
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		client.Close()
		return fail(ctx.Err())
	}
	var ee *ssh.ExitError
	var missing *ssh.ExitMissingError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitStatus()
	case errors.As(err, &missing):
		return fail(errors.New("the connection ended without the command's exit status"))
	}
	return fail(err)
}

// terminalFd is r's file descriptor when r is a terminal.
func terminalFd(r io.Reader) (int, bool) {
	f, ok := r.(*os.File)
	if !ok {
		return -1, false
	}
	fd := int(f.Fd())
	return fd, term.IsTerminal(fd)
}

// startTerminal asks for a terminal of the local one's size and TERM, puts the local terminal
// in raw mode (keys, ^C included, go to the workspace as they are typed) and follows its size.
// restore undoes the raw mode.
func startTerminal(ctx context.Context, e env, sess *ssh.Session, fd int, isTerm bool) (restore func(), err error) {
	termName := e.getenv("TERM")
	if termName == "" {
		termName = "xterm-256color"
	}
	cols, rows := 80, 24
	if isTerm {
		if w, h, err := term.GetSize(fd); err == nil && w > 0 && h > 0 {
			cols, rows = w, h
		}
	}
	modes := ssh.TerminalModes{ssh.ECHO: 1, ssh.TTY_OP_ISPEED: 38400, ssh.TTY_OP_OSPEED: 38400}
	if err := sess.RequestPty(termName, rows, cols, modes); err != nil {
		return nil, fmt.Errorf("ask for a terminal: %w", err)
	}
	if !isTerm {
		return func() {}, nil
	}
	old, err := term.MakeRaw(fd)
	if err != nil {
		return nil, fmt.Errorf("raw mode: %w", err)
	}
	winch := make(chan os.Signal, 1)
	notifyResize(winch)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-winch:
				if w, h, err := term.GetSize(fd); err == nil {
					sess.WindowChange(h, w)
				}
			case <-stop:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		signal.Stop(winch)
		close(stop)
		term.Restore(fd, old)
	}, nil
}

func keepalive(ctx context.Context, c *ssh.Client) {
	t := time.NewTicker(sshKeepalive)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// Any answer will do, a refusal too (OpenSSH's keepalive).
			if _, _, err := c.SendRequest("keepalive@openssh.com", true, nil); err != nil {
				return
			}
		}
	}
}
