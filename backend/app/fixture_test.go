package app

// The fixture shared by the authorization matrix (authz_test.go) and the bad-input tests
// (badinput_test.go): one whole server assembled by New, driven in-process through its
// http.Handler, with a small world of people, teams, repos, tokens and one real build.
//
// Names here start with mx ("matrix") so they cannot collide with other tests of the package.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/config"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/mail"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/pull"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/server/openapitest"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// The world's fixed names. Org A ("acme") is where every role lives; org B ("globex") belongs
// to the outsider. Repo names share no substrings with org names, so the 404 comparison can swap
// one name for a missing one without touching the other.
const (
	mxOrgA       = "acme"
	mxOrgB       = "globex"
	mxPrivA      = "alpha-weights" // private repo of A, with a build, a secret and a deploy token
	mxPubA       = "alpha-docs"    // public repo of A, with a .cnb.yml on main
	mxPrivB      = "b-vault"       // private repo of B
	mxGhostOrg   = "no-such-org"
	mxGhostRepo  = "no-such-repo"
	mxPassword   = "purple-monkey-dishwasher-42"
	mxSecretName = "MARKER_ALPHA_SECRET"

	// Markers: strings that exist only in one org's private data. A response to someone who
	// may not see that org must never contain them (unless the request itself did).
	mxDescA       = "marker-alpha-private-description"
	mxCommitA     = "marker-alpha-private-commit"
	mxDeployNameA = "marker-alpha-deploy-token"
	mxDescB       = "marker-globex-private-description"
	// The secret's value must never appear in any response to anyone.
	mxSecretValue = "marker-secret-value-9f3c1a"
	// The signing secret of the Stripe webhook.
	mxStripeWebhookSecret = "whsec_matrix_secret"
)

// mxButtonsFile is the .cnb/web_trigger.yml pushed beside it: one button of the web_trigger
// pipeline, with one input.
const mxButtonsFile = `branch:
  - buttons:
      - name: Run
        event: web_trigger
        inputs: { MODE: { type: select, options: [fast, full], default: fast } }
`

// mxConfigFile is the .cnb.yml pushed to both repos of A: a push pipeline (so the push makes
// build #1), a web_trigger pipeline (so manual triggers succeed), a workspace (so opening
// workspaces succeeds) and a nightly schedule (so "Run now" succeeds; it fires at 03:00).
const mxConfigFile = `main:
  push:
    - name: build
      stages:
        - name: compile
          script: echo build
  "crontab: 0 3 * * *":
    - name: nightly
      stages:
        - name: run
          script: echo nightly
  web_trigger:
    - name: manual
      stages:
        - name: run
          script: echo manual
  vscode:
    - name: dev
      services: [vscode]
      stages:
        - name: deps
          script: echo deps
v*:
  tag_deploy.staging:
    - name: deploy
      stages:
        - name: ship
          script: echo ship
`

// mxDeployFile is the .cnb/tag_deploy.yml pushed beside it: one environment.
const mxDeployFile = "environments:\n  - name: staging\n"

// Columns of the matrix's expectation strings, in order. Every principal maps to one column
// (role tokens to their role's column; invalid credentials to none: they are 401 on every API
// route).
const (
	mxColAnon     = iota
	mxColReporter // member of A with each role…
	mxColDeveloper
	mxColAdmin
	mxColOwner
	mxColBilling
	mxColOutsider // owner of B, member of nothing in A
	mxColNoScope  // A's owner, through a token with only registry:read
	mxColReadOnly // A's owner, through a token with only repo:read
	mxColDeploy   // the read-only deploy token of A's private repo
	mxColJob      // the job token (CNB_TOKEN) of a running pipeline of A's private repo
	mxCols
)

// mxUser is one account of the world.
type mxUser struct {
	Name, Email string
	ID          int64
	User        *auth.User
	Cookie      string // its long-lived session
	CSRF        string
}

