package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/server/openapitest"
)

// client talks to the API as a browser would: cookie jar and CSRF header, or a bearer token.
type client struct {
	t     testing.TB
	base  string
	http  *http.Client
	csrf  string
	token string
}

func newClient(t testing.TB, base string) *client {
	jar, _ := cookiejar.New(nil)
	contract, err := openapitest.Shared()
	if err != nil {
		t.Fatal(err)
	}
	// Every answer the client gets is checked against the OpenAPI document: an undeclared status,
	// field or type fails the test that made the call.
	tr := contract.Transport(nil, func(err error) { t.Errorf("response does not match openapi.yaml: %v", err) })
	return &client{t: t, base: base, http: &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: tr}}
}

// do sends a JSON request and decodes the JSON answer into out (when non-nil); it returns the
// status.
func (c *client) do(method, path string, body any, out any) int {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.csrf != "" {
		req.Header.Set("X-CSRF-Token", c.csrf)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			c.t.Fatalf("%s %s: %d %q: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode
}

// must is do that fails the test unless the status is want.
func (c *client) must(want int, method, path string, body any, out any) {
	c.t.Helper()
	var raw json.RawMessage
	if got := c.do(method, path, body, &raw); got != want {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, got, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			c.t.Fatal(err)
		}
	}
}

// signup creates an account and keeps its session.
func (c *client) signup(username string) {
	c.t.Helper()
	var out struct {
		CSRF string `json:"csrf_token"`
	}
	c.must(201, "POST", "/api/v1/auth/signup", map[string]string{"email": username + "@example.com",
		"username": username, "password": "a long enough passphrase"}, &out)
	c.csrf = out.CSRF
}

// newToken creates a personal access token of the client's user and returns it.
func (c *client) newToken(name string, scopes ...string) string {
	c.t.Helper()
	var tok struct {
		Token string `json:"token"`
	}
	c.must(201, "POST", "/api/v1/user/tokens", map[string]any{"name": name, "scopes": scopes}, &tok)
	return tok.Token
}

// gitRun runs the real git client in dir with a throwaway HOME and no prompts.
func gitRun(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=E2E", "-c", "user.email=e2e@example.com",
		"-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}
