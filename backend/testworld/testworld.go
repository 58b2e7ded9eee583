// Package testworld builds the domain services that tests stand on (auth, org, repo and build
// over one database, one Redis and one fake clock) wired as app.New wires them, so a package's
// tests make a world in one call instead of keeping a copy of the wiring.
//
//	testworld.New(t, db, Options{…}) ──► World{Users, Orgs, Repos, Builds, Clock, Redis, Log}
//	                                      a team's account is opened with the team (as in app.New)
//
// Whole servers (HTTP, agents, every room) are backend/app/apptest's; the databases are
// backend/store/storetest's (template copies, so a world costs milliseconds); a package's own
// Redis database is backend/redisconn/redistest's.
package testworld

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/billing"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/mail"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/redisconn"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/secrets"
)

// PublicURL is the server URL worlds are made with unless Options say otherwise.
const PublicURL = "http://nimbus.test"

// Options shape a world; the zero value is a quiet world at 2026-05-01 00:00 UTC.
type Options struct {
	// Now is where the fake clock starts (2026-05-01 00:00 UTC when zero).
	Now time.Time
	// Clock replaces the fake clock (clock.Real{} for benchmarks that measure latency); World.Clock
	// is nil then.
	Clock clock.Clock
	// Redis is the world's Redis; nil starts an in-process Redis-protocol server of the test's
	// own (what make run uses), enough for sessions and rate limits. Tests of Redis itself
	// (queues, locks, the leader) pass a real one: redistest.Isolated.
	Redis redis.UniversalClient
	// Log receives the services' logs (discarded when nil).
	Log *slog.Logger
	// Mail sends the services' mail (logged to Log when nil).
	Mail mail.Sender
	// Auth configures accounts and sessions.
	Auth auth.Config
	// PublicURL is the server's URL in links (PublicURL when empty).
	PublicURL string
	// Build configures the build service: Queue, Agents, Logs, Spec and the rest are taken as
	// given; DB, Repos, Users, Clock, Log and PublicURL are the world's.
	Build build.Config
}

// World is the services of one test, over one database.
type World struct {
	DB     *gorm.DB
	Redis  redis.UniversalClient
	Clock  *clock.Fake // nil when Options.Clock was given
	Log    *slog.Logger
	Users  *auth.Service
	Orgs   *org.Service
	Repos  *repo.Service
	Builds *build.Service
}

// New builds a world over db (storetest.SQLite, storetest.Postgres or storetest.Each's).
func New(t testing.TB, db *gorm.DB, o Options) *World {
	t.Helper()
	if o.Now.IsZero() {
		o.Now = time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Mail == nil {
		o.Mail = mail.Log{Logger: o.Log}
	}
	if o.PublicURL == "" {
		o.PublicURL = PublicURL
	}
	if o.Redis == nil {
		rc, err := redisconn.Connect(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rc.Close() })
		o.Redis = rc.Client
	}
	w := &World{DB: db, Redis: o.Redis, Log: o.Log}
	clk := o.Clock
	if clk == nil {
		w.Clock = clock.NewFake(o.Now)
		clk = w.Clock
	}
	if o.Auth.Passwords == (auth.PasswordCost{}) {
		o.Auth.Passwords = auth.CheapPasswords()
	}
	w.Users = auth.NewService(db, o.Redis, clk, o.Mail, o.Log, o.Auth)
	w.Orgs = org.NewService(db, w.Users, clk, o.Mail, o.PublicURL, o.Log)
	w.Orgs.OnCreate(func(tx *gorm.DB, og *org.Org) error { return billing.OpenAccount(tx, og.ID, clk.Now().UTC()) })
	box, err := secrets.NewBox(bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	w.Repos = repo.NewService(db, w.Orgs, box, clk, t.TempDir(), o.Log)
	bc := o.Build
	bc.DB, bc.Repos, bc.Users, bc.Clock, bc.Log, bc.PublicURL = db, w.Repos, w.Users, clk, o.Log, o.PublicURL
	w.Builds = build.NewService(bc)
	return w
}

// Signup makes an account with a throwaway password.
func (w *World) Signup(t testing.TB, name string) *auth.User {
	t.Helper()
	u, err := w.Users.Signup(context.Background(), name, name+"@example.com", "a long enough passphrase")
	if err != nil {
		t.Fatal(err)
	}
	return u
}