// mxPrincipal is one way of calling the API.
type mxPrincipal struct {
	Name    string
	Col     int     // expectation column; -1 for invalid credentials
	User    *mxUser // the person behind it (nil: anonymous, deploy token, invalid credentials)
	Session bool    // cookie + CSRF header
	Cookie  string
	CSRF    string
	Bearer  string
	Token   bool            // a role's full-scope personal access token
	Invalid bool            // revoked, expired or unknown token: 401 on every API route
	Agent   bool            // an agent's token: 401 on every route but the agent API's
	Sees    map[string]bool // orgs whose private data it may see
	Secrets bool            // may receive secret values (an agent, in the leases it runs)
}

// mxWorld is one assembled server and its data.
type mxWorld struct {
	t       *testing.T
	ctx     context.Context
	dialect string
	app     *App
	h       http.Handler
	mail    *mxMailbox
	logs    *mxLog
	seq     atomic.Int64

	users      map[string]*mxUser // root, owner, admin, developer, reporter, billing, outsider, victim, resetme
	orgA, orgB *org.Org
	privA      *repo.Repo
	principals []*mxPrincipal
	byName     map[string]*mxPrincipal
	layout     map[string]string // org name → "A" or "B": whose membership layout it has
	snapQuery  string

	// The agent API: two registered agents, a running pipeline of A's private repo leased by the
	// first (its job token is the "job" principal), and one leased by the second.
	agentToken, otherAgentToken string
	lease, otherLease           *protocol.Lease

	workspaces map[string]int64 // repo name of A → its shared queued workspace (mxWorkspace)
}

// mxEachDialect runs fn against a fresh world on SQLite and on PostgreSQL (which is skipped,
// or under CI=true fails, when the test cluster is not there).
func mxEachDialect(t *testing.T, fn func(t *testing.T, w *mxWorld)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, newMXWorld(t, ""))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, newMXWorld(t, storetest.PostgresURL(t)))
	})
}

// mxMailbox keeps every email the server sends.
type mxMailbox struct {
	mu   sync.Mutex
	msgs []mail.Message
}

func (m *mxMailbox) Send(_ context.Context, msg mail.Message) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.msgs = append(m.msgs, msg)
	return nil
}

func (m *mxMailbox) last(to string) (mail.Message, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(m.msgs) - 1; i >= 0; i-- {
		if m.msgs[i].To == to {
			return m.msgs[i], true
		}
	}
	return mail.Message{}, false
}

