package e2e

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nimbus-build/nimbus/backend/apiclient"
)

// The IDE: a workspace on an image with code-server (built from npm by
// e2e/testenv/code-server.sh, see CODE-SERVER.md) starts it on port 8686, and the dashboard's
// "Open in VS Code" link serves the workbench through the preview proxy, its WebSocket
// included. Building code-server takes 3–4 minutes cold, so this runs from the opt-in
// `make test-ide`, which sets NIMBUS_E2E_IDE=1 and the image.
func TestWorkspaceCodeServerThroughThePreview(t *testing.T) {
	if os.Getenv("NIMBUS_E2E_IDE") != "1" {
		t.Skip("opt-in: make test-ide builds code-server and runs this test")
	}
	image := os.Getenv("NIMBUS_TEST_CODE_SERVER_IMAGE")
	if image == "" {
		t.Fatal("NIMBUS_TEST_CODE_SERVER_IMAGE is not set: run e2e/testenv/code-server.sh (make test-ide does)")
	}
	w := newWorld(t)
	w.agent("")
	w.pushFiles(map[string]string{".cnb.yml": `$:
  vscode:
    - runner: { tags: cnb:arch:amd64, cpus: 2 }
      docker: { image: ` + image + ` }
      services: [vscode]
`})
	w.openIDE(t, "code-server")
}

// A workspace image without code-server gets the agent's IDE container beside it (CNB's
// two-container mode): the same tree, the workspace's network, served on its IDE port.
func TestWorkspaceSidecarCodeServer(t *testing.T) {
	if os.Getenv("NIMBUS_E2E_IDE") != "1" {
		t.Skip("opt-in: make test-ide builds code-server and runs this test")
	}
	image := os.Getenv("NIMBUS_TEST_CODE_SERVER_IMAGE")
	if image == "" {
		t.Fatal("NIMBUS_TEST_CODE_SERVER_IMAGE is not set: run e2e/testenv/code-server.sh (make test-ide does)")
	}
	w := newWorld(t)
	w.agent("", "NIMBUS_AGENT_WORKSPACE_IDE_IMAGE="+image)
	w.pushFiles(map[string]string{".cnb.yml": `$:
  vscode:
    - runner: { tags: cnb:arch:amd64, cpus: 2 }
      docker: { image: ` + w.image + ` }
      services: [vscode]
`})
	w.openIDE(t, "sidecar")
}

// openIDE opens a workspace whose IDE is kind and loads the workbench and its WebSocket
// through the dashboard's "Open in VS Code" link.
func (w *world) openIDE(t *testing.T, kind string) {
	id := w.openWorkspace(2 * time.Minute)
	v := w.waitWorkspace(id, 30*time.Second, "reachable", func(v apiclient.Workspace) bool { return v.IDE != nil })
	if v.IDE.Kind != kind || v.IDE.URL == nil {
		t.Fatalf("ide %+v, want %s", v.IDE, kind)
	}
	// The dashboard's link: a login on the IDE's origin, then the workbench.
	pc := w.previewClient()
	req, _ := http.NewRequest("GET", w.base+*v.IDE.URL, nil)
	req.Header.Set("Authorization", "Bearer "+w.token)
	resp, err := pc.Do(req)
	if err != nil || resp.StatusCode != 303 {
		t.Fatalf("Open in VS Code: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = pc.Get(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != 303 {
		t.Fatalf("the IDE origin's login: %v %v", resp, err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "nimbus_preview" {
			cookie = c
		}
	}
	ide := strings.Replace(v.PreviewURLTemplate, "{{port}}", "8686", 1)
	deadline := time.Now().Add(90 * time.Second) // code-server starts in seconds, more on a loaded machine
	var body string
	for {
		req, _ := http.NewRequest("GET", ide+"?folder=/workspace", nil) // where / redirects to
		req.AddCookie(cookie)
		resp, err := pc.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			if resp.StatusCode == 200 && strings.Contains(body, "workbench") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the workbench did not come through the preview: %v %.300q", err, body)
		}
		time.Sleep(time.Second)
	}
	// The workbench's WebSocket, through the proxy.
	d := websocket.Dialer{NetDialContext: pc.Transport.(*http.Transport).DialContext, HandshakeTimeout: 20 * time.Second}
	wsURL := "ws" + strings.TrimPrefix(ide, "http") + "?reconnectionToken=e2e-1&reconnection=false&skipWebSocketFrames=false"
	ws, resp, err := d.Dial(wsURL, http.Header{"Cookie": {cookie.Name + "=" + cookie.Value}})
	if err != nil {
		t.Fatalf("the workbench WebSocket through the preview: %v %v", resp, err)
	}
	ws.Close()
}
