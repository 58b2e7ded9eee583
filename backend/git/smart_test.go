package git

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestPushAndFetch walks a repo's life with the real client: clone while empty, push a
// branch, a second branch, a tag, several refs at once, a rejected push, a deletion, then
// fetch and clone over protocol v2 and v0. OnPush must see exactly the refs git updated.
func TestPushAndFetch(t *testing.T) {
	s := newServer(t)
	bare := s.addRepo("acme", "app", false)
	env := clientEnv(t)
	dir := t.TempDir()
	wt := filepath.Join(dir, "wt")
	url := s.url("dev", "acme", "app")

	out := gitOK(t, env, dir, "clone", url, wt)
	if !strings.Contains(out, "empty repository") {
		t.Fatalf("clone of an empty repo said %q", out)
	}

	c1 := commit(t, env, wt, map[string]string{".cnb.yml": "main: {}\n"}, "one")
	gitOK(t, env, wt, "push", "origin", "main")
	s.wantPush(1, RefUpdate{ZeroSHA, c1, "refs/heads/main"})

	gitOK(t, env, wt, "checkout", "-q", "-b", "dev")
	c2 := commit(t, env, wt, map[string]string{"dev.txt": "dev\n"}, "two")
	gitOK(t, env, wt, "push", "origin", "dev")
	s.wantPush(1, RefUpdate{ZeroSHA, c2, "refs/heads/dev"})

	gitOK(t, env, wt, "tag", "-a", "-m", "v1", "v1", c1)
	tag := gitOK(t, env, wt, "rev-parse", "v1")
	gitOK(t, env, wt, "push", "origin", "v1")
	s.wantPush(1, RefUpdate{ZeroSHA, tag, "refs/tags/v1"})

	// Several refs in one push arrive in one call.
	gitOK(t, env, wt, "push", "origin", "dev:refs/heads/a", "dev:refs/heads/b")
	s.wantPush(1, RefUpdate{ZeroSHA, c2, "refs/heads/a"}, RefUpdate{ZeroSHA, c2, "refs/heads/b"})

	// A fast-forward of main plus a non-fast-forward of a: git updates main only, and only
	// main reaches OnPush.
	gitOK(t, env, wt, "checkout", "-q", "main")
	c3 := commit(t, env, wt, map[string]string{"main.txt": "3\n"}, "three")
	if out, err := gitTry(t, env, wt, "push", "origin", "main", "main:refs/heads/a"); err == nil {
		t.Fatalf("a non-fast-forward push succeeded:\n%s", out)
	}
	s.wantPush(1, RefUpdate{c1, c3, "refs/heads/main"})

	// Nothing to update: no call at all.
	gitOK(t, env, wt, "push", "origin", "main")
	if p := s.takePushes(); len(p) != 0 {
		t.Fatalf("an up-to-date push reached OnPush: %+v", p)
	}

	gitOK(t, env, wt, "push", "origin", "--delete", "dev")
	s.wantPush(1, RefUpdate{c2, ZeroSHA, "refs/heads/dev"})

	if got, err := Branches(context.Background(), bare); err != nil || !slices.Equal(got, []string{"a", "b", "main"}) {
		t.Fatalf("branches on the server: %q, %v", got, err)
	}

	// Fetch into the first clone, then fresh clones over v2 and v0.
	gitOK(t, env, wt, "fetch", "--prune", "origin")
	if got := gitOK(t, env, wt, "rev-parse", "origin/main"); got != c3 {
		t.Fatalf("fetched origin/main = %s, want %s", got, c3)
	}
	s.takeServed()
	for _, version := range []string{"2", "0"} {
		dst := filepath.Join(dir, "v"+version)
		gitOK(t, env, dir, "-c", "protocol.version="+version, "clone", "-q", url, dst)
		if got := gitOK(t, env, dst, "rev-parse", "HEAD"); got != c3 {
			t.Fatalf("v%s clone HEAD = %s, want %s", version, got, c3)
		}
		sawV2 := false
		for _, r := range s.takeServed() {
			sawV2 = sawV2 || r.gitProtocol == "version=2" && r.status == http.StatusOK
		}
		if sawV2 != (version == "2") {
			t.Fatalf("protocol v%s clone: server saw Git-Protocol version=2: %v", version, sawV2)
		}
	}
	// A partial clone, as agents use for repos with big files.
	gitOK(t, env, dir, "clone", "-q", "--filter=blob:none", url, filepath.Join(dir, "partial"))
}

