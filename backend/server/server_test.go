package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/redisconn"
	"github.com/nimbus-build/nimbus/backend/reqlog"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// syncBuffer is a log sink that the server writes to from request goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type routes func(root *gin.Engine, v1 *gin.RouterGroup)

func (r routes) Routes(root *gin.Engine, v1 *gin.RouterGroup) { r(root, v1) }

type fixture struct {
	srv   *Server
	redis *redisconn.Conn
	logs  *syncBuffer
}

func newFixture(t *testing.T, d Deps) *fixture {
	t.Helper()
	rc, err := redisconn.Connect(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	logs := &syncBuffer{}
	d.DB = storetest.SQLite(t)
	d.Redis = rc.Client
	d.Log = reqlog.New(logs, "json", "debug")
	d.Version = "test"
	return &fixture{srv: New(d), redis: rc, logs: logs}
}

func (f *fixture) do(method, target string, body io.Reader, hdr ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, body)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(w, req)
	return w
}

func errorCode(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var env struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil || env.Error == nil || env.Error.Message == "" {
		t.Fatalf("not an error envelope (%v): %s", err, w.Body.String())
	}
	return env.Error.Code
}

func TestHealthAndReadiness(t *testing.T) {
	f := newFixture(t, Deps{})
	if w := f.do("GET", "/healthz", nil); w.Code != 200 || !strings.Contains(w.Body.String(), `"ok"`) {
		t.Fatalf("healthz: %d %s", w.Code, w.Body)
	}
	if w := f.do("GET", "/readyz", nil); w.Code != 200 || !strings.Contains(w.Body.String(), `"ready"`) {
		t.Fatalf("readyz: %d %s", w.Code, w.Body)
	}
	f.redis.Close() // Redis gone: not ready, and the body says which check failed
	w := f.do("GET", "/readyz", nil)
	if w.Code != http.StatusServiceUnavailable || errorCode(t, w) != "unavailable" || !strings.Contains(w.Body.String(), "redis") {
		t.Fatalf("readyz without redis: %d %s", w.Code, w.Body)
	}
	if w := f.do("GET", "/healthz", nil); w.Code != 200 {
		t.Fatalf("healthz must not depend on redis: %d", w.Code)
	}
}

func TestReadinessFailsWhileDraining(t *testing.T) {
	f := newFixture(t, Deps{})
	f.srv.startDrain()
	w := f.do("GET", "/readyz", nil)
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "shutting down") {
		t.Fatalf("readyz while draining: %d %s", w.Code, w.Body)
	}
}

func TestErrorEnvelopeEverywhere(t *testing.T) {
	f := newFixture(t, Deps{Modules: []Module{routes(func(_ *gin.Engine, v1 *gin.RouterGroup) {
		v1.GET("/boom", func(c *gin.Context) { panic("kaboom") })
		v1.GET("/thing", func(c *gin.Context) { c.JSON(200, gin.H{}) })
	})}})
	tests := []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/api/v1/nope", 404, "not_found"},
		{"GET", "/api", 404, "not_found"},
		{"POST", "/api/v1/thing", 405, "method_not_allowed"},
		{"GET", "/api/v1/boom", 500, "internal"},
		{"POST", "/some/page", 404, "not_found"},
	}
	for _, tt := range tests {
		w := f.do(tt.method, tt.path, nil)
		if w.Code != tt.status || errorCode(t, w) != tt.code {
			t.Errorf("%s %s: %d %s", tt.method, tt.path, w.Code, w.Body)
		}
		if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s %s: content type %q", tt.method, tt.path, ct)
		}
	}
	if !strings.Contains(f.logs.String(), "kaboom") {
		t.Error("panic was not logged")
	}
}

