package artifacts_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nimbus-build/nimbus/backend/app"
	"github.com/nimbus-build/nimbus/backend/app/apptest"
	"github.com/nimbus-build/nimbus/backend/artifacts/storage"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// world is a whole Nimbus app (local storage, embedded Redis; SQLite, or PostgreSQL with
// postgres) behind a real HTTP server: team acme (owner alice, developer dave, reporter rita)
// with the private repo models, the public repo pub and the archived repo old; team other
// (owner bob) with the private repo secret. creds holds a bearer credential per caller; "job"
// is the CNB_TOKEN of build #7 of models, at commit.
type world struct {
	t     *testing.T
	app   *app.App
	srv   *httptest.Server
	creds map[string]string
	// buildNumber and commit are those of the job token's build.
	buildNumber int64
	commit      string
	repoPath    string // the bare repo of acme/models
}

const apiBase = "/api/v1/repos/acme/models/artifacts"

// newWorld starts the world; env adds server settings (NIMBUS_STORAGE_QUOTA, …).
func newWorld(t *testing.T, postgres bool, env map[string]string) *world {
	t.Helper()
	all := map[string]string{}
	if postgres {
		all["NIMBUS_DATABASE_URL"] = storetest.PostgresURL(t)
	}
	for k, v := range env {
		all[k] = v
	}
	s := apptest.Start(t, all, app.Options{})
	w := &world{t: t, app: s.App, srv: s.HTTP, buildNumber: 7, commit: "0123456789abcdef0123456789abcdef01234567"}
	cast := s.Cast(t, "models", w.buildNumber, w.commit)
	w.creds, w.repoPath = cast.Creds, s.App.Repos.Path(cast.Private)
	return w
}

type resp struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r resp) code() string {
	var b struct {
		Error struct{ Code string } `json:"error"`
	}
	json.Unmarshal(r.Body, &b)
	return b.Error.Code
}

func (r resp) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// do sends a request as who (a key of creds, "" for anonymous) with header pairs.
func (w *world) do(who, method, path string, body []byte, header ...string) resp {
	w.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, w.srv.URL+path, rd)
	if err != nil {
		w.t.Fatal(err)
	}
	if who != "" {
		req.Header.Set("Authorization", "Bearer "+w.creds[who])
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{Status: res.StatusCode, Header: res.Header, Body: b}
}

// put uploads data as who with its checksum header (when sum) and returns the answer.
func (w *world) put(who, path string, data []byte, sum bool) resp {
	w.t.Helper()
	if sum {
		return w.do(who, "PUT", path, data, "X-Checksum-Sha256", sha256Hex(data))
	}
	return w.do(who, "PUT", path, data)
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// blobs lists the digests in the store.
func (w *world) blobs() map[string]int64 {
	w.t.Helper()
	out := map[string]int64{}
	err := w.app.Storage.Walk(context.Background(), func(i storage.Info) error {
		out[string(i.Digest)] = i.Size
		return nil
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return out
}

// uploads counts the store's upload sessions.
func (w *world) uploads() int {
	w.t.Helper()
	n := 0
	if err := w.app.Storage.WalkUploads(context.Background(), func(storage.UploadInfo) error { n++; return nil }); err != nil {
		w.t.Fatal(err)
	}
	return n
}