// mxLog keeps the server's log lines; they are printed when a test fails.
type mxLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *mxLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *mxLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func newMXWorld(t *testing.T, databaseURL string) *mxWorld {
	t.Helper()
	// A Stripe webhook secret (but no Stripe key): the webhook checks signatures for real, and
	// top-ups answer that they are disabled. A storage quota per team, so uploads past it are
	// tested. Publish webhooks may name loopback (the rows set http://127.0.0.1:9/hook): no
	// delivery leaves the machine.
	cli := filepath.Join(t.TempDir(), "nimbus")
	if err := os.WriteFile(cli, []byte("#!/bin/sh\necho nimbus\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"--data-dir", storetest.DataDir(t, databaseURL), "--builtin-agent", "false", "--stripe-webhook-secret", mxStripeWebhookSecret,
		"--storage-quota", "1MiB", "--publish-webhook-private=true", "--cli-path", cli}
	dialect := "sqlite"
	if databaseURL != "" {
		args = append(args, "--database-url", databaseURL)
		dialect = "postgres"
	}
	cfg, _, err := config.Load("nimbus-server", args, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	logs := &mxLog{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	box := &mxMailbox{}
	ctx := context.Background()
	a, err := New(ctx, cfg, log, Options{Version: "test", Mail: box, Passwords: auth.CheapPasswords()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log (warnings and errors):\n%s", logs.String())
		}
		if err := a.Close(); err != nil {
			t.Errorf("close app: %v", err)
		}
	})
	contract, err := openapitest.Shared()
	if err != nil {
		t.Fatal(err)
	}
	w := &mxWorld{t: t, ctx: ctx, dialect: dialect, app: a, mail: box, logs: logs,
		users: map[string]*mxUser{}, byName: map[string]*mxPrincipal{}, layout: map[string]string{}}
	// Every response of every test on the world is checked against the OpenAPI document, and a
	// mismatch fails the (sub)test that is using the world at the time.
	w.h = contract.Handler(a.Server.Handler(), func(err error) { w.t.Errorf("response does not match openapi.yaml: %v", err) })
	w.build()
	return w
}

// build creates the world. The first sign-up becomes platform admin, so it is "root", a
// neutral account in no team of the matrix.
func (w *mxWorld) build() {
	t := w.t
	for _, name := range []string{"root", "owner", "admin", "developer", "reporter", "billing", "outsider", "victim", "resetme"} {
		w.signup(name)
	}
	if !w.users["root"].User.IsAdmin || w.users["owner"].User.IsAdmin {
		t.Fatal("the first sign-up should be the only platform admin")
	}
	owner := w.users["owner"]
	w.orgA = w.createOrg(mxOrgA, "A", "owner")
	w.orgB = w.createOrg(mxOrgB, "B", "outsider")
	for _, role := range []org.Role{org.Admin, org.Developer, org.Reporter, org.Billing} {
		w.addMember(w.orgA, w.users[string(role)], role)
	}

	var err error
	if w.privA, err = w.app.Repos.Create(w.ctx, w.orgA, mxPrivA, repo.Private, "main", mxDescA); err != nil {
		t.Fatal(err)
	}
	if _, err = w.app.Repos.Create(w.ctx, w.orgA, mxPubA, repo.Public, "main", "public docs"); err != nil {
		t.Fatal(err)
	}
	if _, err = w.app.Repos.Create(w.ctx, w.orgB, mxPrivB, repo.Private, "main", mxDescB); err != nil {
		t.Fatal(err)
	}
	if err := w.app.Repos.PutSecret(w.ctx, w.privA, mxSecretName, mxSecretValue); err != nil {
		t.Fatal(err)
	}
	deploy, err := w.app.Repos.CreateDeployToken(w.ctx, w.privA, owner.ID, mxDeployNameA, nil)
	if err != nil {
		t.Fatal(err)
	}

	// Principals. Tokens carry every scope a non-admin may hold.
	full := []string{auth.ScopeRepoRead, auth.ScopeRepoWrite, auth.ScopeOrgWrite, auth.ScopeRegistryRead,
		auth.ScopeRegistryWrite, auth.ScopeBillingRead, auth.ScopeBillingWrite}
	seesA, seesB := map[string]bool{"A": true}, map[string]bool{"B": true}
	w.addPrincipal(&mxPrincipal{Name: "anon", Col: mxColAnon})
	roles := []struct {
		user string
		col  int
		sees map[string]bool
	}{
		{"reporter", mxColReporter, seesA}, {"developer", mxColDeveloper, seesA}, {"admin", mxColAdmin, seesA},
		{"owner", mxColOwner, seesA}, {"billing", mxColBilling, seesA}, {"outsider", mxColOutsider, seesB},
	}
	for _, r := range roles {
		u := w.users[r.user]
		w.addPrincipal(&mxPrincipal{Name: r.user, Col: r.col, User: u, Session: true, Cookie: u.Cookie, CSRF: u.CSRF, Sees: r.sees})
	}
	for _, r := range roles {
		u := w.users[r.user]
		w.addPrincipal(&mxPrincipal{Name: r.user + "-token", Col: r.col, User: u, Token: true, Bearer: w.token(u, full...), Sees: r.sees})
	}
	w.addPrincipal(&mxPrincipal{Name: "noscope-token", Col: mxColNoScope, User: owner, Bearer: w.token(owner, auth.ScopeRegistryRead), Sees: seesA})
	w.addPrincipal(&mxPrincipal{Name: "readonly-token", Col: mxColReadOnly, User: owner, Bearer: w.token(owner, auth.ScopeRepoRead), Sees: seesA})
	w.addPrincipal(&mxPrincipal{Name: "deploy-token", Col: mxColDeploy, Bearer: deploy.Token, Sees: seesA})

	revoked := w.token(owner, full...)
	_, ts, err := w.tokenRow(revoked)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.app.Auth.RevokeToken(w.ctx, owner.ID, ts.ID); err != nil {
		t.Fatal(err)
	}
	w.addPrincipal(&mxPrincipal{Name: "revoked-token", Col: -1, Bearer: revoked, Invalid: true})
	expired := w.token(owner, full...)
	_, ts, err = w.tokenRow(expired)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.app.DB.Model(&auth.AccessToken{}).Where("id = ?", ts.ID).Update("expires_at", time.Now().UTC().Add(-time.Hour)).Error; err != nil {
		t.Fatal(err)
	}
	w.addPrincipal(&mxPrincipal{Name: "expired-token", Col: -1, Bearer: expired, Invalid: true})
	bogus, _ := auth.NewToken(auth.PrefixPersonal)
	w.addPrincipal(&mxPrincipal{Name: "unknown-token", Col: -1, Bearer: bogus, Invalid: true})

	// The .cnb.yml goes to both repos of A with the real git client; the push to the private
	// repo makes build #1 (its commit message is a marker).
	push := w.byName["developer-token"].Bearer
	w.gitPush(mxOrgA+"/"+mxPrivA, push, mxCommitA)
	w.gitPush(mxOrgA+"/"+mxPubA, push, "public docs pipeline")
	if b, err := w.app.Builds.Get(w.ctx, w.privA.ID, 1); err != nil || b.CommitMessage == "" {
		t.Fatalf("the push made no build #1: %v %+v", err, b)
	}
	// Pull request #1 of A's private repo.
	if n := w.openPull(mxPrivA); n != 1 {
		t.Fatalf("the first pull request of %s is #%d", mxPrivA, n)
	}

	// Two agents; the first leases the queued pipelines of both pushes, and the lease of A's
	// private repo gives the job principal. The second leases a manual build of its own.
	w.agentToken = w.registerAgent("matrix-agent")
	w.otherAgentToken = w.registerAgent("other-agent")
	for range 2 {
		if l := w.pollLease(w.agentToken); l.BuildID == w.build1ID() {
			w.lease = l
		}
	}
	if w.lease == nil || w.lease.JobToken == "" {
		t.Fatalf("no lease of build #1 of %s: %+v", mxPrivA, w.lease)
	}
	w.manualBuild()
	w.otherLease = w.pollLease(w.otherAgentToken)
	w.addPrincipal(&mxPrincipal{Name: "job-token", Col: mxColJob, Bearer: w.lease.JobToken, Sees: seesA})
	// Agents run every team's pipelines: their leases carry the repo's data and its secrets.
	w.addPrincipal(&mxPrincipal{Name: "agent-token", Col: -1, Bearer: w.agentToken, Agent: true, Secrets: true,
		Sees: map[string]bool{"A": true, "B": true}})
}

func (w *mxWorld) build1ID() int64 {
	b, err := w.app.Builds.Get(w.ctx, w.privA.ID, 1)
	if err != nil {
		w.t.Fatal(err)
	}
	return b.ID
}

// registerAgent registers an agent with the install's registration token and returns its token.
func (w *mxWorld) registerAgent(name string) string {
	w.t.Helper()
	reg := &mxPrincipal{Name: "registration", Bearer: w.app.RegistrationToken}
	r := w.do(reg, "POST", "/api/v1/agent/register", mxAgentRegistration(name))
	if r.Status != http.StatusCreated {
		w.t.Fatalf("register agent: %d %s", r.Status, r.Body)
	}
	var out protocol.RegisterResponse
	r.decode(w.t, &out)
	return out.Token
}

func mxAgentRegistration(name string) protocol.RegisterRequest {
	return protocol.RegisterRequest{Name: name, Version: "test", Tags: []string{"cnb:arch:default", "cnb:arch:amd64"},
		CPUs: 64, MemoryBytes: 256 << 30, Concurrency: 1000, Executor: "shell"}
}

// pollLease polls as the agent and returns the lease it gets. Callers make sure a pipeline is
// queued: without one a poll waits for the full poll timeout.
func (w *mxWorld) pollLease(agentToken string) *protocol.Lease {
	w.t.Helper()
	var queued int64
	w.app.DB.Model(&build.Pipeline{}).Where("status = ?", build.StatusQueued).Count(&queued)
	if queued == 0 {
		w.t.Fatal("poll with nothing queued")
	}
	r := w.do(&mxPrincipal{Name: "agent", Bearer: agentToken}, "POST", "/api/v1/agent/poll", protocol.PollRequest{FreeCPUs: 64})
	if r.Status != http.StatusOK {
		w.t.Fatalf("poll: %d %s", r.Status, r.Body)
	}
	var l protocol.Lease
	r.decode(w.t, &l)
	return &l
}

// manualBuild triggers a build of A's private repo (as its developer) and returns its number;
// its pipeline is queued.
func (w *mxWorld) manualBuild() int64 {
	w.t.Helper()
	r := w.do(w.byName["developer-token"], "POST", "/api/v1/repos/"+mxOrgA+"/"+mxPrivA+"/builds", map[string]string{"branch": "main", "event": "web_trigger"})
	if r.Status != http.StatusCreated {
		w.t.Fatalf("manual build: %d %s", r.Status, r.Body)
	}
	var b struct {
		Number int64 `json:"number"`
	}
	r.decode(w.t, &b)
	return b.Number
}

func (w *mxWorld) addPrincipal(p *mxPrincipal) {
	w.principals = append(w.principals, p)
	w.byName[p.Name] = p
}

// signup creates an account through the API; its session is the user's long-lived one.
func (w *mxWorld) signup(name string) *mxUser {
	w.t.Helper()
	u := &mxUser{Name: name, Email: name + "@example.com"}
	r := w.do(nil, "POST", "/api/v1/auth/signup", map[string]string{"username": name, "email": u.Email, "password": mxPassword})
	if r.Status != http.StatusCreated {
		w.t.Fatalf("sign up %s: %d %s", name, r.Status, r.Body)
	}
	var out struct {
		User struct {
			ID int64 `json:"id"`
		} `json:"user"`
		CSRF string `json:"csrf_token"`
	}
	r.decode(w.t, &out)
	u.ID, u.CSRF = out.User.ID, out.CSRF
	for _, c := range r.Cookies {
		if c.Name == auth.CookieName {
			u.Cookie = c.Value
		}
	}
	if u.Cookie == "" || u.CSRF == "" {
		w.t.Fatalf("sign up %s gave no session: %s", name, r.Body)
	}
	var err error
	if u.User, err = w.app.Auth.UserByID(w.ctx, u.ID); err != nil {
		w.t.Fatal(err)
	}
	w.users[name] = u
	return u
}

func (w *mxWorld) createOrg(name, layout, owner string) *org.Org {
	w.t.Helper()
	o, err := w.app.Orgs.Create(w.ctx, w.users[owner].User, name)
	if err != nil {
		w.t.Fatal(err)
	}
	w.layout[name] = layout
	return o
}

func (w *mxWorld) addMember(o *org.Org, u *mxUser, role org.Role) {
	w.t.Helper()
	if err := w.app.DB.Create(&org.Member{OrgID: o.ID, UserID: u.ID, Role: role, CreatedAt: time.Now().UTC()}).Error; err != nil {
		w.t.Fatal(err)
	}
}

// token issues a personal access token for u.
func (w *mxWorld) token(u *mxUser, scopes ...string) string {
	w.t.Helper()
	raw, _, err := w.app.Auth.CreateToken(w.ctx, u.User, "matrix", scopes, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	return raw
}

func (w *mxWorld) tokenRow(raw string) (string, *auth.AccessToken, error) {
	var t auth.AccessToken
	err := w.app.DB.Where("token_hash = ?", auth.HashToken(raw)).Take(&t).Error
	return raw, &t, err
}

// unique returns a fresh name with prefix.
func (w *mxWorld) unique(prefix string) string {
	return fmt.Sprintf("%s%d", prefix, w.seq.Add(1))
}

// scratchOrg creates a throwaway org with A's membership layout (plus victim as reporter), for
// routes that rename, delete or change members.
func (w *mxWorld) scratchOrg() string {
	w.t.Helper()
	name := w.unique("scratch-")
	o := w.createOrg(name, "A", "owner")
	for _, role := range []org.Role{org.Admin, org.Developer, org.Reporter, org.Billing} {
		w.addMember(o, w.users[string(role)], role)
	}
	w.addMember(o, w.users["victim"], org.Reporter)
	return name
}

// scratchRepo creates a throwaway private repo in A.
func (w *mxWorld) scratchRepo() string {
	w.t.Helper()
	name := w.unique("scratch-repo-")
	if _, err := w.app.Repos.Create(w.ctx, w.orgA, name, repo.Private, "main", ""); err != nil {
		w.t.Fatal(err)
	}
	return name
}

// invitation opens an invitation of org o (by its owner) for username, or for a fresh email
// when username is "".
func (w *mxWorld) invitation(o *org.Org, owner *mxUser, username string) int64 {
	w.t.Helper()
	email := ""
	if username == "" {
		email = w.unique("invitee-") + "@example.com"
	}
	inv, err := w.app.Orgs.Invite(w.ctx, o, owner.User, org.Owner, username, email, org.Reporter)
	if err != nil {
		w.t.Fatal(err)
	}
	return inv.ID
}

// invitationFor opens an invitation addressed to u, in a fresh org of root's.
func (w *mxWorld) invitationFor(u *mxUser) int64 {
	w.t.Helper()
	o := w.createOrg(w.unique("inviting-"), "root", "root")
	return w.invitation(o, w.users["root"], u.Name)
}

// freshSession starts another session for u (for routes that end the session they run in).
func (w *mxWorld) freshSession(u *mxUser) (cookie, csrf string) {
	w.t.Helper()
	raw, s, err := w.app.Auth.CreateSession(w.ctx, u.ID)
	if err != nil {
		w.t.Fatal(err)
	}
	return raw, s.CSRFToken
}

// resetToken asks for a password reset of u and returns the token from the email.
func (w *mxWorld) resetToken(u *mxUser) string {
	w.t.Helper()
	if err := w.app.Auth.RequestPasswordReset(w.ctx, u.Email); err != nil {
		w.t.Fatal(err)
	}
	m, ok := w.mail.last(u.Email)
	if !ok {
		w.t.Fatal("no reset email")
	}
	_, tok, ok := strings.Cut(m.Body, "token=")
	if !ok {
		w.t.Fatalf("no token in the reset email: %q", m.Body)
	}
	return strings.Fields(tok)[0]
}

// mxResp is one response.
type mxResp struct {
	Status  int
	Body    []byte
	Cookies []*http.Cookie
	Header  http.Header
}

func (r *mxResp) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// envelope returns the error envelope's code and message, or ok=false when the body is not one.
func (r *mxResp) envelope() (code, msg string, ok bool) {
	var env struct {
		Error *struct {
			Code    *string `json:"code"`
			Message *string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(r.Body, &env) != nil || env.Error == nil || env.Error.Code == nil || env.Error.Message == nil {
		return "", "", false
	}
	return *env.Error.Code, *env.Error.Message, *env.Error.Code != "" && *env.Error.Message != ""
}

// mxCodeFor is the envelope code each status must carry.
var mxCodeFor = map[int]string{
	400: "bad_request", 401: "unauthenticated", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
	409: "conflict", 413: "payload_too_large", 422: "validation_failed", 429: "rate_limited",
}

// mxExtraCodes are the codes beyond the README's list, with their status: the agent protocol's.
var mxExtraCodes = map[string]int{protocol.ErrCodeLeaseLost: 409}

// mxReq is one request as the tests describe it.
type mxReq struct {
	Method, Path string
	Body         any // nil: none; string or []byte: raw; anything else: JSON
	// Cookie and CSRF override the principal's session; NoCSRF drops the header.
	Cookie, CSRF string
	NoCSRF       bool
	Basic        bool // send the principal's token as the HTTP Basic password (git), not as Bearer
	Header       map[string]string
}

// do sends a request as p (nil = anonymous) and returns the response.
func (w *mxWorld) do(p *mxPrincipal, method, path string, body any) *mxResp {
	return w.send(p, mxReq{Method: method, Path: path, Body: body})
}

func (w *mxWorld) send(p *mxPrincipal, q mxReq) *mxResp {
	w.t.Helper()
	var rd io.Reader
	switch b := q.Body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			w.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req := httptest.NewRequest(q.Method, q.Path, rd)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	cookie, csrf := q.Cookie, q.CSRF
	if p != nil && p.Session && cookie == "" {
		cookie, csrf = p.Cookie, p.CSRF
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: auth.CookieName, Value: cookie})
		if csrf != "" && !q.NoCSRF {
			req.Header.Set(auth.HeaderCSRF, csrf)
		}
	}
	switch {
	case p != nil && p.Bearer != "" && q.Basic:
		req.SetBasicAuth("x", p.Bearer)
	case p != nil && p.Bearer != "":
		req.Header.Set("Authorization", "Bearer "+p.Bearer)
	}
	for k, v := range q.Header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	w.h.ServeHTTP(rec, req)
	res := rec.Result()
	return &mxResp{Status: rec.Code, Body: rec.Body.Bytes(), Cookies: res.Cookies(), Header: rec.Header()}
}

func mxBasic(user, password string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
}

// gitPush commits mxConfigFile with message msg in a new local repo, tags it v1 and pushes both to
// main and the tag of slug ("org/repo") over smart HTTP, served by the same handler,
// authenticating with token.
// repoOfA is A's repo name.
func (w *mxWorld) repoOfA(name string) *repo.Repo {
	w.t.Helper()
	var r repo.Repo
	if err := w.app.DB.Where("org_id = ? AND name = ?", w.orgA.ID, name).Take(&r).Error; err != nil {
		w.t.Fatal(err)
	}
	return &r
}

// freshBranch makes a branch of one new commit on main in repo name of A and returns its name.
func (w *mxWorld) freshBranch(name string) string {
	w.t.Helper()
	r := w.repoOfA(name)
	path := w.app.Repos.Path(r)
	head, err := git.ResolveRef(w.ctx, path, "refs/heads/main")
	if err != nil {
		w.t.Fatal(err)
	}
	tree, err := git.TreeOf(w.ctx, path, head)
	if err != nil {
		w.t.Fatal(err)
	}
	branch := w.unique("topic-")
	who := git.Signature{Name: "Matrix", Email: "matrix@example.com", When: time.Now()}
	sha, err := git.CommitTree(w.ctx, path, git.NewCommit{Tree: tree, Parents: []string{head}, Message: branch, Author: who, Committer: who})
	if err == nil {
		err = git.UpdateRef(w.ctx, path, "refs/heads/"+branch, sha, git.ZeroSHA)
	}
	if err != nil {
		w.t.Fatal(err)
	}
	return branch
}

// openPull opens a pull request of a fresh branch into main of repo name of A, as its owner.
func (w *mxWorld) openPull(name string) int64 {
	w.t.Helper()
	owner := w.users["owner"]
	pr, err := w.app.Pulls.Open(w.ctx, w.repoOfA(name), pull.Person{ID: owner.ID, Name: owner.Name, Email: owner.Email},
		pull.OpenInput{Source: w.freshBranch(name), Target: "main", Title: "Matrix pull"})
	if err != nil {
		w.t.Fatal(err)
	}
	return pr.Number
}

func (w *mxWorld) gitPush(slug, token, msg string) {
	t := w.t
	t.Helper()
	srv := httptest.NewServer(w.h)
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword("x", token)
	u.Path = "/" + slug + ".git"
	dir := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LC_ALL=C", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0"}
	if err := os.WriteFile(filepath.Join(dir, ".cnb.yml"), []byte(mxConfigFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, ".cnb"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".cnb", "web_trigger.yml"), []byte(mxButtonsFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".cnb", "tag_deploy.yml"), []byte(mxDeployFile), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", ".cnb.yml", ".cnb/web_trigger.yml", ".cnb/tag_deploy.yml"},
		{"commit", "-q", "-m", msg},
		{"tag", "-a", "v1", "-m", "v1"}, // releases belong to tags
		{"push", "-q", u.String(), "main", "refs/tags/v1"},
	} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=Matrix", "-c", "user.email=matrix@example.com",
			"-c", "credential.helper=", "-c", "protocol.version=2"}, args...)...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", args[0], err, out)
		}
	}
}

