// Package apptest starts a whole Nimbus app behind a real HTTP server, for the tests of what
// needs everything assembled (the registry, the model files, the CLI against a server), and
// makes the people, teams, repos and tokens those tests start from. Only tests import it.
package apptest

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/app"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/build/buildtest"
	"github.com/nimbus-build/nimbus/backend/config"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// Server is one app and its HTTP server.
type Server struct {
	App  *app.App
	HTTP *httptest.Server
	URL  string
}

// Start assembles the app from the server settings in env (NIMBUS_*; by default SQLite in a
// temp dir, copied already migrated from storetest's template, the embedded Redis, local
// storage, no built-in agent, the public URL of the test server) and serves it until the test
// ends.
func Start(t testing.TB, env map[string]string, opt app.Options) *Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	all := map[string]string{"NIMBUS_BUILTIN_AGENT": "false",
		"NIMBUS_PUBLIC_URL": "http://" + srv.Listener.Addr().String()}
	for k, v := range env {
		all[k] = v
	}
	if all["NIMBUS_DATA_DIR"] == "" {
		// On SQLite, an already migrated file, so the app's migrate step has nothing to do.
		all["NIMBUS_DATA_DIR"] = storetest.DataDir(t, all["NIMBUS_DATABASE_URL"])
	}
	cfg, _, err := config.Load("nimbus-server", nil, func(k string) string { return all[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if opt.Passwords == (auth.PasswordCost{}) {
		opt.Passwords = auth.CheapPasswords()
	}
	a, err := app.New(context.Background(), cfg, slog.New(slog.DiscardHandler), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	srv.Config.Handler = a.Server.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	return &Server{App: a, HTTP: srv, URL: srv.URL}
}

// Password is every account's password (Signup).
func Password(name string) string {
	return "a long enough passphrase " + strings.Repeat("x", len(name))
}

// Signup creates an account (the first one of an install is a platform admin).
func (s *Server) Signup(t testing.TB, name string) *auth.User {
	t.Helper()
	u, err := s.App.Auth.Signup(context.Background(), name, name+"@example.com", Password(name))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Org creates a team owned by owner.
func (s *Server) Org(t testing.TB, owner *auth.User, name string) *org.Org {
	t.Helper()
	o, err := s.App.Orgs.Create(context.Background(), owner, name)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// Member adds u to the team with role.
func (s *Server) Member(t testing.TB, o *org.Org, u *auth.User, role org.Role) {
	t.Helper()
	if err := s.App.DB.Create(&org.Member{OrgID: o.ID, UserID: u.ID, Role: role, CreatedAt: time.Now()}).Error; err != nil {
		t.Fatal(err)
	}
}

// Repo creates a repo of the team.
func (s *Server) Repo(t testing.TB, o *org.Org, name, visibility string) *repo.Repo {
	t.Helper()
	r, err := s.App.Repos.Create(context.Background(), o, name, visibility, "", "")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Token issues a personal access token of u.
func (s *Server) Token(t testing.TB, u *auth.User, scopes ...string) string {
	t.Helper()
	raw, _, err := s.App.Auth.CreateToken(context.Background(), u, "test", scopes, nil)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// DeployToken issues a deploy token of the repo.
func (s *Server) DeployToken(t testing.TB, r *repo.Repo, by *auth.User) string {
	t.Helper()
	dt, err := s.App.Repos.CreateDeployToken(context.Background(), r, by.ID, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	return dt.Token
}

// JobToken makes build number n of the repo at commit, run by user by, with a running pipeline,
// and returns the pipeline's CNB_TOKEN.
func (s *Server) JobToken(t testing.TB, r *repo.Repo, by, n int64, commit string) string {
	t.Helper()
	seeded, err := buildtest.Seed(s.App.DB, buildtest.Running{RepoID: r.ID, OrgID: r.OrgID, Number: n, Commit: commit, TriggeredBy: by})
	if err != nil {
		t.Fatal(err)
	}
	return seeded.JobToken
}

// Cast is the people, places and credentials the registry's and the model files' tests start
// from: team acme (owner alice, developer dave, reporter rita) with a private repo named by the
// test, the public repo pub and the archived repo old; team other (owner bob) with the private
// repo secret. Creds has a token per kind of caller: alice, dave, rita and bob (registry:write),
// readonly (alice's, registry:read), reposcope (alice's, repo:write), deploy (the private repo's
// deploy token) and job (the CNB_TOKEN of a running build of the private repo, run by dave).
type Cast struct {
	Users   map[string]*auth.User
	Private *repo.Repo
	Creds   map[string]string
}

// Cast creates the cast; the job token's build has number n and commit.
func (s *Server) Cast(t testing.TB, private string, n int64, commit string) Cast {
	t.Helper()
	c := Cast{Users: map[string]*auth.User{}, Creds: map[string]string{}}
	for _, name := range []string{"alice", "dave", "rita", "bob"} {
		c.Users[name] = s.Signup(t, name)
	}
	acme := s.Org(t, c.Users["alice"], "acme")
	other := s.Org(t, c.Users["bob"], "other")
	s.Member(t, acme, c.Users["dave"], org.Developer)
	s.Member(t, acme, c.Users["rita"], org.Reporter)
	c.Private = s.Repo(t, acme, private, repo.Private)
	s.Repo(t, acme, "pub", repo.Public)
	old := s.Repo(t, acme, "old", repo.Private)
	archived := true
	if err := s.App.Repos.Update(context.Background(), old, repo.Patch{Archived: &archived}); err != nil {
		t.Fatal(err)
	}
	s.Repo(t, other, "secret", repo.Private)
	for _, u := range []string{"alice", "dave", "rita", "bob"} {
		c.Creds[u] = s.Token(t, c.Users[u], auth.ScopeRegistryWrite)
	}
	c.Creds["readonly"] = s.Token(t, c.Users["alice"], auth.ScopeRegistryRead)
	c.Creds["reposcope"] = s.Token(t, c.Users["alice"], auth.ScopeRepoWrite)
	c.Creds["deploy"] = s.DeployToken(t, c.Private, c.Users["alice"])
	c.Creds["job"] = s.JobToken(t, c.Private, c.Users["dave"].ID, n, commit)
	return c
}
