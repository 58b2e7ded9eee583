package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/nimbus-build/nimbus/backend/app"
	"github.com/nimbus-build/nimbus/backend/app/apptest"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// artifactServer is a whole Nimbus server (SQLite, local storage) with team ml, its private
// repo models, a developer token and the repo's deploy token.
type artifactServer struct {
	url, push, deploy string
}

func startArtifactServer(t *testing.T) artifactServer {
	t.Helper()
	s := apptest.Start(t, nil, app.Options{})
	u := s.Signup(t, "ada")
	r := s.Repo(t, s.Org(t, u, "ml"), "models", repo.Private)
	return artifactServer{url: s.URL, push: s.Token(t, u, auth.ScopeRegistryWrite), deploy: s.DeployToken(t, r, u)}
}

// cutProxy forwards to the server and breaks the first cuts downloads after `after` bytes of
// their body; it records the Range header of every download.
type cutProxy struct {
	*httptest.Server
	mu     sync.Mutex
	cuts   int
	after  int64
	ranges []string
}

func newCutProxy(t *testing.T, target string, cuts int, after int64) *cutProxy {
	u, _ := url.Parse(target)
	p := &cutProxy{cuts: cuts, after: after}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = nil
	// Every byte read before the cut reaches the client: without a flush after each write the
	// last buffered kilobytes die with the connection and the resume offset varies by run.
	rp.FlushInterval = -1
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method != http.MethodGet || !strings.HasSuffix(resp.Request.URL.Path, ".bin") {
			return nil
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.ranges = append(p.ranges, resp.Request.Header.Get("Range"))
		if p.cuts > 0 {
			p.cuts--
			resp.Body = &cutBody{r: resp.Body, left: p.after}
		}
		return nil
	}
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) { panic(http.ErrAbortHandler) }
	p.Server = httptest.NewServer(rp)
	t.Cleanup(p.Close)
	return p
}

func (p *cutProxy) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.ranges...)
}

// cutBody fails after left bytes, as a connection that drops mid-body.
type cutBody struct {
	r    io.ReadCloser
	left int64
}

func (c *cutBody) Read(b []byte) (int, error) {
	if c.left <= 0 {
		return 0, errors.New("connection cut by the test")
	}
	if int64(len(b)) > c.left {
		b = b[:c.left]
	}
	n, err := c.r.Read(b)
	c.left -= int64(n)
	return n, err
}

func (c *cutBody) Close() error { return c.r.Close() }

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestArtifactPushAndPull(t *testing.T) {
	s := startArtifactServer(t)
	src := t.TempDir()
	weights := make([]byte, 3<<20)
	rand.Read(weights)
	wPath := writeFile(t, src, "weights.bin", weights)
	cPath := writeFile(t, src, "config.json", []byte(`{"dim": 768}`))
	pushEnv := map[string]string{"NIMBUS_SERVER": s.url, "NIMBUS_TOKEN": s.push}
	code, out, errOut := runCLI([]string{"artifact", "push", "ml/models", "bert", "v1", wPath, cPath}, pushEnv)
	if code != 0 || strings.Count(out, "published ") != 2 || !strings.Contains(errOut, "weights.bin: 100%") {
		t.Fatalf("push: %d\n%s\n%s", code, out, errOut)
	}
	if code, out, _ = runCLI([]string{"artifact", "push", "ml/models", "bert", "v1", wPath}, pushEnv); code != 0 || !strings.Contains(out, "already published") {
		t.Fatalf("push again: %d %s", code, out)
	}
	other := writeFile(t, t.TempDir(), "weights.bin", []byte("other bytes"))
	if code, _, errOut = runCLI([]string{"artifact", "push", "ml/models", "bert", "v1", other}, pushEnv); code != 1 || !strings.Contains(errOut, "409") {
		t.Fatalf("push of other bytes under a published name: %d %s", code, errOut)
	}
	// In a pipeline the job's variables stand in for the flags.
	if code, _, errOut = runCLI([]string{"artifact", "push", "ml/models", "bert", "v2", cPath}, map[string]string{"CNB_WEB_ENDPOINT": s.url, "CNB_TOKEN": s.push}); code != 0 {
		t.Fatalf("push with the pipeline's variables: %d %s", code, errOut)
	}

	pullEnv := map[string]string{"NIMBUS_SERVER": s.url, "NIMBUS_TOKEN": s.deploy}
	dst := t.TempDir()
	if code, out, errOut = runCLI([]string{"artifact", "pull", "--dir", dst, "ml/models", "bert", "v1"}, pullEnv); code != 0 {
		t.Fatalf("pull: %d %s %s", code, out, errOut)
	}
	if got, _ := os.ReadFile(filepath.Join(dst, "weights.bin")); !bytes.Equal(got, weights) {
		t.Fatal("pulled weights differ")
	}
	if code, _, errOut = runCLI([]string{"artifact", "pull", "--dir", dst, "ml/models", "bert", "v1", "weights.bin"}, pullEnv); code != 0 || !strings.Contains(errOut, "up to date") {
		t.Fatalf("pull of a file that is there: %d %s", code, errOut)
	}
	if code, out, _ = runCLI([]string{"artifact", "pull", "--dir", dst, "ml/models", "bert", "latest"}, pullEnv); code != 0 || !strings.Contains(out, "bert v2") {
		t.Fatalf("pull latest: %d %s", code, out)
	}
	if code, _, errOut = runCLI([]string{"artifact", "pull", "--dir", dst, "ml/models", "bert", "v1", "nope.bin"}, pullEnv); code != 1 {
		t.Fatalf("pull of a missing file: %d %s", code, errOut)
	}
	if code, _, errOut = runCLI([]string{"artifact", "push", "ml/models", "bert", "v3", cPath}, pullEnv); code != 1 || !strings.Contains(errOut, "403") {
		t.Fatalf("push with the deploy token: %d %s", code, errOut)
	}
	if code, _, _ = runCLI([]string{"artifact", "pull", "ml/models"}, pullEnv); code != 2 {
		t.Fatalf("pull without a package: %d", code)
	}
}