// mxSnapshot is every row of every table, as sorted strings per table, without the columns
// that reading itself updates (last_used_at, last_seen_at).
type mxSnapshot map[string][]string

var mxVolatileColumns = map[string]bool{"last_used_at": true, "last_seen_at": true}

// snapshotSQL builds (once) one query that returns every row of every table as text: one
// round trip per snapshot, so that checking every refused write stays cheap.
func (w *mxWorld) snapshotSQL() string {
	w.t.Helper()
	if w.snapQuery != "" {
		return w.snapQuery
	}
	tables, err := w.app.DB.Migrator().GetTables()
	if err != nil {
		w.t.Fatal(err)
	}
	sort.Strings(tables)
	var parts []string
	for _, table := range tables {
		if strings.HasPrefix(table, "goose_") || strings.HasPrefix(table, "sqlite_") {
			continue
		}
		cols, err := w.app.DB.Migrator().ColumnTypes(table)
		if err != nil {
			w.t.Fatal(err)
		}
		var exprs []string
		for _, c := range cols {
			if !mxVolatileColumns[c.Name()] {
				exprs = append(exprs, fmt.Sprintf(`'%s=' || COALESCE(CAST("%s" AS TEXT), 'NULL')`, c.Name(), c.Name()))
			}
		}
		parts = append(parts, fmt.Sprintf(`SELECT '%s' AS t, %s AS r FROM "%s"`, table, strings.Join(exprs, " || ' ' || "), table))
	}
	w.snapQuery = strings.Join(parts, " UNION ALL ")
	return w.snapQuery
}

