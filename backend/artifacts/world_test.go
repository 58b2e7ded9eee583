package artifacts_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/app"
	"github.com/nimbus-build/nimbus/backend/artifacts/storage"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/config"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// world is a whole Nimbus app (local storage, embedded Redis; SQLite, or PostgreSQL with
// postgres) behind a real HTTP server: team acme (owner alice, developer dave, reporter rita)
// with the private repo models, the public repo pub and the archived repo old; team other
// (owner bob) with the private repo secret. creds holds a bearer credential per caller.
type world struct {
	t     *testing.T
	app   *app.App
	srv   *httptest.Server
	creds map[string]string
	acme  *org.Org
	// buildNumber and commit are those of the job token's build.
	buildNumber int64
	commit      string
}

const apiBase = "/api/v1/repos/acme/models/artifacts"

// newWorld starts the world; env adds server settings (NIMBUS_STORAGE_QUOTA, …).
func newWorld(t *testing.T, postgres bool, env map[string]string) *world {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	all := map[string]string{"NIMBUS_DATA_DIR": t.TempDir(), "NIMBUS_BUILTIN_AGENT": "false",
		"NIMBUS_PUBLIC_URL": "http://" + srv.Listener.Addr().String()}
	if postgres {
		all["NIMBUS_DATABASE_URL"] = storetest.PostgresURL(t)
	}
	for k, v := range env {
		all[k] = v
	}
	cfg, _, err := config.Load("nimbus-server", nil, func(k string) string { return all[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, creds: map[string]string{}, commit: "0123456789abcdef0123456789abcdef01234567"}
	w.app, err = app.New(context.Background(), cfg, slog.New(slog.DiscardHandler), app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.app.Close() })
	srv.Config.Handler = w.app.Server.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	w.srv = srv

	ctx := context.Background()
	users := map[string]*auth.User{}
	for _, name := range []string{"alice", "dave", "rita", "bob"} {
		u, err := w.app.Auth.Signup(ctx, name, name+"@example.com", "a long enough passphrase "+strings.Repeat("x", len(name)))
		if err != nil {
			t.Fatal(err)
		}
		users[name] = u
	}
	w.acme = w.mustOrg(users["alice"], "acme")
	other := w.mustOrg(users["bob"], "other")
	for name, role := range map[string]org.Role{"dave": org.Developer, "rita": org.Reporter} {
		if err := w.app.DB.Create(&org.Member{OrgID: w.acme.ID, UserID: users[name].ID, Role: role, CreatedAt: time.Now()}).Error; err != nil {
			t.Fatal(err)
		}
	}
	models := w.mustRepo(w.acme, "models", repo.Private)
	w.mustRepo(w.acme, "pub", repo.Public)
	old := w.mustRepo(w.acme, "old", repo.Private)
	archived := true
	if err := w.app.Repos.Update(ctx, old, repo.Patch{Archived: &archived}); err != nil {
		t.Fatal(err)
	}
	w.mustRepo(other, "secret", repo.Private)
	token := func(u string, scopes ...string) string {
		raw, _, err := w.app.Auth.CreateToken(ctx, users[u], "t", scopes, nil)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	for _, u := range []string{"alice", "dave", "rita", "bob"} {
		w.creds[u] = token(u, auth.ScopeRegistryWrite)
	}
	w.creds["readonly"] = token("alice", auth.ScopeRegistryRead)
	w.creds["reposcope"] = token("alice", auth.ScopeRepoWrite)
	dt, err := w.app.Repos.CreateDeployToken(ctx, models, users["alice"].ID, "inference", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.creds["deploy"] = dt.Token
	w.creds["job"] = w.jobToken(models, users["dave"].ID)
	return w
}

func (w *world) mustOrg(u *auth.User, name string) *org.Org {
	o, err := w.app.Orgs.Create(context.Background(), u, name)
	if err != nil {
		w.t.Fatal(err)
	}
	return o
}

func (w *world) mustRepo(o *org.Org, name, visibility string) *repo.Repo {
	r, err := w.app.Repos.Create(context.Background(), o, name, visibility, "", "")
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

// jobToken makes build #7 of the repo at w.commit with a running pipeline and returns its
// CNB_TOKEN.
func (w *world) jobToken(r *repo.Repo, by int64) string {
	raw, err := auth.NewToken(auth.PrefixJob)
	if err != nil {
		w.t.Fatal(err)
	}
	now := time.Now().UTC()
	w.buildNumber = 7
	b := build.Build{RepoID: r.ID, Number: w.buildNumber, Event: "push", Branch: "main", CommitSHA: w.commit, TriggeredBy: &by,
		Status: build.StatusRunning, CreatedAt: now, UpdatedAt: now}
	if err := w.app.DB.Create(&b).Error; err != nil {
		w.t.Fatal(err)
	}
	p := build.Pipeline{BuildID: b.ID, Key: "p", Name: "p", Status: build.StatusRunning, RunnerTag: "cnb:arch:amd64", CPUs: 1,
		Plan: "{}", OrgID: r.OrgID, RepoID: r.ID, CreatedAt: now, UpdatedAt: now, JobTokenHash: auth.HashToken(raw)}
	if err := w.app.DB.Create(&p).Error; err != nil {
		w.t.Fatal(err)
	}
	return raw
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
