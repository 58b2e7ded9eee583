package git

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// server is a Handler behind a real loopback HTTP server, with a resolver that knows two
// users and a few repos, and records of what it served and what OnPush saw.
type server struct {
	t       *testing.T
	h       *Handler
	srv     *httptest.Server
	root    string
	mu      sync.Mutex
	repos   map[string]testRepo // "org/repo"
	pushes  []push
	served  []served
	resolve int // Resolve calls
	// hideWriter serves through a writer without Unwrap, like a careless middleware.
	hideWriter bool
	// reply is what OnPush answers for a push (nil: no lines).
	reply func(repo Repo, updates []RefUpdate) []string
	logs  syncBuffer
}

// syncBuffer is a bytes.Buffer for a logger that several requests write to at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type testRepo struct {
	id     int64
	public bool
	path   string
}

type push struct {
	repo    Repo
	updates []RefUpdate
}

// served is one request as the server saw it.
type served struct {
	method, path, query string
	status              int
	gitProtocol         string
	chunked             bool
	wwwAuthenticate     string
}

// The users: dev may push, reader may only read; any other credentials are wrong.
var testUsers = map[string]struct {
	pass  string
	id    int64
	write bool
}{
	"dev":    {"devpass", 1, true},
	"reader": {"readpass", 2, false},
}

func newServer(t *testing.T, opts ...func(*HandlerConfig)) *server {
	t.Helper()
	s := &server{t: t, root: t.TempDir(), repos: map[string]testRepo{}}
	cfg := HandlerConfig{
		Resolve: s.resolveRepo,
		OnPush: func(ctx context.Context, repo Repo, updates []RefUpdate) []string {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.pushes = append(s.pushes, push{repo, updates})
			if s.reply == nil {
				return nil
			}
			return s.reply(repo, updates)
		},
		WorkDir: filepath.Join(t.TempDir(), "work"),
		Logger:  slog.New(slog.NewTextHandler(&s.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, o := range opts {
		o(&cfg)
	}
	h, err := NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.h = h
	s.srv = httptest.NewServer(http.HandlerFunc(s.record))
	t.Cleanup(func() {
		s.srv.Close()
		if t.Failed() {
			t.Logf("handler log:\n%s", s.logs.String())
		}
		// Every push removes its own log: nothing may be left once the server is idle.
		left, err := os.ReadDir(h.pushDir)
		if err != nil || len(left) != 0 {
			t.Errorf("push logs left behind: %v %v", left, err)
		}
	})
	return s
}

// addRepo creates org/name on disk and makes Resolve know it.
func (s *server) addRepo(org, name string, public bool) string {
	s.t.Helper()
	s.mu.Lock()
	id := int64(len(s.repos) + 1)
	s.mu.Unlock()
	path := newBare(s.t, filepath.Join(s.root, fmt.Sprintf("%d.git", id)))
	s.mu.Lock()
	s.repos[org+"/"+name] = testRepo{id: id, public: public, path: path}
	s.mu.Unlock()
	return path
}

func (s *server) resolveRepo(ctx context.Context, r *http.Request, org, name string, write bool) (Repo, error) {
	s.mu.Lock()
	s.resolve++
	repo, found := s.repos[org+"/"+name]
	s.mu.Unlock()
	username, pass, hasAuth := r.BasicAuth()
	user, known := testUsers[username]
	switch {
	case hasAuth && (!known || user.pass != pass):
		return Repo{}, ErrUnauthenticated
	case !found:
		return Repo{}, ErrNotFound
	case !hasAuth && (write || !repo.public):
		return Repo{}, ErrUnauthenticated
	case write && !user.write:
		return Repo{}, fmt.Errorf("user %s: %w", username, ErrForbidden)
	}
	out := Repo{ID: repo.id, Path: repo.path}
	if hasAuth {
		out.UserID, out.User = user.id, username
	}
	return out, nil
}

// record serves through the handler and remembers the request and its status.
func (s *server) record(w http.ResponseWriter, r *http.Request) {
	rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	s.mu.Lock()
	hide := s.hideWriter
	s.mu.Unlock()
	if hide {
		s.h.ServeHTTP(struct{ http.ResponseWriter }{rec}, r)
	} else {
		s.h.ServeHTTP(rec, r)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.served = append(s.served, served{
		method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, status: rec.status,
		gitProtocol:     r.Header.Get("Git-Protocol"),
		chunked:         slices.Contains(r.TransferEncoding, "chunked"),
		wwwAuthenticate: rec.Header().Get("WWW-Authenticate"),
	})
}

// statusWriter notes the status. Unwrap lets http.ResponseController reach the real writer,
// as every middleware in front of the handler must allow.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// workTree clones org/repo as dev into dir/wt, for a test to commit and push from.
func (s *server) workTree(org, repo string) (env []string, dir, wt string) {
	s.t.Helper()
	env, dir = clientEnv(s.t), s.t.TempDir()
	wt = filepath.Join(dir, "wt")
	gitOK(s.t, env, dir, "clone", "-q", s.url("dev", org, repo), wt)
	return env, dir, wt
}

// url is the clone URL of org/repo, with user:pass when user is not "".
func (s *server) url(user, org, repo string) string {
	u := strings.TrimPrefix(s.srv.URL, "http://")
	if user != "" {
		u = user + ":" + testUsers[user].pass + "@" + u
	}
	return "http://" + u + "/" + org + "/" + repo + ".git"
}

// takePushes returns and forgets what OnPush saw so far.
func (s *server) takePushes() []push {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pushes
	s.pushes = nil
	return p
}

// takeServed returns and forgets the requests served so far.
func (s *server) takeServed() []served {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.served
	s.served = nil
	return r
}

// wantPush checks that exactly one OnPush call happened since the last take, for repoID,
// with exactly these updates.
func (s *server) wantPush(repoID int64, want ...RefUpdate) {
	s.t.Helper()
	got := s.takePushes()
	if len(got) != 1 {
		s.t.Fatalf("OnPush calls = %+v, want one with %+v", got, want)
	}
	if got[0].repo.ID != repoID || !slices.Equal(got[0].updates, want) {
		s.t.Fatalf("OnPush(repo %d, %+v), want (repo %d, %+v)", got[0].repo.ID, got[0].updates, repoID, want)
	}
}

// rawGet sends path exactly as given (no client-side cleaning or escaping) and returns the
// status, so the tests see what a hostile client could send.
func (s *server) rawGet(method, path, auth string) int {
	s.t.Helper()
	conn, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		s.t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n", method, path)
	if auth != "" {
		fmt.Fprintf(conn, "Authorization: Basic %s\r\n", auth)
	}
	fmt.Fprintf(conn, "Content-Length: 0\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