func TestRequestIDOnResponseAndEveryLogLine(t *testing.T) {
	var f *fixture
	f = newFixture(t, Deps{Modules: []Module{routes(func(_ *gin.Engine, v1 *gin.RouterGroup) {
		v1.GET("/work", func(c *gin.Context) {
			// A domain logs with the request context and nothing else; the id arrives by itself.
			f.srv.deps.Log.InfoContext(c.Request.Context(), "handler work")
			c.JSON(200, gin.H{})
		})
	})}})
	w := f.do("GET", "/api/v1/work", nil, HeaderRequestID, "client-id-1")
	if got := w.Header().Get(HeaderRequestID); got != "client-id-1" {
		t.Fatalf("kept id = %q", got)
	}
	w = f.do("GET", "/api/v1/work", nil, HeaderRequestID, "bad id\nforged")
	gen := w.Header().Get(HeaderRequestID)
	if gen == "" || strings.Contains(gen, "forged") {
		t.Fatalf("unsafe id kept: %q", gen)
	}
	var sawClient, sawGen bool
	for _, line := range strings.Split(strings.TrimSpace(f.logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if rec["msg"] == "http request" || rec["msg"] == "handler work" {
			switch rec["request_id"] {
			case "client-id-1":
				sawClient = true
			case gen:
				sawGen = true
			default:
				t.Errorf("access log line without the request id: %v", rec)
			}
		}
	}
	if !sawClient || !sawGen {
		t.Fatalf("access log lines missing: %s", f.logs.String())
	}
}

func TestMetricsCountRequestsByRoute(t *testing.T) {
	f := newFixture(t, Deps{})
	f.do("GET", "/healthz", nil)
	f.do("GET", "/api/v1/missing/repo-a", nil)
	f.do("GET", "/api/v1/missing/repo-b", nil)
	w := f.do("GET", "/metrics", nil)
	body := w.Body.String()
	for _, want := range []string{
		`nimbus_http_requests_total{method="GET",route="/healthz",status="200"} 1`,
		`nimbus_http_requests_total{method="GET",route="unmatched",status="404"} 2`,
		"go_goroutines",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(body, "repo-a") {
		t.Error("raw paths leak into metric labels")
	}
}

func TestDashboardServing(t *testing.T) {
	dist := fstest.MapFS{
		"index.html":        {Data: []byte("<html>dashboard</html>")},
		"assets/app-abc.js": {Data: []byte("console.log(1)")},
	}
	f := newFixture(t, Deps{Frontend: dist})
	if w := f.do("GET", "/", nil); w.Code != 200 || !strings.Contains(w.Body.String(), "dashboard") {
		t.Fatalf("/: %d %s", w.Code, w.Body)
	}
	if w := f.do("GET", "/org/repo/builds/3", nil); w.Code != 200 || !strings.Contains(w.Body.String(), "dashboard") {
		t.Fatalf("client route: %d %s", w.Code, w.Body)
	}
	w := f.do("GET", "/assets/app-abc.js", nil)
	if w.Code != 200 || w.Body.String() != "console.log(1)" || !strings.Contains(w.Header().Get("Cache-Control"), "immutable") {
		t.Fatalf("asset: %d %q %v", w.Code, w.Body, w.Header())
	}
	if w := f.do("GET", "/../../etc/passwd", nil); strings.Contains(w.Body.String(), "root:") {
		t.Fatal("path traversal")
	}

	bare := newFixture(t, Deps{Frontend: fstest.MapFS{}})
	if w := bare.do("GET", "/", nil); w.Code != 200 || !strings.Contains(w.Body.String(), "make build") {
		t.Fatalf("placeholder: %d %s", w.Code, w.Body)
	}
}

func TestGracefulShutdownDrainsLongPollsAndInflight(t *testing.T) {
	var f *fixture
	slowStarted := make(chan struct{})
	pollStarted := make(chan struct{})
	f = newFixture(t, Deps{Modules: []Module{routes(func(_ *gin.Engine, v1 *gin.RouterGroup) {
		v1.GET("/slow", func(c *gin.Context) {
			close(slowStarted)
			time.Sleep(500 * time.Millisecond) // in flight when the shutdown starts
			c.JSON(200, gin.H{"done": true})
		})
		v1.GET("/poll", func(c *gin.Context) {
			close(pollStarted)
			select {
			case <-f.srv.Draining():
				c.Status(http.StatusNoContent)
			case <-time.After(time.Minute):
				c.JSON(200, gin.H{"work": "none"})
			}
		})
	})}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- f.srv.Serve(ctx, ln, 10*time.Second) }()
	base := "http://" + ln.Addr().String()

	type result struct {
		status int
		err    error
	}
	get := func(path string, out chan<- result) {
		resp, err := http.Get(base + path)
		if err != nil {
			out <- result{err: err}
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		out <- result{status: resp.StatusCode}
	}
	slow, poll := make(chan result, 1), make(chan result, 1)
	go get("/api/v1/slow", slow)
	go get("/api/v1/poll", poll)
	<-slowStarted
	<-pollStarted

	start := time.Now()
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("shutdown took %v: the long-poll was not released", took)
	}
	if r := <-slow; r.err != nil || r.status != 200 {
		t.Fatalf("in-flight request: %+v", r)
	}
	if r := <-poll; r.err != nil || r.status != http.StatusNoContent {
		t.Fatalf("long-poll: %+v", r)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("server still accepts connections after shutdown")
	}
}

func TestClientIPIgnoresForwardedForFromUntrustedPeers(t *testing.T) {
	var seen []string
	mk := func(proxies []string) *fixture {
		var f *fixture
		f = newFixture(t, Deps{TrustedProxies: proxies, Modules: []Module{routes(func(_ *gin.Engine, v1 *gin.RouterGroup) {
			v1.GET("/ip", func(c *gin.Context) { seen = append(seen, c.ClientIP()); c.Status(204) })
		})}})
		return f
	}
	mk(nil).do("GET", "/api/v1/ip", nil, "X-Forwarded-For", "6.6.6.6")
	mk([]string{"192.0.2.0/24"}).do("GET", "/api/v1/ip", nil, "X-Forwarded-For", "6.6.6.6")
	// httptest requests come from 192.0.2.1: trusted only in the second server.
	if len(seen) != 2 || seen[0] != "192.0.2.1" || seen[1] != "6.6.6.6" {
		t.Fatalf("client IPs %v, want [192.0.2.1 6.6.6.6]", seen)
	}
}

// protocolStub stands in for git or the registry: it says who served or refused a request.
type protocolStub struct{ name string }

func (p protocolStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, p.name+" served")
}

func (p protocolStub) Refuse(w http.ResponseWriter, r *http.Request, status int, message string) {
	http.Error(w, p.name+" refused: "+message, status)
}

// TestEdgeRefusesURLsThatNameNothing: a URL whose path or query is not valid UTF-8 (or holds a
// control character), or whose path has an empty, "." or ".." segment, is a 400 before any
// route sees it, in the dialect of whoever serves the path. Such URLs used to reach the
// handlers: on PostgreSQL every lookup of a name like "\xff" failed (SQLSTATE 22021) and the
// request was a 500 with an ERROR line, and an empty segment was bound to a parameter as "".
func TestEdgeRefusesURLsThatNameNothing(t *testing.T) {
	var reached []string
	f := newFixture(t, Deps{Frontend: fstest.MapFS{"index.html": {Data: []byte("<html>dashboard</html>")}},
		Git: protocolStub{"git"}, Registry: protocolStub{"registry"},
		Modules: []Module{routes(func(_ *gin.Engine, v1 *gin.RouterGroup) {
			v1.GET("/orgs/:org", func(c *gin.Context) {
				reached = append(reached, c.Param("org"))
				c.JSON(200, gin.H{"org": c.Param("org")})
			})
			v1.GET("/files/*path", func(c *gin.Context) {
				reached = append(reached, c.Param("path"))
				c.JSON(200, gin.H{})
			})
		})}})
	for _, tc := range []struct {
		target, say string
	}{
		{"/api/v1/orgs/%ff", "the URL path is not valid UTF-8"},
		{"/api/v1/orgs/%FF", "the URL path is not valid UTF-8"},
		{"/api/v1/orgs/%c3%28", "the URL path is not valid UTF-8"},
		{"/api/v1/orgs/%C0%AF", "the URL path is not valid UTF-8"},
		{"/api/v1/orgs/%ED%A0%80", "the URL path is not valid UTF-8"},
		{"/api/v1/orgs/a%00b", "the URL path holds a control character"},
		{"/api/v1/orgs/a%0Ab", "the URL path holds a control character"},
		{"/api/v1/orgs/x?q=%ff", `the URL query parameter "q" is not valid UTF-8`},
		{"/api/v1/orgs/x?%ff=1", `the URL query parameter "\xff" is not valid UTF-8`},
		{"/api/v1/orgs/x?q=a%00", `the URL query parameter "q" holds a control character`},
		{"/api/v1/orgs/..", `the URL path has a ".." segment`},
		{"/api/v1/orgs/%2e%2e", `the URL path has a ".." segment`},
		{"/api/v1/orgs/.", `the URL path has a "." segment`},
		{"/api/v1/files/a/../b", `the URL path has a ".." segment`},
		{"/api/v1/files/..%2Fb", `the URL path has a ".." segment`},
		{"/api/v1/files//etc/passwd", `the URL path has an empty segment ("//")`},
		{"/api/v1/files/a%2F%2Fb", `the URL path has an empty segment ("//")`},
		{"/api/v1//orgs/x", `the URL path has an empty segment ("//")`},
		{"//api/v1/orgs/x", `the URL path has an empty segment ("//")`},
		{"/acme/%ff", "the URL path is not valid UTF-8"}, // a dashboard page
		{"/acme//repo", `the URL path has an empty segment ("//")`},
		{"/acme//app.git/info/refs?service=git-upload-pack", `the URL path has an empty segment ("//")`}, // no git path
	} {
		w := f.do("GET", tc.target, nil)
		var env struct{ Error api.Body }
		json.Unmarshal(w.Body.Bytes(), &env)
		if w.Code != 400 || env.Error.Code != "bad_request" || env.Error.Message != tc.say {
			t.Errorf("GET %s: %d %s, want 400 bad_request saying %q", tc.target, w.Code, w.Body, tc.say)
		}
	}
	for _, tc := range []struct{ target, want string }{
		{"/v2/acme/%FF/tags/list", "registry refused: the URL path is not valid UTF-8"},
		{"/v2/acme/../other/tags/list", `registry refused: the URL path has a ".." segment`},
		{"/acme/app.git/info/refs?service=git-upload-pack&x=%ff", `git refused: the URL query parameter "x" is not valid UTF-8`},
		{"/acme/app.git/../info/refs?service=git-upload-pack", `git refused: the URL path has a ".." segment`},
	} {
		if w := f.do("GET", tc.target, nil); w.Code != 400 || strings.TrimSpace(w.Body.String()) != tc.want {
			t.Errorf("GET %s: %d %q, want 400 %q", tc.target, w.Code, w.Body, tc.want)
		}
	}
	if len(reached) != 0 {
		t.Errorf("refused URLs reached their handlers with %q", reached)
	}
	// What names something passes: UTF-8 names, a trailing slash (no route here, but the
	// registry's uploads end in one), the protocols' own paths.
	for _, tc := range []struct {
		target string
		status int
		body   string
	}{
		{"/api/v1/orgs/caf%C3%A9", 200, `"org":"café"`},
		{"/api/v1/orgs/%E5%8A%9F%E8%83%BD?q=%E2%9C%93", 200, `"org":"功能"`},
		{"/api/v1/files/a/b.yml", 200, "{}"},
		{"/api/v1/orgs/x/", 404, "not_found"},
		{"/v2/", 200, "registry served"},
		{"/v2/acme/app/blobs/uploads/", 200, "registry served"},
		{"/acme/app.git/info/refs?service=git-upload-pack", 200, "git served"},
		{"/acme/app/builds/1", 200, "dashboard"},
	} {
		if w := f.do("GET", tc.target, nil); w.Code != tc.status || !strings.Contains(w.Body.String(), tc.body) {
			t.Errorf("GET %s: %d %s, want %d with %q", tc.target, w.Code, w.Body, tc.status, tc.body)
		}
	}
	if strings.Contains(f.logs.String(), `"level":"ERROR"`) {
		t.Errorf("the edge logged an ERROR:\n%s", f.logs.String())
	}
}

// An agent's timed polls that bring no news are logged at DEBUG; a lease, and anything that
// fails, stay at INFO or above.
func TestRoutineAgentTrafficLogsAtDebug(t *testing.T) {
	var f *fixture
	leased := false
	f = newFixture(t, Deps{Modules: []Module{routes(func(root *gin.Engine, _ *gin.RouterGroup) {
		root.POST("/api/v1/agent/poll", func(c *gin.Context) {
			if leased {
				c.JSON(200, gin.H{"lease_id": "l"})
				return
			}
			c.Status(204)
		})
		root.POST("/api/v1/agent/leases/:lease/renew", func(c *gin.Context) { c.JSON(200, gin.H{}) })
		root.POST("/api/v1/agent/control", func(c *gin.Context) { c.JSON(409, gin.H{"code": "x"}) })
	})}})
	f.do("POST", "/api/v1/agent/poll", nil)
	f.do("POST", "/api/v1/agent/leases/l1/renew", nil)
	leased = true
	f.do("POST", "/api/v1/agent/poll", nil)
	f.do("POST", "/api/v1/agent/control", nil)
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(f.logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if rec["msg"] == "http request" {
			got = append(got, fmt.Sprintf("%v %v %v", rec["path"], rec["status"], rec["level"]))
		}
	}
	want := []string{
		"/api/v1/agent/poll 204 DEBUG",
		"/api/v1/agent/leases/l1/renew 200 DEBUG",
		"/api/v1/agent/poll 200 INFO",
		"/api/v1/agent/control 409 INFO",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("access log levels:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