// A download cut mid-body resumes from the bytes it has, in the same run and in the next; a
// partial file of other bytes is caught by the digest check and downloaded again.
func TestArtifactPullResumes(t *testing.T) {
	s := startArtifactServer(t)
	data := make([]byte, 4<<20)
	rand.Read(data)
	src := writeFile(t, t.TempDir(), "model.bin", data)
	if code, _, errOut := runCLI([]string{"artifact", "push", "ml/models", "m", "v1", src}, map[string]string{"NIMBUS_SERVER": s.url, "NIMBUS_TOKEN": s.push}); code != 0 {
		t.Fatal(errOut)
	}
	sum := sha256.Sum256(data)
	part := "." + "model.bin." + hex.EncodeToString(sum[:])[:12] + ".part"

	t.Run("cut connections, one run", func(t *testing.T) {
		p := newCutProxy(t, s.url, 2, 1<<20)
		dst := t.TempDir()
		code, _, errOut := runCLIFast([]string{"artifact", "pull", "--dir", dst, "ml/models", "m", "v1"}, p.URL, s.deploy)
		if code != 0 {
			t.Fatalf("pull: %d %s", code, errOut)
		}
		if got, _ := os.ReadFile(filepath.Join(dst, "model.bin")); !bytes.Equal(got, data) {
			t.Fatal("the resumed download differs")
		}
		if r := p.seen(); len(r) != 3 || r[0] != "" || r[1] != "bytes=1048576-" || r[2] != "bytes=2097152-" {
			t.Fatalf("ranges asked: %q", r)
		}
		if _, err := os.Stat(filepath.Join(dst, part)); !os.IsNotExist(err) {
			t.Error("the partial file stayed behind")
		}
	})
	t.Run("the next run resumes the partial file", func(t *testing.T) {
		p := newCutProxy(t, s.url, 0, 0)
		dst := t.TempDir()
		writeFile(t, dst, part, data[:3<<20])
		if code, _, errOut := runCLIFast([]string{"artifact", "pull", "--dir", dst, "ml/models", "m", "v1"}, p.URL, s.deploy); code != 0 {
			t.Fatalf("pull: %d %s", code, errOut)
		}
		if got, _ := os.ReadFile(filepath.Join(dst, "model.bin")); !bytes.Equal(got, data) {
			t.Fatal("the resumed download differs")
		}
		if r := p.seen(); len(r) != 1 || r[0] != "bytes=3145728-" {
			t.Fatalf("ranges asked: %q", r)
		}
	})
	t.Run("a partial file of other bytes", func(t *testing.T) {
		p := newCutProxy(t, s.url, 0, 0)
		dst := t.TempDir()
		writeFile(t, dst, part, bytes.Repeat([]byte{7}, 1<<20))
		code, _, errOut := runCLIFast([]string{"artifact", "pull", "--dir", dst, "ml/models", "m", "v1"}, p.URL, s.deploy)
		if code != 0 || !strings.Contains(errOut, "partial file is deleted") {
			t.Fatalf("pull: %d %s", code, errOut)
		}
		if got, _ := os.ReadFile(filepath.Join(dst, "model.bin")); !bytes.Equal(got, data) {
			t.Fatal("the download differs")
		}
		if r := p.seen(); len(r) != 2 || r[0] != "bytes=1048576-" || r[1] != "" {
			t.Fatalf("ranges asked: %q", r)
		}
	})
	t.Run("bytes that never match", func(t *testing.T) {
		// A proxy that flips a byte of every download: the file never takes its name.
		u, _ := url.Parse(s.url)
		rp := httputil.NewSingleHostReverseProxy(u)
		rp.ModifyResponse = func(resp *http.Response) error {
			if strings.HasSuffix(resp.Request.URL.Path, ".bin") {
				resp.Body = flipBody{resp.Body}
			}
			return nil
		}
		bad := httptest.NewServer(rp)
		defer bad.Close()
		dst := t.TempDir()
		code, _, errOut := runCLIFast([]string{"artifact", "pull", "--dir", dst, "ml/models", "m", "v1"}, bad.URL, s.deploy)
		if code != 1 || !strings.Contains(errOut, "not "+hex.EncodeToString(sum[:])) {
			t.Fatalf("pull: %d %s", code, errOut)
		}
		if entries, _ := os.ReadDir(dst); len(entries) != 0 {
			t.Fatalf("files left: %v", entries)
		}
	})
}

