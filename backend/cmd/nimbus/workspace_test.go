package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/gorilla/websocket"
	"golang.org/x/crypto/ssh"

	"github.com/nimbus-build/nimbus/agent/executor"
	"github.com/nimbus-build/nimbus/agent/workspace"
)

const wsToken = "nimbus_pat_test"

// hostTarget is a workspace.Target whose processes run on the test's host (on a real pty when
// asked for one).
type hostTarget struct{}

func (hostTarget) Exec(ctx context.Context, spec executor.ExecSpec) (workspace.Process, error) {
	cmd := exec.Command(spec.Cmd[0], spec.Cmd[1:]...)
	cmd.Dir = spec.WorkingDir
	cmd.Env = os.Environ()
	for k, v := range spec.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &hostProc{cmd: cmd, done: make(chan struct{})}
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
		cmd.Stdout, cmd.Stderr = w, w
		if spec.Stderr != nil {
			cmd.Stderr = spec.Stderr
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			r.Close()
			w.Close()
			return nil, err
		}
		w.Close()
		p.stdin, p.stdout = stdin, r
	}
	go func() {
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode()
		} else if err != nil {
			p.code = -1
		}
		close(p.done)
	}()
	return p, nil
}

func (hostTarget) DialPort(ctx context.Context, port int) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
}

type hostProc struct {
	cmd       *exec.Cmd
	tty       *os.File
	stdin     io.WriteCloser
	stdout    *os.File
	done      chan struct{}
	code      int
	closeOnce sync.Once
}