// TestAuth checks the answers git relies on: 401 with a Basic challenge makes the client retry
// with its credentials; 403 and 404 end the attempt.
func TestAuth(t *testing.T) {
	s := newServer(t)
	s.addRepo("acme", "pub", true)
	s.addRepo("acme", "priv", false)
	env := clientEnv(t)
	dir := t.TempDir()

	// Anonymous clone of a public repo: no challenge at all.
	gitOK(t, env, dir, "clone", "-q", s.url("", "acme", "pub"), filepath.Join(dir, "anon"))
	for _, r := range s.takeServed() {
		if r.status != http.StatusOK {
			t.Fatalf("anonymous clone of a public repo: %+v", r)
		}
	}

	// Seed the public repo as dev. git first asks without credentials, gets 401 and the
	// challenge, and retries with the user:pass of the URL.
	seed := filepath.Join(dir, "seed")
	gitOK(t, env, dir, "clone", "-q", s.url("dev", "acme", "pub"), seed)
	commit(t, env, seed, map[string]string{"x": "x\n"}, "x")
	s.takeServed()
	gitOK(t, env, seed, "push", "-q", "origin", "main")
	var statuses []string
	for _, r := range s.takeServed() {
		statuses = append(statuses, fmt.Sprintf("%s %s?%s %d", r.method, r.path, r.query, r.status))
		if r.status == http.StatusUnauthorized && r.wwwAuthenticate != `Basic realm="Nimbus"` {
			t.Fatalf("401 without the Basic challenge: %+v", r)
		}
	}
	want := []string{
		"GET /acme/pub.git/info/refs?service=git-receive-pack 401",
		"GET /acme/pub.git/info/refs?service=git-receive-pack 200",
		"POST /acme/pub.git/git-receive-pack? 200",
	}
	if !slices.Equal(statuses, want) {
		t.Fatalf("push requests:\n%s\nwant:\n%s", strings.Join(statuses, "\n"), strings.Join(want, "\n"))
	}
	s.wantPush(1, RefUpdate{ZeroSHA, gitOK(t, env, seed, "rev-parse", "HEAD"), "refs/heads/main"})

	fails := []struct {
		name   string
		args   []string
		status int
		say    string // what git tells the user
	}{
		{"anonymous push to a public repo", []string{"push", s.url("", "acme", "pub"), "HEAD:refs/heads/anon"}, 401, "could not read Username"},
		{"anonymous clone of a private repo", []string{"clone", s.url("", "acme", "priv"), filepath.Join(dir, "p1")}, 401, "could not read Username"},
		{"wrong password", []string{"clone", strings.Replace(s.url("dev", "acme", "priv"), "devpass", "nope", 1), filepath.Join(dir, "p2")}, 401, "Authentication failed"},
		{"reader pushes", []string{"push", s.url("reader", "acme", "pub"), "HEAD:refs/heads/r"}, 403, "403"},
		{"unknown repo", []string{"clone", s.url("dev", "acme", "nope"), filepath.Join(dir, "p3")}, 404, "not found"},
	}
	for _, tc := range fails {
		t.Run(tc.name, func(t *testing.T) {
			out, err := gitTry(t, env, seed, tc.args...)
			if err == nil || !strings.Contains(out, tc.say) {
				t.Fatalf("err = %v, output:\n%s\nwant it to say %q", err, out, tc.say)
			}
			got := s.takeServed()
			if len(got) == 0 || got[len(got)-1].status != tc.status {
				t.Fatalf("served %+v, want the last with status %d", got, tc.status)
			}
		})
	}
	if p := s.takePushes(); len(p) != 0 {
		t.Fatalf("refused pushes reached OnPush: %+v", p)
	}

	// The reader may clone the private repo.
	gitOK(t, env, dir, "clone", "-q", s.url("reader", "acme", "priv"), filepath.Join(dir, "p4"))
}