// flipBody inverts the first byte it passes.
type flipBody struct{ io.ReadCloser }

func (f flipBody) Read(b []byte) (int, error) {
	n, err := f.ReadCloser.Read(b)
	if n > 0 {
		b[0] ^= 0xff
	}
	return n, err
}

// runCLIFast runs the CLI against server with short retry pauses.
func runCLIFast(args []string, server, token string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	e := env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr,
		getenv: func(k string) string {
			return map[string]string{"NIMBUS_SERVER": server, "NIMBUS_TOKEN": token, "NIMBUS_ARTIFACT_RETRY_WAIT": "10ms"}[k]
		}}
	code := run(context.Background(), e, args)
	return code, stdout.String(), stderr.String()
}

// --build is the build's hand-off version: the repo and version come from the job's variables,
// and the push and pull meet there; outside a pipeline it says what it needs.
func TestArtifactBuildScope(t *testing.T) {
	s := apptest.Start(t, nil, app.Options{})
	u := s.Signup(t, "ada")
	r := s.Repo(t, s.Org(t, u, "ml"), "models", repo.Private)
	job := s.JobToken(t, r, u.ID, 3, "0123456789abcdef0123456789abcdef01234567")
	var id int64
	if err := s.App.DB.Table("builds").Where("repo_id = ? AND number = 3", r.ID).Select("id").Scan(&id).Error; err != nil || id == 0 {
		t.Fatalf("the build: %d %v", id, err)
	}
	env := map[string]string{"CNB_WEB_ENDPOINT": s.URL, "CNB_TOKEN": job, "CNB_REPO_SLUG": "ml/models",
		"CNB_BUILD_ID": "nimbus-" + strconv.FormatInt(id, 10)}
	data := writeFile(t, t.TempDir(), "processed.tgz", []byte("prepared data"))
	code, out, errOut := runCLI([]string{"artifact", "push", "--build", "data", data}, env)
	if code != 0 || !strings.Contains(out, "/artifacts/data/nimbus-"+strconv.FormatInt(id, 10)+"/processed.tgz") {
		t.Fatalf("push --build: %d\n%s\n%s", code, out, errOut)
	}
	dst := t.TempDir()
	if code, out, errOut = runCLI([]string{"artifact", "pull", "--build", "--dir", dst, "data"}, env); code != 0 {
		t.Fatalf("pull --build: %d\n%s\n%s", code, out, errOut)
	}
	if got, _ := os.ReadFile(filepath.Join(dst, "processed.tgz")); string(got) != "prepared data" {
		t.Fatalf("pulled %q", got)
	}
	// A person's token cannot write into the build's version.
	env["CNB_TOKEN"] = s.Token(t, u, auth.ScopeRegistryWrite)
	if code, _, errOut = runCLI([]string{"artifact", "push", "--build", "data", data}, env); code != 1 || !strings.Contains(errOut, "hand-off space") {
		t.Fatalf("push --build with a person's token: %d %s", code, errOut)
	}
	delete(env, "CNB_BUILD_ID")
	if code, _, errOut = runCLI([]string{"artifact", "pull", "--build", "data"}, env); code != 2 || !strings.Contains(errOut, "CNB_BUILD_ID") {
		t.Fatalf("--build outside a pipeline: %d %s", code, errOut)
	}
}