func (w *mxWorld) snapshot() mxSnapshot {
	w.t.Helper()
	rows, err := w.app.DB.Raw(w.snapshotSQL()).Rows()
	if err != nil {
		w.t.Fatalf("snapshot: %v", err)
	}
	defer rows.Close()
	snap := mxSnapshot{}
	for rows.Next() {
		var table, row string
		if err := rows.Scan(&table, &row); err != nil {
			w.t.Fatalf("snapshot: %v", err)
		}
		snap[table] = append(snap[table], row)
	}
	if err := rows.Err(); err != nil {
		w.t.Fatalf("snapshot: %v", err)
	}
	for _, rs := range snap {
		sort.Strings(rs)
	}
	return snap
}

// diff describes how after differs from before ("" when equal).
func (before mxSnapshot) diff(after mxSnapshot) string {
	var b strings.Builder
	tables := map[string]bool{}
	for t := range before {
		tables[t] = true
	}
	for t := range after {
		tables[t] = true
	}
	var names []string
	for t := range tables {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, t := range names {
		was, is := map[string]int{}, map[string]int{}
		for _, r := range before[t] {
			was[r]++
		}
		for _, r := range after[t] {
			is[r]++
		}
		for r, n := range is {
			if was[r] < n {
				fmt.Fprintf(&b, "  %s: + %s\n", t, r)
			}
		}
		for r, n := range was {
			if is[r] < n {
				fmt.Fprintf(&b, "  %s: - %s\n", t, r)
			}
		}
	}
	return b.String()
}