// TestRouting sends paths no git client would: every one is a 404 (or 405 for a wrong
// method) decided before Resolve is ever asked.
func TestRouting(t *testing.T) {
	s := newServer(t)
	s.addRepo("acme", "app", true)
	auth := base64.StdEncoding.EncodeToString([]byte("dev:devpass"))
	const svc = "?service=git-upload-pack"

	if got := s.rawGet("GET", "/acme/app.git/info/refs"+svc, auth); got != http.StatusOK {
		t.Fatalf("the control request got %d", got)
	}
	s.mu.Lock()
	s.resolve = 0
	s.mu.Unlock()
	cases := []struct {
		method, path string
		want         int
	}{
		{"GET", "/../app.git/info/refs" + svc, 404},
		{"GET", "/acme/../app.git/info/refs" + svc, 404},
		{"GET", "/acme/app.git/../../etc/passwd", 404},
		{"GET", "/%2e%2e/app.git/info/refs" + svc, 404},
		{"GET", "/acme/%2e%2e.git/info/refs" + svc, 404},
		{"GET", "/acme/%2E%2E%2Fx.git/info/refs" + svc, 404},
		{"GET", "/acme%2Fapp.git/info/refs" + svc, 404},
		{"GET", "/acme/a%2Fb.git/info/refs" + svc, 404},
		{"GET", "/acme/app%2egit/info/refs" + svc, 404},
		{"GET", "/acme/x/app.git/info/refs" + svc, 404},
		{"GET", "//acme/app.git/info/refs" + svc, 404},
		{"GET", "/acme//app.git/info/refs" + svc, 404},
		{"GET", "/acme/app.git.git/info/refs" + svc, 404},
		{"GET", "/acme/.app.git/info/refs" + svc, 404},
		{"GET", "/-acme/app.git/info/refs" + svc, 404},
		{"GET", "/acme/app/info/refs" + svc, 404},
		{"GET", "/acme/app.git/info/refs/" + svc, 404},
		{"GET", "/acme/app.git/info/refs", 404}, // dumb protocol
		{"GET", "/acme/app.git/info/refs?service=git-upload-archive", 404},
		{"GET", "/acme/app.git/HEAD", 404},
		{"GET", "/acme/app.git/objects/info/packs", 404},
		{"GET", "/acme/app.git/config", 404},
		{"GET", "/acme/app.git", 404},
		{"GET", "/", 404},
		{"GET", "/acme/app.git/git-upload-pack", 405},
		{"POST", "/acme/app.git/info/refs" + svc, 405},
		{"PUT", "/acme/app.git/git-receive-pack", 405},
	}
	for _, tc := range cases {
		if got := s.rawGet(tc.method, tc.path, auth); got != tc.want {
			t.Errorf("%s %s = %d, want %d", tc.method, tc.path, got, tc.want)
		}
	}
	s.mu.Lock()
	asked := s.resolve
	s.mu.Unlock()
	if asked != 0 {
		t.Errorf("Resolve was asked %d times for refused paths", asked)
	}
	if got := s.rawGet("GET", "/acme/nope.git/info/refs"+svc, auth); got != http.StatusNotFound {
		t.Errorf("unknown repo = %d, want 404", got)
	}
}

// TestRoutesList: every route Routes lists is one the handler routes (the server's bad-input
// sweep takes its git routes from Routes).
func TestRoutesList(t *testing.T) {
	routes := Routes()
	if len(routes) != 6 {
		t.Fatalf("routes: %+v", routes)
	}
	for _, rt := range routes {
		r := httptest.NewRequest(rt.Method, strings.NewReplacer("{org}", "acme", "{repo}", "app").Replace(rt.Path), nil)
		if req, _, ok := route(r); !ok || req.org != "acme" || req.repo != "app" {
			t.Errorf("%s %s is not routed: %+v", rt.Method, rt.Path, req)
		}
	}
}

