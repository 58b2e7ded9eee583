package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nimbus-build/nimbus/backend/apiclient"
)

// openWorkspace fires the vscode event on main and returns the workspace's id once it is ready.
func (w *world) openWorkspace(within time.Duration) int64 {
	w.t.Helper()
	opened := w.api.openWorkspaces("ml", "trainer", "main")
	if len(opened.Pipelines) != 1 {
		w.t.Fatalf("opened %+v", opened)
	}
	id := opened.Pipelines[0].ID
	w.waitWorkspace(id, within, "ready", func(v apiclient.Workspace) bool { return v.State == "ready" })
	return id
}

// waitWorkspace polls the workspace until cond holds.
func (w *world) waitWorkspace(id int64, within time.Duration, what string, cond func(apiclient.Workspace) bool) apiclient.Workspace {
	w.t.Helper()
	deadline := time.Now().Add(within)
	for {
		v := w.api.workspace(id)
		if cond(v) {
			return v
		}
		if v.State == "failed" || time.Now().After(deadline) {
			w.t.Fatalf("workspace %d is not %s: %+v", id, what, v)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// terminal is a WebSocket client of a workspace's terminal.
type terminal struct {
	t       testing.TB
	ws      *websocket.Conn
	session string
	out     strings.Builder
}

func (w *world) dialTerminal(id int64, session string) *terminal {
	w.t.Helper()
	u := "ws" + strings.TrimPrefix(w.base, "http") + "/api/v1/workspaces/" + itoa(id) + "/terminal?cols=100&rows=30"
	if session != "" {
		u += "&session=" + session
	}
	d := websocket.Dialer{Subprotocols: []string{"nimbus-terminal.v1"}, HandshakeTimeout: 20 * time.Second}
	ws, resp, err := d.Dial(u, http.Header{"Authorization": {"Bearer " + w.token}})
	if err != nil {
		body := ""
		if resp != nil {
			b, _ := io.ReadAll(resp.Body)
			body = string(b)
		}
		w.t.Fatalf("terminal: %v %s", err, body)
	}
	term := &terminal{t: w.t, ws: ws}
	typ, b, err := ws.ReadMessage()
	var m struct{ Type, ID string }
	if err != nil || typ != websocket.TextMessage || json.Unmarshal(b, &m) != nil || m.Type != "session" || m.ID == "" {
		w.t.Fatalf("the terminal's first message: %d %q %v", typ, b, err)
	}
	term.session = m.ID
	return term
}

func (term *terminal) send(s string) {
	term.t.Helper()
	if err := term.ws.WriteMessage(websocket.BinaryMessage, []byte(s)); err != nil {
		term.t.Fatal(err)
	}
}

// expect reads output until it holds want.
func (term *terminal) expect(want string, within time.Duration) {
	term.t.Helper()
	term.ws.SetReadDeadline(time.Now().Add(within))
	defer term.ws.SetReadDeadline(time.Time{})
	for !strings.Contains(term.out.String(), want) {
		typ, b, err := term.ws.ReadMessage()
		if err != nil {
			term.t.Fatalf("waiting for %q: %v; the terminal showed %q", want, err, term.out.String())
		}
		if typ == websocket.BinaryMessage {
			term.out.Write(b)
		}
	}
}

// previewClient reaches preview origins ({port}-{id}.preview.localhost) on the server's address,
// as a browser does with *.localhost names.
func (w *world) previewClient() *http.Client {
	addr := strings.TrimPrefix(w.base, "http://")
	return &http.Client{
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// The way into a workspace: a terminal through server and tunnel (with a reattach), a preview
// of a port, keep-alive; another team's user finds none of it; stopping it saves the work,
// and the next workspace restores it.
func TestWorkspaceTerminalPreviewAndAccess(t *testing.T) {
	w := newWorld(t)
	w.agent("")
	w.pushFiles(map[string]string{".cnb.yml": `$:
  vscode:
    - runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker: { image: ` + w.image + ` }
      services:
        - name: vscode
          options: { keepAliveTimeout: 600000 }
      stages:
        - name: prepare
          script: echo prepared
`})
	id := w.openWorkspace(2 * time.Minute)
	v := w.waitWorkspace(id, 30*time.Second, "reachable", func(v apiclient.Workspace) bool { return v.Connections != nil })
	if v.IDE == nil || v.IDE.Kind != "none" || v.IDE.Reason == "" {
		t.Fatalf("ide %+v: the busybox image has no code-server", v.IDE)
	}
	if want := "://{{port}}-" + itoa(id) + ".preview.localhost:"; !strings.Contains(v.PreviewURLTemplate, want) {
		t.Fatalf("preview template %q", v.PreviewURLTemplate)
	}

	// The terminal: echo hi round-trips, and the environment has CNB_VSCODE_PROXY_URI.
	term := w.dialTerminal(id, "")
	term.send("echo hi-$((40+2)); echo \"proxy=$CNB_VSCODE_PROXY_URI\"\n")
	term.expect("hi-42", 20*time.Second)
	term.expect("proxy="+v.PreviewURLTemplate, 10*time.Second)
	w.waitWorkspace(id, 10*time.Second, "connected", func(v apiclient.Workspace) bool {
		return v.Connections != nil && *v.Connections >= 1 && v.IdleDeadline == nil
	})

	// A broken connection leaves the shell; the same session comes back with its output.
	term.send("MARK=kept-$((1+1))\n")
	term.expect("MARK=kept", 10*time.Second)
	session := term.session
	term.ws.Close()
	again := w.dialTerminal(id, session)
	if again.session != session {
		t.Fatalf("reattached to %s, want %s", again.session, session)
	}
	again.expect("MARK=kept", 10*time.Second) // the replayed tail
	again.send("echo value=$MARK\n")
	again.expect("value=kept-2", 10*time.Second)

	// SSH through the CLI (its own client over the WebSocket), a command and its exit status.
	cmd := exec.Command(bin("nimbus"), "workspace", "ssh", "--server", w.base, "--token", w.token, itoa(id), "--",
		"echo ssh-$((6*7)) && cat notes.missing 2>/dev/null; exit 3")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(string(out), "ssh-42") {
		t.Fatalf("nimbus workspace ssh: %v, output %q", err, out)
	}

	// A preview: busybox httpd on 8686, served at the port's origin after a login.
	again.send("mkdir -p www && echo preview-ok > www/index.html; httpd -f -p 127.0.0.1:8686 -h \"$PWD/www\" & sleep 0.5; netstat -ltn | grep -q ':8686 ' && echo httpd-$((1+1))up\n")
	again.expect("httpd-2up", 10*time.Second)
	pc := w.previewClient()
	req, _ := http.NewRequest("GET", w.base+"/api/v1/workspaces/"+itoa(id)+"/preview/8686", nil)
	req.Header.Set("Authorization", "Bearer "+w.token)
	resp, err := pc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	login := resp.Header.Get("Location")
	if resp.StatusCode != 303 || !strings.Contains(login, "8686-"+itoa(id)+".preview.localhost") {
		t.Fatalf("preview redirect %d %q", resp.StatusCode, login)
	}
	resp, err = pc.Get(login)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "nimbus_preview" {
			cookie = c
		}
	}
	if resp.StatusCode != 303 || cookie == nil || !cookie.HttpOnly {
		t.Fatalf("preview login %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	// The login is single-use.
	if resp, err := pc.Get(login); err != nil || resp.StatusCode != 403 {
		t.Fatalf("a second use of the login: %v %v", resp, err)
	}
	previewURL := strings.Replace(v.PreviewURLTemplate, "{{port}}", "8686", 1)
	preq, _ := http.NewRequest("GET", previewURL, nil)
	preq.AddCookie(cookie)
	resp, err = pc.Do(preq)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != "preview-ok" {
		t.Fatalf("preview: %d %q", resp.StatusCode, body)
	}
	// The application never sees Nimbus's cookies: a CGI script prints what reached it.
	again.send("mkdir -p www/cgi-bin && printf '#!/bin/sh\\necho Content-Type: text/plain\\necho\\necho \"cookie=$HTTP_COOKIE\"\\n' > www/cgi-bin/env && chmod +x www/cgi-bin/env && echo cgi-$((2+2))\n")
	again.expect("cgi-4", 10*time.Second)
	creq, _ := http.NewRequest("GET", previewURL+"cgi-bin/env", nil)
	creq.AddCookie(cookie)
	creq.AddCookie(&http.Cookie{Name: "nimbus_session", Value: "a-session-it-must-not-see"})
	creq.AddCookie(&http.Cookie{Name: "app", Value: "1"})
	resp, err = pc.Do(creq)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != "cookie=app=1" {
		t.Fatalf("what the application saw: %d %q", resp.StatusCode, body)
	}
	// Without the credential, and with this workspace's credential on another workspace's
	// origin, there is nothing.
	if resp, err := pc.Get(previewURL); err != nil || resp.StatusCode != 404 {
		t.Fatalf("preview without a credential: %v %v", resp, err)
	}
	other, _ := http.NewRequest("GET", strings.Replace(previewURL, "-"+itoa(id)+".", "-"+itoa(id+1000)+".", 1), nil)
	other.AddCookie(cookie)
	if resp, err := pc.Do(other); err != nil || resp.StatusCode != 404 {
		t.Fatalf("the credential on another workspace: %v %v", resp, err)
	}
	// A port nothing listens on.
	closedReq, _ := http.NewRequest("GET", strings.Replace(v.PreviewURLTemplate, "{{port}}", "8687", 1), nil)
	tok := w.api.previewToken(id, 8687)
	closedReq.Header.Set("X-Nimbus-Preview-Token", tok.Token)
	if resp, err := pc.Do(closedReq); err != nil || resp.StatusCode != 502 {
		t.Fatalf("a closed port: %v %v", resp, err)
	}

	// Another team's user: 404 on every workspace URL.
	bob := newClient(t, w.base)
	bob.signup("bob")
	bob.createOrg("other")
	bobToken := bob.newToken("t", "repo:write")
	bobAPI := tokenClient(t, w.base, bobToken)
	for _, r := range []struct{ method, path string }{
		{"GET", "/api/v1/workspaces/" + itoa(id)},
		{"POST", "/api/v1/workspaces/" + itoa(id) + "/stop"},
		{"POST", "/api/v1/workspaces/" + itoa(id) + "/keepalive"},
		{"POST", "/api/v1/workspaces/" + itoa(id) + "/restore"},
		{"GET", "/api/v1/workspaces/" + itoa(id) + "/preview/8686"},
		{"POST", "/api/v1/workspaces/" + itoa(id) + "/preview/8686/token"},
		{"GET", "/api/v1/workspaces/" + itoa(id) + "/terminal"},
		{"GET", "/api/v1/workspaces/" + itoa(id) + "/ssh"},
		{"GET", "/api/v1/orgs/ml/workspaces"},
	} {
		var body any
		if r.path == "/api/v1/workspaces/"+itoa(id)+"/restore" {
			body = map[string]string{"ref": "refs/nimbus/workspaces/main/1"}
		}
		if code := bobAPI.do(r.method, r.path, body, nil); code != 404 {
			t.Errorf("bob %s %s: %d, want 404", r.method, r.path, code)
		}
	}
	bd := websocket.Dialer{Subprotocols: []string{"nimbus-terminal.v1"}}
	if _, resp, err := bd.Dial("ws"+strings.TrimPrefix(w.base, "http")+"/api/v1/workspaces/"+itoa(id)+"/terminal",
		http.Header{"Authorization": {"Bearer " + bobToken}}); err == nil || resp == nil || resp.StatusCode != 404 {
		t.Fatalf("bob's terminal WebSocket: %v %v", resp, err)
	}
	if items := bobAPI.workspaces("other"); len(items) != 0 {
		t.Fatalf("bob's team lists %d workspaces", len(items))
	}
	if items := w.api.workspaces("ml"); len(items) != 1 || items[0].ID != id {
		t.Fatalf("alice's team lists %+v", items)
	}

	// Stop: an uncommitted file is saved; the next workspace offers it and restores it.
	// (Expected output is computed by the shell, so the terminal's echo of the typed line
	// never matches it.)
	again.send("echo draft-7 > notes.txt && echo written-$((1+1))\n")
	again.expect("written-2", 10*time.Second)
	w.api.stopWorkspace(id)
	ended := w.waitWorkspace(id, time.Minute, "stopped", func(v apiclient.Workspace) bool { return v.State == "stopped" })
	if !strings.Contains(ended.Reason, "by the user") || !strings.Contains(ended.Reason, "work saved") {
		t.Fatalf("stopped with reason %q", ended.Reason)
	}
	next := w.openWorkspace(2 * time.Minute)
	nv := w.waitWorkspace(next, 10*time.Second, "offering the saved work", func(v apiclient.Workspace) bool { return len(v.SavedWork) > 0 })
	if nv.SavedWork[0].PipelineID != id {
		t.Fatalf("saved work %+v, want the one of workspace %d", nv.SavedWork, id)
	}
	if restored := w.api.restoreWorkspace(next, nv.SavedWork[0].Ref); fmt.Sprint(restored) != "[notes.txt www/cgi-bin/env www/index.html]" {
		t.Fatalf("restored %v", restored)
	}
	nt := w.dialTerminal(next, "")
	nt.send("cat notes.txt\n")
	nt.expect("draft-7", 10*time.Second)
}

// onlyPreview with launch (§2.4): the launch command serves port 8686 instead of an IDE, and
// the dashboard's "Open" goes to it.
func TestWorkspaceOnlyPreviewLaunch(t *testing.T) {
	w := newWorld(t)
	w.agent("")
	w.pushFiles(map[string]string{".cnb.yml": `$:
  vscode:
    - runner: { tags: cnb:arch:amd64, cpus: 1 }
      docker: { image: ` + w.image + ` }
      services:
        - name: vscode
          options:
            onlyPreview: true
            launch: mkdir -p /tmp/site && echo launched-app > /tmp/site/index.html && exec httpd -f -p 127.0.0.1:8686 -h /tmp/site
`})
	id := w.openWorkspace(2 * time.Minute)
	v := w.waitWorkspace(id, 30*time.Second, "reachable", func(v apiclient.Workspace) bool { return v.IDE != nil })
	if v.IDE.Kind != "launch" || v.IDE.URL == nil || !strings.HasSuffix(*v.IDE.URL, "/preview/8686") {
		t.Fatalf("ide %+v", v.IDE)
	}
	tok := w.api.previewToken(id, 8686)
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, _ := http.NewRequest("GET", tok.URL, nil)
		req.Header.Set("X-Nimbus-Preview-Token", tok.Token)
		resp, err := w.previewClient().Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.TrimSpace(string(b)) == "launched-app" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the launch command's server did not come through the preview: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
