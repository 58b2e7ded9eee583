package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/gin-gonic/gin"

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