func (p *hostProc) Read(b []byte) (int, error) {
	if p.tty == nil {
		return p.stdout.Read(b)
	}
	n, err := p.tty.Read(b)
	if errors.Is(err, syscall.EIO) { // Linux's end of a pty
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
	return pty.Setsize(p.tty, &pty.Winsize{Rows: uint16(rows), Cols: uint16(cols)})
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

// writeAPIError answers with the API's error envelope.
func writeAPIError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

// sshServer is the Nimbus server's SSH route as backend/workspace/README.md has it, for
// workspace 7, with the agent's SSH server behind it running processes on the host.
func sshServer(t *testing.T) *httptest.Server {
	srv, _ := sshServerServed(t)
	return srv
}

// sshServerServed is sshServer that also gives what each ServeSSH returned.
func sshServerServed(t *testing.T) (*httptest.Server, <-chan error) {
	t.Helper()
	key, err := workspace.NewHostKey()
	if err != nil {
		t.Fatal(err)
	}
	up := websocket.Upgrader{Subprotocols: []string{sshSubprotocol}}
	served := make(chan error, 16)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/workspaces/{id}/ssh", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+wsToken {
			writeAPIError(w, http.StatusUnauthorized, "unauthenticated", "the token is not valid")
			return
		}
		if r.PathValue("id") != "7" {
			writeAPIError(w, http.StatusNotFound, "not_found", "workspace not found")
			return
		}
		offered := websocket.Subprotocols(r)
		if len(offered) != 1 || offered[0] != sshSubprotocol {
			writeAPIError(w, http.StatusBadRequest, "bad_request", "subprotocol "+sshSubprotocol+" expected")
			return
		}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		err = workspace.ServeSSH(context.Background(), hostTarget{}, newWSConn(ws), workspace.SSHConfig{HostKey: key})
		select {
		case served <- err:
		default:
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, served
}

// runWS runs the CLI in-process with the server and token in its environment.
func runWS(t *testing.T, server, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	vars := map[string]string{"NIMBUS_SERVER": server, "NIMBUS_TOKEN": wsToken}
	e := env{stdin: strings.NewReader(stdin), stdout: &stdout, stderr: &stderr, getenv: func(k string) string { return vars[k] }}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	code := run(ctx, e, args)
	return code, stdout.String(), stderr.String()
}

func TestWorkspaceSSHRunsACommand(t *testing.T) {
	srv := sshServer(t)
	if code, out, errOut := runWS(t, srv.URL, "", "workspace", "ssh", "7", "--", "echo", "hi"); code != 0 || out != "hi\n" {
		t.Fatalf("ssh 7 -- echo hi = %d, %q, stderr %q", code, out, errOut)
	}
	if code, out, errOut := runWS(t, srv.URL, "", "workspace", "ssh", "7", "exit 3"); code != 3 {
		t.Fatalf("ssh 7 'exit 3' = %d, %q, stderr %q", code, out, errOut)
	}
	// Stdin goes to the command, stderr stays apart, and the words are joined as ssh does.
	code, out, errOut := runWS(t, srv.URL, "piped\n", "workspace", "ssh", "7", "--", "cat;", "echo", "oops", ">&2")
	if code != 0 || out != "piped\n" || errOut != "oops\n" {
		t.Fatalf("cat = %d, %q, stderr %q", code, out, errOut)
	}
}

func TestWorkspaceSSHFailures(t *testing.T) {
	srv := sshServer(t)
	var stdout, stderr bytes.Buffer
	e := env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(k string) string {
		return map[string]string{"NIMBUS_SERVER": srv.URL, "NIMBUS_TOKEN": "wrong"}[k]
	}}
	if code := run(t.Context(), e, []string{"workspace", "ssh", "7", "true"}); code != 255 || !strings.Contains(stderr.String(), "the token is not valid") {
		t.Fatalf("a wrong token = %d, stderr %q", code, stderr.String())
	}
	if code, _, errOut := runWS(t, srv.URL, "", "workspace", "ssh", "8", "true"); code != 255 || !strings.Contains(errOut, "workspace not found") {
		t.Fatalf("another workspace = %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runWS(t, srv.URL, "", "workspace", "ssh", "seven"); code != 2 || !strings.Contains(errOut, "not a workspace id") {
		t.Fatalf("a bad id = %d, stderr %q", code, errOut)
	}
}

// pipeConn is a net.Conn made of the two pipes to and from a ProxyCommand.
type pipeConn struct {
	io.Reader
	io.WriteCloser
}

func (pipeConn) LocalAddr() net.Addr                { return &net.UnixAddr{Name: "stdio", Net: "unix"} }
func (pipeConn) RemoteAddr() net.Addr               { return &net.UnixAddr{Name: "stdio", Net: "unix"} }
func (pipeConn) SetDeadline(t time.Time) error      { return nil }
func (pipeConn) SetReadDeadline(t time.Time) error  { return nil }
func (pipeConn) SetWriteDeadline(t time.Time) error { return nil }

func TestWorkspaceSSHStdio(t *testing.T) {
	srv, served := sshServerServed(t)
	inR, inW := io.Pipe()   // the SSH client → the CLI's stdin
	outR, outW := io.Pipe() // the CLI's stdout → the SSH client
	vars := map[string]string{"NIMBUS_TOKEN": wsToken}
	var stderr bytes.Buffer
	e := env{stdin: inR, stdout: outW, stderr: &stderr, getenv: func(k string) string { return vars[k] }}
	exited := make(chan int, 1)
	go func() {
		exited <- run(t.Context(), e, []string{"workspace", "ssh", "--stdio", "--server", srv.URL, "7"})
		outW.Close()
	}()

	cc, chans, reqs, err := ssh.NewClientConn(pipeConn{outR, inW}, "nimbus-ws-7", &ssh.ClientConfig{
		User: "root", HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("handshake: %v (CLI stderr %q)", err, stderr.String())
	}
	client := ssh.NewClient(cc, chans, reqs)
	for _, want := range []string{"one", "two"} {
		s, err := client.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.Output("echo " + want)
		if err != nil || string(out) != want+"\n" {
			t.Fatalf("echo %s = %q, %v", want, out, err)
		}
	}
	// The SSH client closing its end (the CLI's stdin) ends the CLI.
	client.Close()
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("exit %d, stderr %q", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the CLI did not end with its stdin")
	}
	if err := <-served; err != nil {
		t.Fatalf("ServeSSH = %v, want an orderly end", err)
	}
}

func TestWorkspaceSSHTerminal(t *testing.T) {
	srv := sshServer(t)
	ptm, pts, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptm.Close()
	defer pts.Close()
	if err := pty.Setsize(ptm, &pty.Winsize{Rows: 30, Cols: 100}); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"NIMBUS_SERVER": srv.URL, "NIMBUS_TOKEN": wsToken, "TERM": "xterm-test"}
	e := env{stdin: pts, stdout: pts, stderr: pts, getenv: func(k string) string { return vars[k] }}
	exited := make(chan int, 1)
	go func() { exited <- run(t.Context(), e, []string{"workspace", "ssh", "7"}) }()

	var mu sync.Mutex
	var out bytes.Buffer
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ptm.Read(buf)
			mu.Lock()
			out.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	// Typed again and again until it shows: the shell may still be reading its profile.
	typeUntil := func(line, want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			mu.Lock()
			got := out.String()
			mu.Unlock()
			if strings.Contains(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %q after typing %q: %q", want, line, got)
			}
			io.WriteString(ptm, line)
			time.Sleep(300 * time.Millisecond)
		}
	}
	typeUntil("echo $TERM-$((6*7))\r", "xterm-test-42")
	typeUntil("stty size\r", "30 100")
	// A resize of the local terminal follows to the workspace's.
	if err := pty.Setsize(ptm, &pty.Winsize{Rows: 50, Cols: 132}); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(os.Getpid(), syscall.SIGWINCH)
	typeUntil("stty size\r", "50 132")
	io.WriteString(ptm, "exit 7\r")
	select {
	case code := <-exited:
		if code != 7 {
			t.Fatalf("exit %d, want 7", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the CLI did not end with the shell")
	}
}

// TestWorkspaceCLIHelper is not a test: TestWorkspaceSSHConfigWithOpenSSH runs the test binary
// as the CLI (the ProxyCommand of the printed config), and this is that CLI.
func TestWorkspaceCLIHelper(t *testing.T) {
	if os.Getenv("NIMBUS_TEST_CLI_HELPER") != "1" {
		t.Skip("a helper process of TestWorkspaceSSHConfigWithOpenSSH")
	}
	os.Exit(run(context.Background(), env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}, flag.Args()))
}

// TestWorkspaceSSHConfigWithOpenSSH connects OpenSSH with the config ssh-config prints, as
// VS Code Remote-SSH would.
func TestWorkspaceSSHConfigWithOpenSSH(t *testing.T) {
	sshBin, err := exec.LookPath("ssh")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no OpenSSH client (e2e/testenv.sh installs openssh-client)")
		}
		t.Skip("no OpenSSH client")
	}
	srv, served := sshServerServed(t)
	code, cfg, errOut := runWS(t, srv.URL, "", "workspace", "ssh-config", "7")
	if code != 0 {
		t.Fatalf("ssh-config = %d, stderr %q", code, errOut)
	}
	helper := os.Args[0] + " -test.run=^TestWorkspaceCLIHelper$"
	if !strings.Contains(cfg, "ProxyCommand nimbus ") {
		t.Fatalf("no ProxyCommand in %q", cfg)
	}
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(strings.Replace(cfg, "ProxyCommand nimbus ", "ProxyCommand "+helper+" ", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sshBin, "-F", path, "-o", "BatchMode=yes", "-o", "ConnectTimeout=20", "nimbus-ws-7", "echo hi; exit 4")
	cmd.Env = append(os.Environ(), "NIMBUS_TEST_CLI_HELPER=1", "NIMBUS_TOKEN="+wsToken, "HOME="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, _ := cmd.Output()
	if string(out) != "hi\n" || cmd.ProcessState.ExitCode() != 4 {
		t.Fatalf("ssh nimbus-ws-7 = %q, exit %d, stderr %q", out, cmd.ProcessState.ExitCode(), stderr.String())
	}
	// ssh hangs its ProxyCommand up when done: the CLI still ends the WebSocket properly.
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("ServeSSH = %v, want an orderly end", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server's SSH connection did not end")
	}
}

func TestWorkspaceSSHConfig(t *testing.T) {
	code, out, _ := runWS(t, "https://nimbus.example/base%2F/", "", "workspace", "ssh-config", "42")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{
		"Host nimbus-ws-42\n",
		"  User root\n",
		"  ProxyCommand nimbus workspace ssh --stdio --server https://nimbus.example/base%%2F 42\n",
		"  StrictHostKeyChecking no\n",
		"  UserKnownHostsFile /dev/null\n",
		"NIMBUS_TOKEN",
		"Remote-SSH",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, wsToken) {
		t.Error("the token is in the config")
	}
}

// apiServer answers the workspace REST routes as backend/workspace/README.md describes them
// (and POST /repos/{org}/{repo}/workspaces as backend/build does), for team ml.
func apiServer(t *testing.T) *httptest.Server {
	t.Helper()
	auth := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+wsToken {
				writeAPIError(w, http.StatusUnauthorized, "unauthenticated", "the token is not valid")
				return
			}
			h(w, r)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/repos/{org}/{repo}/workspaces", auth(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Branch string }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.Header.Get("Content-Type") != "application/json" {
			writeAPIError(w, http.StatusBadRequest, "bad_request", "a JSON body expected")
			return
		}
		if r.PathValue("org") != "ml" || r.PathValue("repo") != "trainer" {
			writeAPIError(w, http.StatusNotFound, "not_found", "repository not found")
			return
		}
		branch := req.Branch
		if branch == "" {
			branch = "main"
		}
		if branch == "nope" {
			writeAPIError(w, http.StatusUnprocessableEntity, "validation_failed", `branch "nope" does not exist`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id": 3, "number": 7, "event": "vscode", "branch": "`+branch+`", "status": "queued",
			"pipelines": [{"id": 42, "key": "vscode", "name": "vscode", "status": "queued", "workspace": true,
			"ready_at": null, "workspace_state": "queued"}]}`)
	}))
	mux.HandleFunc("GET /api/v1/orgs/{org}/workspaces", auth(func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("org") != "ml" {
			writeAPIError(w, http.StatusNotFound, "not_found", "team not found")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		active := `{"id": 42, "org": "ml", "repo": "trainer", "branch": "main", "build_number": 7, "pipeline_name": "vscode", "status": "running", "state": "ready", "reason": ""}`
		ended := `{"id": 41, "org": "ml", "repo": "trainer", "branch": "dev", "build_number": 6, "pipeline_name": "vscode", "status": "success", "state": "stopped", "reason": "stopped: idle"}`
		// One page, as openapi.yaml documents the list (at most 200, not paginated).
		if r.URL.Query().Get("all") != "true" {
			io.WriteString(w, `{"items": [`+active+`]}`)
		} else {
			io.WriteString(w, `{"items": [`+active+`, `+ended+`]}`)
		}
	}))
	mux.HandleFunc("POST /api/v1/workspaces/{id}/stop", auth(func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "42" {
			writeAPIError(w, http.StatusNotFound, "not_found", "workspace not found")
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestWorkspaceOpen(t *testing.T) {
	srv := apiServer(t)
	code, out, errOut := runWS(t, srv.URL, "", "workspace", "open", "ml/trainer", "--branch", "dev")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"workspace 42 (vscode) of ml/trainer on dev: queued", "dashboard: " + srv.URL + "/ml/trainer/workspaces/42", "nimbus workspace ssh 42"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in %q", want, out)
		}
	}
	if code, out, _ := runWS(t, srv.URL, "", "workspace", "open", "ml/trainer"); code != 0 || !strings.Contains(out, " on main: ") {
		t.Fatalf("the default branch: %d, %q", code, out)
	}
	code, _, errOut = runWS(t, srv.URL, "", "workspace", "open", "--branch", "nope", "ml/trainer")
	if code != 1 || !strings.Contains(errOut, `branch "nope" does not exist`) {
		t.Fatalf("a missing branch = %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runWS(t, srv.URL, "", "workspace", "open", "trainer"); code != 2 || !strings.Contains(errOut, "not ORG/REPO") {
		t.Fatalf("no org = %d, stderr %q", code, errOut)
	}
}

func TestWorkspaceList(t *testing.T) {
	srv := apiServer(t)
	code, out, errOut := runWS(t, srv.URL, "", "workspace", "list", "ml")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "ID REPO BRANCH STATE" ||
		strings.Join(strings.Fields(lines[1]), " ") != "42 trainer main ready" {
		t.Fatalf("list =\n%s", out)
	}
	// --all, after the team: the ended ones too.
	code, out, _ = runWS(t, srv.URL, "", "workspace", "list", "ml", "--all")
	if code != 0 || !strings.Contains(out, "42") || !strings.Contains(out, "stopped (stopped: idle)") {
		t.Fatalf("list --all = %d,\n%s", code, out)
	}
	if code, _, errOut := runWS(t, srv.URL, "", "workspace", "list", "other"); code != 1 || !strings.Contains(errOut, "team not found") {
		t.Fatalf("another team = %d, stderr %q", code, errOut)
	}
}

func TestWorkspaceStop(t *testing.T) {
	srv := apiServer(t)
	if code, out, errOut := runWS(t, srv.URL, "", "workspace", "stop", "42"); code != 0 || !strings.Contains(out, "workspace 42 is stopping") {
		t.Fatalf("stop 42 = %d, %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut := runWS(t, srv.URL, "", "workspace", "stop", "43"); code != 1 || !strings.Contains(errOut, "workspace not found") {
		t.Fatalf("stop 43 = %d, stderr %q", code, errOut)
	}
	var stderr bytes.Buffer
	e := env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &stderr, getenv: func(k string) string {
		return map[string]string{"NIMBUS_SERVER": srv.URL}[k]
	}}
	if code := run(t.Context(), e, []string{"workspace", "stop", "42"}); code != 2 || !strings.Contains(stderr.String(), "NIMBUS_TOKEN") {
		t.Fatalf("no token = %d, stderr %q", code, stderr.String())
	}
}