func TestValidName(t *testing.T) {
	good := []string{"a", "A", "0", "app", "my-app", "my_app", "v1.2", "x.github.io", strings.Repeat("a", 100)}
	bad := []string{"", ".", "..", "a..b", ".app", "-app", "_app", "app.git", "APP.GIT", "a/b", `a\b`,
		"a b", "a%2e", "ä", "a\x00", strings.Repeat("a", 101)}
	for _, n := range good {
		if !ValidName(n) {
			t.Errorf("ValidName(%q) = false", n)
		}
	}
	for _, n := range bad {
		if ValidName(n) {
			t.Errorf("ValidName(%q) = true", n)
		}
	}
}

// TestLargePush pushes 20 MiB of random bytes, which git sends with chunked transfer
// encoding, and clones it back. The handler must stream: the test process's allocations
// during the push stay far below the pack's size.
func TestLargePush(t *testing.T) {
	const size = 20 << 20
	s := newServer(t)
	bare := s.addRepo("acme", "big", false)
	env, dir, wt := s.workTree("acme", "big")
	url := s.url("dev", "acme", "big")

	data := make([]byte, size)
	rng := rand.NewChaCha8([32]byte{1})
	_, _ = rng.Read(data)
	if err := os.WriteFile(filepath.Join(wt, "model.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	sha := commit(t, env, wt, nil, "model")
	s.takeServed()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rssBefore := maxRSS(syscall.RUSAGE_SELF)
	start := time.Now()
	gitOK(t, env, wt, "push", "-q", "origin", "main")
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	rssAfter := maxRSS(syscall.RUSAGE_SELF)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("20 MiB push: %v; Go allocations during it %.1f MiB; test process peak RSS %d → %d MiB; largest child peak RSS %d MiB",
		elapsed.Round(time.Millisecond), float64(allocated)/(1<<20), rssBefore>>10, rssAfter>>10, maxRSS(syscall.RUSAGE_CHILDREN)>>10)
	if allocated > size/2 {
		t.Errorf("the push allocated %d bytes in the server process: the pack is being buffered", allocated)
	}

	chunked := false
	for _, r := range s.takeServed() {
		chunked = chunked || r.method == http.MethodPost && r.chunked && r.status == http.StatusOK
	}
	if !chunked {
		t.Fatal("no chunked receive-pack POST was served; the test does not test streaming")
	}
	s.wantPush(1, RefUpdate{ZeroSHA, sha, "refs/heads/main"})
	if _, err := ReadFile(context.Background(), bare, sha, "model.bin"); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("ReadFile of the 20 MiB file: %v", err)
	}

	back := filepath.Join(dir, "back")
	gitOK(t, env, dir, "clone", "-q", url, back)
	got, err := os.ReadFile(filepath.Join(back, "model.bin"))
	if err != nil || sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatalf("cloned file differs (%d bytes, %v)", len(got), err)
	}
}

// maxRSS is the peak resident set of who (self or the largest waited-for child), in KiB.
func maxRSS(who int) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return -1
	}
	return ru.Maxrss
}

// TestConcurrentPushes runs pushes of three branches to each of two repos at once: every
// OnPush call belongs to one push and carries only its own ref.
func TestConcurrentPushes(t *testing.T) {
	s := newServer(t)
	repos := []string{"one", "two"}
	branches := []string{"b1", "b2", "b3"}
	env := clientEnv(t)
	dir := t.TempDir()

	type job struct{ repo, branch, wt, sha string }
	var jobs []*job
	for _, repo := range repos {
		s.addRepo("acme", repo, false)
		for _, b := range branches {
			wt := filepath.Join(dir, repo+"-"+b)
			gitOK(t, env, dir, "clone", "-q", s.url("dev", "acme", repo), wt)
			sha := commit(t, env, wt, map[string]string{"f": repo + b + strings.Repeat("x", 1<<16)}, b)
			jobs = append(jobs, &job{repo, b, wt, sha})
		}
	}
	var wg sync.WaitGroup
	errs := make(chan string, len(jobs))
	for _, j := range jobs {
		wg.Go(func() {
			if out, err := gitTry(t, env, j.wt, "push", "-q", "origin", "HEAD:refs/heads/"+j.branch); err != nil {
				errs <- fmt.Sprintf("push %s %s: %v\n%s", j.repo, j.branch, err, out)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}

	got := map[string]bool{}
	for _, p := range s.takePushes() {
		if len(p.updates) != 1 {
			t.Fatalf("one push, several refs: %+v", p)
		}
		u := p.updates[0]
		got[fmt.Sprintf("%d %s %s %s", p.repo.ID, u.Old, u.New, u.Ref)] = true
	}
	for _, j := range jobs {
		id := slices.Index(repos, j.repo) + 1
		key := fmt.Sprintf("%d %s %s refs/heads/%s", id, ZeroSHA, j.sha, j.branch)
		if !got[key] {
			t.Errorf("OnPush never saw %s; saw %v", key, got)
		}
	}
	if len(got) != len(jobs) {
		t.Errorf("OnPush saw %d pushes, want %d", len(got), len(jobs))
	}
}

// TestHandlerConfig covers what NewHandler refuses and what the push log parser accepts.
func TestHandlerConfig(t *testing.T) {
	resolve := func(context.Context, *http.Request, string, string, bool) (Repo, error) { return Repo{}, nil }
	if _, err := NewHandler(HandlerConfig{WorkDir: t.TempDir()}); err == nil {
		t.Error("no Resolve accepted")
	}
	if _, err := NewHandler(HandlerConfig{Resolve: resolve}); err == nil {
		t.Error("no WorkDir accepted")
	}
	if _, err := NewHandler(HandlerConfig{Resolve: resolve, WorkDir: t.TempDir(), GitPath: "/nonexistent/git"}); err == nil {
		t.Error("a missing git accepted")
	}

	// A restart reinstalls the hook and drops the push logs of the process that died.
	work := t.TempDir()
	if _, err := NewHandler(HandlerConfig{Resolve: resolve, WorkDir: work}); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(work, "pushes", "push-stale")
	if err := os.WriteFile(stale, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewHandler(HandlerConfig{Resolve: resolve, WorkDir: work}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("a stale push log survived a restart: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(work, "hooks", ".*")); len(left) != 0 {
		t.Errorf("temporary hook files left: %v", left)
	}

	path := filepath.Join(t.TempDir(), "log")
	a, b := strings.Repeat("a", 40), strings.Repeat("b", 40)
	os.WriteFile(path, []byte(a+" "+b+" refs/heads/main\n\n"+b+" "+ZeroSHA+" refs/tags/v1\n"), 0o600)
	got, err := readPushLog(path)
	want := []RefUpdate{{a, b, "refs/heads/main"}, {b, ZeroSHA, "refs/tags/v1"}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("readPushLog = %+v, %v", got, err)
	}
	for _, bad := range []string{"x y z\n", a + " " + b + "\n", a + " " + b + " main\n"} {
		os.WriteFile(path, []byte(bad), 0o600)
		if _, err := readPushLog(path); err == nil {
			t.Errorf("readPushLog accepted %q", bad)
		}
	}
	if !bytes.Contains([]byte(postReceive), []byte(pushLogEnv)) {
		t.Error("the hook does not use the push log variable")
	}
}

// TestProtocolV2Gzip speaks protocol v2 by hand with a gzip-compressed request body, as git
// does for big fetch negotiations: the handler must pass both the Git-Protocol header and
// the encoding on to git.
func TestProtocolV2Gzip(t *testing.T) {
	s := newServer(t)
	s.addRepo("acme", "app", true)
	env, _, wt := s.workTree("acme", "app")
	sha := commit(t, env, wt, map[string]string{"a": "a\n"}, "a")
	gitOK(t, env, wt, "push", "-q", "origin", "main")

	url := s.srv.URL + "/acme/app.git"
	req, _ := http.NewRequest(http.MethodGet, url+"/info/refs?service=git-upload-pack", nil)
	req.Header.Set("Git-Protocol", "version=2")
	body := doRequest(t, req, http.StatusOK)
	if !strings.Contains(body, "version 2") || !strings.Contains(body, "ls-refs") {
		t.Fatalf("v2 advertisement:\n%s", body)
	}

	var packet bytes.Buffer
	zw := gzip.NewWriter(&packet)
	fmt.Fprintf(zw, "%04xcommand=ls-refs\n0001%04xpeel\n0000", 4+len("command=ls-refs\n"), 4+len("peel\n"))
	zw.Close()
	req, _ = http.NewRequest(http.MethodPost, url+"/git-upload-pack", &packet)
	req.Header.Set("Git-Protocol", "version=2")
	req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
	req.Header.Set("Content-Encoding", "gzip")
	body = doRequest(t, req, http.StatusOK)
	if !strings.Contains(body, sha+" refs/heads/main") {
		t.Fatalf("ls-refs answer:\n%s", body)
	}

	req, _ = http.NewRequest(http.MethodPost, url+"/git-upload-pack", strings.NewReader("x"))
	req.Header.Set("Content-Encoding", "br")
	doRequest(t, req, http.StatusUnsupportedMediaType)
}

// doRequest sends req, checks the status and returns the body.
func doRequest(t *testing.T, req *http.Request, want int) string {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != want {
		t.Fatalf("%s %s = %d (%v), want %d:\n%s", req.Method, req.URL, resp.StatusCode, err, want, body)
	}
	return string(body)
}

// TestWriterWithoutUnwrap serves through a middleware-style writer that hides the server's
// (no Unwrap, so no flushing and no full duplex): clones and pushes still work, and the
// handler says what is wrong.
func TestWriterWithoutUnwrap(t *testing.T) {
	s := newServer(t)
	s.addRepo("acme", "app", false)
	s.mu.Lock()
	s.hideWriter = true
	s.mu.Unlock()
	env, dir, wt := s.workTree("acme", "app")
	noise := make([]byte, 512<<10)
	_, _ = rand.NewChaCha8([32]byte{2}).Read(noise)
	sha := commit(t, env, wt, map[string]string{"noise": string(noise)}, "a")
	s.takeServed()
	gitOK(t, env, wt, "-c", "http.postBuffer=65536", "push", "-q", "origin", "main")
	s.wantPush(1, RefUpdate{ZeroSHA, sha, "refs/heads/main"})
	if !slices.ContainsFunc(s.takeServed(), func(r served) bool { return r.chunked }) {
		t.Fatal("the push was not chunked")
	}
	gitOK(t, env, dir, "clone", "-q", s.url("dev", "acme", "app"), filepath.Join(dir, "again"))
	if !strings.Contains(s.logs.String(), "full duplex") {
		t.Fatalf("no warning about the writer in the log:\n%s", s.logs.String())
	}
}

// TestClientGoesAway drops the connection in the middle of a chunked push: git must stop,
// nothing reaches OnPush, and the push log is gone (newServer's cleanup checks that).
func TestClientGoesAway(t *testing.T) {
	s := newServer(t)
	bare := s.addRepo("acme", "app", false)
	conn, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte("dev:devpass"))
	fmt.Fprintf(conn, "POST /acme/app.git/git-receive-pack HTTP/1.1\r\nHost: x\r\nAuthorization: Basic %s\r\n"+
		"Content-Type: application/x-git-receive-pack-request\r\nTransfer-Encoding: chunked\r\n\r\n", auth)
	update := fmt.Sprintf("%s %s refs/heads/main\x00report-status\n", ZeroSHA, strings.Repeat("1", 40))
	first := fmt.Sprintf("%04x%s0000PACK", 4+len(update), update)
	fmt.Fprintf(conn, "%x\r\n%s\r\n", len(first), first)
	time.Sleep(200 * time.Millisecond) // let git start reading the pack
	conn.Close()

	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		n := len(s.served)
		s.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the handler did not finish after the client went away")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if p := s.takePushes(); len(p) != 0 {
		t.Fatalf("an aborted push reached OnPush: %+v", p)
	}
	if empty, err := IsEmpty(context.Background(), bare); err != nil || !empty {
		t.Fatalf("an aborted push changed refs: empty=%v %v", empty, err)
	}
}
