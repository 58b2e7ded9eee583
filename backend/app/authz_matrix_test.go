package app

import (
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"time"

	"gorm.io/gorm/clause"

	"github.com/nimbus-build/nimbus/backend/artifacts"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/pull"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// The authorization matrix's table (the harness that runs it is authz_test.go): the world's
// paths, the preps that fill a row's placeholders, and one row per route of the server.

// Path prefixes of the world's orgs and repos.
const (
	mxA     = "/api/v1/orgs/" + mxOrgA
	mxB     = "/api/v1/orgs/" + mxOrgB
	mxAPriv = "/api/v1/repos/" + mxOrgA + "/" + mxPrivA
	mxAPub  = "/api/v1/repos/" + mxOrgA + "/" + mxPubA
	mxBPriv = "/api/v1/repos/" + mxOrgB + "/" + mxPrivB
	mxARepo = "/api/v1/repos/" + mxOrgA + "/{repo}" // a fresh private repo of A
)

// Preps.

func mxScratchOrg(w *mxWorld, c *mxCall)  { c.Vars["org"] = w.scratchOrg() }
func mxScratchRepo(w *mxWorld, c *mxCall) { c.Vars["repo"] = w.scratchRepo() }

// mxSelf names the caller (victim for callers without a person) in {self}.
func mxSelf(w *mxWorld, c *mxCall) { c.Vars["self"] = mxUserOf(w, c).Name }

// mxUserOf is the call's person, or victim when there is none (anonymous, deploy token).
func mxUserOf(w *mxWorld, c *mxCall) *mxUser {
	if c.P.User != nil {
		return c.P.User
	}
	return w.users["victim"]
}

// mxForkInto forks into the caller's own team: B for the outsider (B's owner), A for the rest.
func mxForkInto(w *mxWorld, c *mxCall) {
	team := mxOrgA
	if c.P.Col == mxColOutsider {
		team = mxOrgB
	}
	c.Body = map[string]string{"org": team, "name": w.unique("fork-")}
}

// mxUnique sets a body whose key is a fresh name, plus fixed pairs.
func mxUnique(key, prefix string, pairs ...string) func(w *mxWorld, c *mxCall) {
	return func(w *mxWorld, c *mxCall) {
		b := map[string]string{key: w.unique(prefix)}
		if key == "email" {
			b[key] += "@example.com"
		}
		for i := 0; i+1 < len(pairs); i += 2 {
			b[pairs[i]] = pairs[i+1]
		}
		c.Body = b
	}
}

func mxFreshSession(w *mxWorld, c *mxCall) {
	if c.P.Session {
		c.Cookie, c.CSRF = w.freshSession(c.P.User)
	}
}

func mxSignupBody(w *mxWorld, c *mxCall) {
	n := w.unique("newbie")
	c.Body = map[string]string{"username": n, "email": n + "@example.com", "password": mxPassword}
}

func mxResetBody(w *mxWorld, c *mxCall) {
	c.Body = map[string]string{"token": w.resetToken(w.users["resetme"]), "password": mxPassword}
}

func mxOwnToken(w *mxWorld, c *mxCall) {
	_, t, _ := w.tokenRow(w.token(mxUserOf(w, c), "repo:read"))
	c.Vars["id"] = fmt.Sprint(t.ID)
}

func mxRootsToken(w *mxWorld, c *mxCall) {
	_, t, _ := w.tokenRow(w.token(w.users["root"], "repo:read"))
	c.Vars["id"] = fmt.Sprint(t.ID)
}

// mxOwnSession starts another session of the caller (victim for callers without a person) and
// names it in {id} by its public id.
func mxOwnSession(w *mxWorld, c *mxCall) {
	_, s, err := w.app.Auth.CreateSession(w.ctx, mxUserOf(w, c).ID)
	if err != nil {
		w.t.Fatal(err)
	}
	c.Vars["id"] = auth.PublicSessionID(s.ID)
}

func mxRootsSession(w *mxWorld, c *mxCall) {
	_, s, err := w.app.Auth.CreateSession(w.ctx, w.users["root"].ID)
	if err != nil {
		w.t.Fatal(err)
	}
	c.Vars["id"] = auth.PublicSessionID(s.ID)
}

func mxOwnInvitation(w *mxWorld, c *mxCall) {
	c.Vars["id"] = fmt.Sprint(w.invitationFor(mxUserOf(w, c)))
}

func mxVictimsInvitation(w *mxWorld, c *mxCall) {
	c.Vars["id"] = fmt.Sprint(w.invitationFor(w.users["victim"]))
}

func mxInvitationOfA(w *mxWorld, c *mxCall) {
	c.Vars["id"] = fmt.Sprint(w.invitation(w.orgA, w.users["owner"], ""))
}

// mxSecretRepo is a fresh secret repository of A with one file, env.yml, in {repo}.
func mxSecretRepo(w *mxWorld, c *mxCall) {
	r, err := w.app.Repos.CreateSecretRepo(w.ctx, w.orgA, w.unique("keys-"), "")
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.app.Repos.PutSecretFile(w.ctx, r, w.users["owner"].User.ID, "env.yml", "K: v\n"); err != nil {
		w.t.Fatal(err)
	}
	c.Vars["repo"] = r.Name
}

func mxDoomedSecret(w *mxWorld, c *mxCall) {
	c.Vars["name"] = w.unique("DOOMED_")
	if err := w.app.Repos.PutSecret(w.ctx, w.privA, c.Vars["name"], "x"); err != nil {
		w.t.Fatal(err)
	}
}

// mxPublishHook gives A's private repo a publish webhook (on loopback) when it has none.
func mxPublishHook(w *mxWorld, c *mxCall) {
	err := w.app.DB.Clauses(clause.OnConflict{DoNothing: true}).Create(&artifacts.PublishHook{RepoID: w.privA.ID,
		URL: "http://127.0.0.1:9/hook", Secret: []byte("sealed"), CreatedAt: time.Now(), UpdatedAt: time.Now()}).Error
	if err != nil {
		w.t.Fatal(err)
	}
}

// mxScheduleOf names in {id} the schedule the push of mxConfigFile registered in repoName, a
// repo of A.
func mxScheduleOf(repoName string) func(w *mxWorld, c *mxCall) {
	return func(w *mxWorld, c *mxCall) {
		var ids []int64
		err := w.app.DB.Table("schedules").Where("repo_id = (?)",
			w.app.DB.Table("repos").Select("id").Where("org_id = ? AND name = ?", w.orgA.ID, repoName)).Pluck("id", &ids).Error
		if err != nil || len(ids) != 1 {
			w.t.Fatalf("the schedule of %s: %v %v", repoName, ids, err)
		}
		c.Vars["id"] = fmt.Sprint(ids[0])
	}
}

func mxDeployTokenOfA(w *mxWorld, c *mxCall) {
	t, err := w.app.Repos.CreateDeployToken(w.ctx, w.privA, w.users["owner"].ID, "doomed", nil)
	if err != nil {
		w.t.Fatal(err)
	}
	c.Vars["id"] = fmt.Sprint(t.ID)
}

// mxMatrix has at least one row for every route of the server (the test fails otherwise), so a
// new route needs a new row.
var mxMatrix = []mxRow{
	// ---- operations and public documents
	//  anon | rep dev adm own bil | out | nosc ro | dep job
	mx("200 | 200 200 200 200 200 | 200 | 200 200 | 200 200", "GET", "/healthz"),
	mx("200 | 200 200 200 200 200 | 200 | 200 200 | 200 200", "GET", "/readyz"),
	mx("200 | 200 200 200 200 200 | 200 | 200 200 | 200 200", "GET", "/metrics"),
	// The nimbus CLI (package downloads): public, it is no secret and a newcomer needs it first.
	mx("200 | 200 200 200 200 200 | 200 | 200 200 | 200 200", "GET", "/downloads/nimbus-linux-amd64"),
	mx("200 | 200 200 200 200 200 | 200 | 200 200 | 200 200", "HEAD", "/downloads/nimbus-linux-amd64"),
	mx("200 | 200 200 200 200 200 | 200 | 200 200 | 200 200", "GET", "/downloads/nimbus-linux-amd64.sha256"),
	mx("200 | 200 200 200 200 200 | 200 | 200 200 | 200 200", "GET", "/api/v1/version"),
	mx("200 | 200 200 200 200 200 | 200 | 200 200 | 200 200", "GET", "/api/v1/openapi.json"),

	// ---- accounts: the entry points anyone may use
	mx("201 | 201 201 201 201 201 | 201 | 201 201 | 201 201", "POST", "/api/v1/auth/signup").prep(mxSignupBody),
	mx("200 | 200 200 200 200 200 | 200 | 200 200 | 200 200", "POST", "/api/v1/auth/login").
		body(map[string]string{"login": "root", "password": mxPassword}),
	mx("204 | 204 204 204 204 204 | 204 | 204 204 | 204 204", "POST", "/api/v1/auth/logout").prep(mxFreshSession),
	mx("202 | 202 202 202 202 202 | 202 | 202 202 | 202 202", "POST", "/api/v1/auth/password-reset").
		body(map[string]string{"email": "root@example.com"}),
	mx("204 | 204 204 204 204 204 | 204 | 204 204 | 204 204", "POST", "/api/v1/auth/password-reset/confirm").prep(mxResetBody),

	// ---- the caller's own account; tokens may not manage it
	//  anon | rep dev adm own bil | out | nosc ro | dep job
	mx("401 | 200 200 200 200 200 | 200 | 200 200 | 401 403", "GET", "/api/v1/user"),
	mx("401 | 204 204 204 204 204 | 204 | 403 403 | 401 403", "PUT", "/api/v1/user/password").sessionOnly().
		body(map[string]string{"current_password": mxPassword, "new_password": mxPassword}),
	mx("401 | 200 200 200 200 200 | 200 | 403 403 | 401 403", "GET", "/api/v1/user/tokens").sessionOnly(),
	mx("401 | 201 201 201 201 201 | 201 | 403 403 | 401 403", "POST", "/api/v1/user/tokens").sessionOnly().
		body(map[string]any{"name": "ci", "scopes": []string{"repo:read"}}),
	mx("401 | 204 204 204 204 204 | 204 | 403 403 | 401 403", "DELETE", "/api/v1/user/tokens/{id}").sessionOnly().
		note("own token").prep(mxOwnToken),
	mx("401 | 404 404 404 404 404 | 404 | 403 403 | 401 403", "DELETE", "/api/v1/user/tokens/{id}").sessionOnly().
		note("someone else's token").prep(mxRootsToken),
	mx("401 | 200 200 200 200 200 | 200 | 403 403 | 401 403", "GET", "/api/v1/user/sessions").sessionOnly(),
	mx("401 | 204 204 204 204 204 | 204 | 403 403 | 401 403", "DELETE", "/api/v1/user/sessions/{id}").sessionOnly().
		note("own session").prep(mxOwnSession),
	mx("401 | 404 404 404 404 404 | 404 | 403 403 | 401 403", "DELETE", "/api/v1/user/sessions/{id}").sessionOnly().
		note("someone else's session").prep(mxRootsSession),
	mx("401 | 200 200 200 200 200 | 200 | 403 200 | 401 403", "GET", "/api/v1/user/orgs"),
	mx("401 | 200 200 200 200 200 | 200 | 403 200 | 401 403", "GET", "/api/v1/user/invitations"),
	mx("401 | 204 204 204 204 204 | 204 | 403 403 | 401 403", "POST", "/api/v1/user/invitations/{id}/accept").
		note("own invitation").prep(mxOwnInvitation),
	mx("401 | 204 204 204 204 204 | 204 | 403 403 | 401 403", "POST", "/api/v1/user/invitations/{id}/decline").
		note("own invitation").prep(mxOwnInvitation),
	mx("401 | 404 404 404 404 404 | 404 | 403 403 | 401 403", "POST", "/api/v1/invitations/accept").
		note("a link token nobody was sent").body(map[string]string{"token": "not-a-real-invitation-token"}),
	mx("401 | 404 404 404 404 404 | 404 | 404 404 | 401 403", "POST", "/api/v1/invitations/preview").
		note("a link token nobody was sent").body(map[string]string{"token": "not-a-real-invitation-token"}),
	mx("401 | 404 404 404 404 404 | 404 | 403 403 | 401 403", "POST", "/api/v1/user/invitations/{id}/accept").
		note("someone else's invitation").prep(mxVictimsInvitation),
	mx("401 | 404 404 404 404 404 | 404 | 403 403 | 401 403", "POST", "/api/v1/user/invitations/{id}/decline").
		note("someone else's invitation").prep(mxVictimsInvitation),

	// ---- orgs ({org} is a fresh org with A's members, plus victim as reporter)
	//  anon | rep dev adm own bil | out | nosc ro | dep job
	mx("401 | 201 201 201 201 201 | 201 | 403 403 | 401 403", "POST", "/api/v1/orgs").prep(mxUnique("name", "team-")),
	mx("401 | 200 200 200 200 200 | 404 | 403 200 | 404 404", "GET", mxA),
	mx("401 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", mxB),
	mx("401 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "GET", "/api/v1/orgs/"+mxGhostOrg),
	mx("401 | 403 403 200 200 403 | 404 | 403 403 | 404 404", "PATCH", "/api/v1/orgs/{org}").note("rename").
		prep(mxScratchOrg, mxUnique("name", "renamed-")),
	mx("401 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "PATCH", mxB).body(map[string]string{"name": mxOrgB}),
	mx("401 | 403 403 403 204 403 | 404 | 403 403 | 404 404", "DELETE", "/api/v1/orgs/{org}").prep(mxScratchOrg),
	mx("401 | 403 403 403 409 403 | 404 | 403 403 | 404 404", "DELETE", mxA).note("repos remain"),
	mx("401 | 200 200 200 200 200 | 404 | 403 200 | 404 404", "GET", mxA+"/members"),
	mx("401 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", mxB+"/members"),
	mx("401 | 403 403 204 204 403 | 404 | 403 403 | 404 404", "PUT", "/api/v1/orgs/{org}/members/victim").
		body(map[string]string{"role": "developer"}).prep(mxScratchOrg),
	mx("401 | 403 403 403 204 403 | 404 | 403 403 | 404 404", "PUT", "/api/v1/orgs/{org}/members/victim").
		note("only owners grant owner").body(map[string]string{"role": "owner"}).prep(mxScratchOrg),
	mx("401 | 403 403 403 409 403 | 404 | 403 403 | 404 404", "PUT", "/api/v1/orgs/{org}/members/owner").
		note("only owners touch owners; one always remains").body(map[string]string{"role": "admin"}).prep(mxScratchOrg),
	mx("401 | 403 403 204 204 403 | 404 | 403 403 | 404 404", "DELETE", "/api/v1/orgs/{org}/members/victim").prep(mxScratchOrg),
	mx("401 | 403 403 403 409 403 | 404 | 403 403 | 404 404", "DELETE", "/api/v1/orgs/{org}/members/owner").
		note("only owners remove owners; one always remains").prep(mxScratchOrg),
	mx("401 | 204 204 204 409 204 | 404 | 403 403 | 404 404", "DELETE", "/api/v1/orgs/{org}/members/{self}").
		note("leave; the last owner cannot").prep(mxScratchOrg, mxSelf),
	mx("401 | 404 404 404 404 404 | 409 | 404 404 | 404 404", "DELETE", mxB+"/members/outsider").note("B's last owner"),
	mx("401 | 403 403 200 200 403 | 404 | 403 200 | 404 404", "GET", mxA+"/invitations"),
	mx("401 | 403 403 201 201 403 | 404 | 403 403 | 404 404", "POST", mxA+"/invitations").
		prep(mxUnique("email", "invitee-", "role", "developer")),
	mx("401 | 403 403 403 201 403 | 404 | 403 403 | 404 404", "POST", mxA+"/invitations").note("only owners invite owners").
		prep(mxUnique("email", "invitee-", "role", "owner")),
	mx("401 | 403 403 204 204 403 | 404 | 403 403 | 404 404", "DELETE", mxA+"/invitations/{id}").prep(mxInvitationOfA),
	mx("401 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "DELETE", mxB+"/invitations/{id}").
		note("A's invitation through B").prep(mxInvitationOfA),

	// ---- repos ({repo} is a fresh private repo of A). Anonymous callers get what a
	// non-member gets for private repos, 404 (package repo's Resolve: a private repo does not
	// exist for whoever may not read it), and 401 for writes to public ones.
	//  anon | rep dev adm own bil | out | nosc ro | dep job
	mx("401 | 403 201 201 201 403 | 404 | 403 403 | 404 404", "POST", mxA+"/repos").
		prep(mxUnique("name", "repo-", "visibility", "private")),
	mx("401 | 404 404 404 404 404 | 201 | 404 404 | 404 404", "POST", mxB+"/repos").
		prep(mxUnique("name", "repo-", "visibility", "private")),
	// A team exists for non-members only while it has a public repo (backend/org/README.md): A
	// lists its public ones to them; B, with none, is the 404 of a name nobody has, to anonymous
	// callers too (it answered 200 with no items, which told B exists).
	mx("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", "GET", mxA+"/repos").note("non-members: public ones"),
	mx("404 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", mxB+"/repos").note("no public repo: invisible to non-members"),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "GET", "/api/v1/orgs/"+mxGhostOrg+"/repos"),
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv),
	mx("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", "GET", mxAPub),
	mx("404 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", mxBPriv),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "GET", "/api/v1/repos/"+mxOrgA+"/"+mxGhostRepo),
	mx("404 | 403 403 200 200 403 | 404 | 403 403 | 403 403", "PATCH", mxAPriv).body(map[string]any{"archived": false}),
	mx("401 | 403 403 200 200 403 | 403 | 403 403 | 403 403", "PATCH", mxAPub).body(map[string]any{"archived": false}),
	mx("404 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "PATCH", mxBPriv).body(map[string]any{"archived": false}),
	mx("404 | 403 403 200 200 403 | 404 | 403 403 | 404 404", "PATCH", mxARepo).note("rename").
		prep(mxScratchRepo, mxUnique("name", "renamed-repo-")),
	mx("404 | 403 403 204 204 403 | 404 | 403 403 | 404 404", "DELETE", mxARepo).prep(mxScratchRepo),
	// Forks: reading the source is enough, into a team where the caller writes; a private repo
	// forks only within its team, so the outsider (who cannot see A's) gets 404 and forks A's
	// public repo into B.
	mx("401 | 403 201 201 201 403 | 201 | 403 403 | 403 403", "POST", mxAPub+"/forks").prep(mxForkInto),
	mx("404 | 403 201 201 201 403 | 404 | 403 403 | 403 403", "POST", mxAPriv+"/forks").prep(mxForkInto),
	mx("404 | 404 404 404 404 404 | 201 | 404 404 | 404 404", "POST", mxBPriv+"/forks").prep(mxForkInto),
	mx("404 | 403 403 200 200 403 | 404 | 403 403 | 403 403", "GET", mxAPriv+"/secrets"),
	mx("401 | 403 403 200 200 403 | 403 | 403 403 | 403 403", "GET", mxAPub+"/secrets"),
	mx("404 | 403 403 204 204 403 | 404 | 403 403 | 403 403", "PUT", mxAPriv+"/secrets/"+mxSecretName).
		body(map[string]string{"value": mxSecretValue}),
	mx("404 | 403 403 204 204 403 | 404 | 403 403 | 403 403", "DELETE", mxAPriv+"/secrets/{name}").prep(mxDoomedSecret),
	// A secret repository's files and audit: its admins only.
	mx("404 | 403 403 200 200 403 | 404 | 403 403 | 404 404", "GET", mxARepo+"/secret-files").prep(mxSecretRepo),
	mx("404 | 403 403 200 200 403 | 404 | 403 403 | 404 404", "GET", mxARepo+"/secret-files/env.yml").prep(mxSecretRepo),
	mx("404 | 403 403 200 200 403 | 404 | 403 403 | 404 404", "PUT", mxARepo+"/secret-files/env.yml").prep(mxSecretRepo).
		body(map[string]string{"content": "K: v\n"}),
	mx("404 | 403 403 204 204 403 | 404 | 403 403 | 404 404", "DELETE", mxARepo+"/secret-files/env.yml").prep(mxSecretRepo),
	mx("404 | 403 403 200 200 403 | 404 | 403 403 | 404 404", "GET", mxARepo+"/secret-reads").prep(mxSecretRepo),
	// The publish webhook: admins only.
	mx("404 | 403 403 200 200 403 | 404 | 403 403 | 403 403", "GET", mxAPriv+"/webhooks/publish").prep(mxPublishHook),
	mx("401 | 403 403 404 404 403 | 403 | 403 403 | 403 403", "GET", mxAPub+"/webhooks/publish").note("none set"),
	mx("404 | 403 403 200 200 403 | 404 | 403 403 | 403 403", "PUT", mxAPriv+"/webhooks/publish").
		body(map[string]string{"url": "http://127.0.0.1:9/hook"}),
	mx("404 | 403 403 204 204 403 | 404 | 403 403 | 403 403", "DELETE", mxAPriv+"/webhooks/publish").prep(mxPublishHook),
	mx("404 | 403 403 200 200 403 | 404 | 403 403 | 403 403", "GET", mxAPriv+"/webhooks/publish/deliveries"),
	mx("404 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", mxBPriv+"/webhooks/publish/deliveries"),
	mx("404 | 403 403 200 200 403 | 404 | 403 403 | 403 403", "GET", mxAPriv+"/deploy-tokens"),
	mx("404 | 403 403 201 201 403 | 404 | 403 403 | 403 403", "POST", mxAPriv+"/deploy-tokens").
		body(map[string]string{"name": "inference"}),
	mx("404 | 403 403 204 204 403 | 404 | 403 403 | 403 403", "DELETE", mxAPriv+"/deploy-tokens/{id}").prep(mxDeployTokenOfA),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "DELETE", mxBPriv+"/deploy-tokens/{id}").
		note("A's deploy token through B").prep(mxDeployTokenOfA),

	// The tags page's auto-tag button: writers, as people (each press tags main's head anew).
	mx("404 | 403 201 201 201 403 | 404 | 403 403 | 403 403", "POST", mxAPriv+"/auto-tag"),
	mx("401 | 403 201 201 201 403 | 403 | 403 403 | 403 403", "POST", mxAPub+"/auto-tag"),
	mx("404 | 404 404 404 404 404 | 409 | 404 404 | 404 404", "POST", mxBPriv+"/auto-tag").note("B's repo is empty: nothing to tag"),

	// ---- code: reads, for readers and the repo's own job token, like the repo itself.
	//  anon | rep dev adm own bil | out | nosc ro | dep job
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/branches"),
	mx("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", "GET", mxAPub+"/branches"),
	mx("404 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", mxBPriv+"/branches"),
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/tags"),
	mx("404 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", mxBPriv+"/tags"),
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/tree?ref=main"),
	mx("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", "GET", mxAPub+"/tree?path=.cnb"),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "GET", mxBPriv+"/tree").note("B's repo is empty: no main, so a 404 for its owner too"),
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/blob?path=.cnb.yml"),
	mx("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", "GET", mxAPub+"/blob?path=.cnb.yml"),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "GET", mxBPriv+"/blob?path=.cnb.yml"),
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/raw?path=.cnb.yml"),
	mx("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", "GET", mxAPub+"/raw?path=.cnb.yml"),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "GET", mxBPriv+"/raw?path=.cnb.yml"),
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/commits"),
	mx("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", "GET", mxAPub+"/commits?limit=1"),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "GET", mxBPriv+"/commits"),
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/commits/{sha}").prep(mxHeadOf(mxPrivA)),
	mx("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", "GET", mxAPub+"/commits/main"),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "GET", mxBPriv+"/commits/{sha}").prep(mxHeadOf(mxPrivA)),

	// ---- pull requests (#1 of A's private repo is the world's; writes open and merge fresh ones).
	// A job token of the repo's own pipeline may open and edit as the build's user (CNB's
	// repo-pr:rw), and merge only the request of its own pull_request.mergeable build
	// (git:auto-merge; the matrix's job is a push build's, so its merge is a 403).
	//  anon | rep dev adm own bil | out | nosc ro | dep job
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/pulls"),
	mx("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", "GET", mxAPub+"/pulls?state=all"),
	mx("404 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", mxBPriv+"/pulls"),
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/pulls/1"),
	mx("404 | 404 404 404 404 404 | 404 | 403 404 | 404 404", "GET", mxAPriv+"/pulls/999"),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "GET", mxBPriv+"/pulls/1").note("B has no pull #1"),
	mx("404 | 403 201 201 201 403 | 404 | 403 403 | 403 201", "POST", mxAPriv+"/pulls").prep(mxFreshBranch(mxPrivA)),
	mx("401 | 403 201 201 201 403 | 403 | 403 403 | 403 403", "POST", mxAPub+"/pulls").prep(mxFreshBranch(mxPubA)),
	mx("404 | 403 200 200 200 403 | 404 | 403 403 | 403 200", "PATCH", mxAPriv+"/pulls/1").body(map[string]any{"title": "Matrix pull, edited"}),
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/pulls/1/files"),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "GET", mxBPriv+"/pulls/1/files"),
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/pulls/1/commits"),
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/pulls/1/metrics"),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "GET", mxBPriv+"/pulls/1/metrics"),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "GET", mxBPriv+"/pulls/1/commits"),
	// Approve and run: writers, as people; #1 is no fork's, so they get the 409 of a request
	// that does not wait (backend/pull's TestRequestFromAFork approves a held one).
	mx("404 | 403 409 409 409 403 | 404 | 403 403 | 403 403", "POST", mxAPriv+"/pulls/1/approve-run"),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "POST", mxBPriv+"/pulls/1/approve-run").note("B has no pull #1"),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "PATCH", mxBPriv+"/pulls/1").body(map[string]any{"title": "x"}),
	mx("404 | 403 200 200 200 403 | 404 | 403 403 | 403 403", "POST", mxAPriv+"/pulls/{n}/merge").prep(mxFreshPull).body(map[string]any{}),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "POST", mxBPriv+"/pulls/1/merge").body(map[string]any{}),
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/pulls/1/reviews"),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "GET", mxBPriv+"/pulls/1/reviews"),
	mx("404 | 403 201 201 201 403 | 404 | 403 403 | 403 403", "POST", mxAPriv+"/pulls/1/reviews").note("a pipeline does not review").
		body(map[string]any{"state": "comment", "body": "looks fine"}),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "POST", mxBPriv+"/pulls/1/reviews").body(map[string]any{"state": "comment", "body": "x"}),
	// Reviewers: writers (and the repo's pipelines, git:reviewer) ask people to review.
	mx("404 | 403 200 200 200 403 | 404 | 403 403 | 403 200", "POST", mxAPriv+"/pulls/1/reviewers").body(map[string]any{"add": []string{"admin"}}),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "POST", mxBPriv+"/pulls/1/reviewers").body(map[string]any{"add": []string{"admin"}}),
	// Comments: readers see them; anyone signed in who reads the repo comments, with repo:write
	// (a public repo's outsider too, as on GitHub); a job token comments as its pipeline.
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/pulls/1/comments"),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "GET", mxBPriv+"/pulls/1/comments"),
	mx("404 | 201 201 201 201 201 | 404 | 403 403 | 403 201", "POST", mxAPriv+"/pulls/1/comments").body(map[string]any{"body": "nice"}),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "POST", mxBPriv+"/pulls/1/comments").body(map[string]any{"body": "x"}),
	// Branch rules: readers see them, admins set them. The rules set here protect branches no
	// other row pushes to.
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/branch-rules"),
	mx("404 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", mxBPriv+"/branch-rules"),
	mx("404 | 403 403 200 200 403 | 404 | 403 403 | 403 403", "PUT", mxAPriv+"/branch-rules").
		body(map[string]any{"pattern": "release/*", "required_approvals": 1}),
	mx("401 | 403 403 200 200 403 | 403 | 403 403 | 403 403", "PUT", mxAPub+"/branch-rules").body(map[string]any{"pattern": "release/*"}),
	mx("404 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "PUT", mxBPriv+"/branch-rules").body(map[string]any{"pattern": "release/*"}),
	mx("404 | 403 403 204 204 403 | 404 | 403 403 | 403 403", "DELETE", mxAPriv+"/branch-rules/{id}").prep(mxDoomedRule),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "DELETE", mxBPriv+"/branch-rules/{id}").note("A's rule through B").prep(mxDoomedRule),
	// Merge settings: readers see the allowed modes, admins change them.
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/pull-settings"),
	mx("404 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", mxBPriv+"/pull-settings"),
	mx("404 | 403 403 200 200 403 | 404 | 403 403 | 403 403", "PUT", mxAPriv+"/pull-settings").body(map[string]any{"allow_rebase": true}),
	mx("401 | 403 403 200 200 403 | 403 | 403 403 | 403 403", "PUT", mxAPub+"/pull-settings").body(map[string]any{"allow_rebase": true}),
	mx("404 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "PUT", mxBPriv+"/pull-settings").body(map[string]any{"allow_rebase": true}),

	// ---- builds
	//  anon | rep dev adm own bil | out | nosc ro | dep job
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/builds"),
	mx("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", "GET", mxAPub+"/builds"),
	mx("404 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", mxBPriv+"/builds"),
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/builds/1"),
	mx("404 | 404 404 404 404 404 | 404 | 403 404 | 404 404", "GET", mxAPriv+"/builds/999"),
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/builds/1/pipelines"),
	mx("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", "GET", mxAPub+"/builds/1/pipelines"),
	mx("404 | 404 404 404 404 404 | 404 | 403 404 | 404 404", "GET", mxAPriv+"/builds/999/pipelines"),
	mx("404 | 403 201 201 201 403 | 404 | 403 403 | 403 403", "POST", mxAPriv+"/builds").
		body(map[string]any{"branch": "main", "event": "web_trigger", "env": map[string]string{"FOO": "bar"}}),
	mx("401 | 403 201 201 201 403 | 403 | 403 403 | 403 403", "POST", mxAPub+"/builds").
		body(map[string]any{"branch": "main", "event": "web_trigger"}),
	mx("404 | 403 201 201 201 403 | 404 | 403 403 | 403 403", "POST", mxAPriv+"/workspaces").
		body(map[string]any{"branch": "main"}),
	mx("401 | 403 201 201 201 403 | 403 | 403 403 | 403 403", "POST", mxAPub+"/workspaces").
		body(map[string]any{"branch": "main"}),
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/buttons"),
	mx("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", "GET", mxAPub+"/buttons?branch=main"),
	mx("404 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", mxBPriv+"/buttons"),
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/events"),
	mx("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", "GET", mxAPub+"/events"),
	mx("404 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", mxBPriv+"/events"),
	mx("404 | 403 201 201 201 403 | 404 | 403 403 | 403 403", "POST", mxAPriv+"/buttons/press").
		body(map[string]any{"button": "Run", "inputs": map[string]string{"MODE": "full"}}),
	mx("401 | 403 201 201 201 403 | 403 | 403 403 | 403 403", "POST", mxAPub+"/buttons/press").
		body(map[string]any{"button": "Run"}),
	// Commit statuses: writers and the repo's pipelines set them, readers see a commit's checks.
	mx("404 | 403 201 201 201 403 | 404 | 403 403 | 403 201", "POST", mxAPriv+"/statuses/{sha}").prep(mxHeadOf(mxPrivA)).
		body(map[string]any{"state": "success", "context": "eval"}),
	mx("401 | 403 201 201 201 403 | 403 | 403 403 | 403 403", "POST", mxAPub+"/statuses/{sha}").prep(mxHeadOf(mxPubA)).
		body(map[string]any{"state": "pending"}),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "POST", mxBPriv+"/statuses/{sha}").prep(mxHeadOf(mxPrivA)).
		note("A's commit through B").body(map[string]any{"state": "success"}),
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/commits/{sha}/checks").prep(mxHeadOf(mxPrivA)),
	mx("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", "GET", mxAPub+"/commits/{sha}/checks").prep(mxHeadOf(mxPubA)),
	mx("404 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", mxBPriv+"/commits/{sha}/checks").prep(mxHeadOf(mxPrivA)).
		note("B's repo: an unknown commit has no checks"),
	// Deploys: readers see a tag's environments; writers deploy (never a job token).
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/deploy-environments?tag=v1"),
	mx("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", "GET", mxAPub+"/deploy-environments?tag=v1"),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "GET", mxBPriv+"/deploy-environments?tag=v1").note("B has no tag v1"),
	mx("404 | 403 201 201 201 403 | 404 | 403 403 | 403 403", "POST", mxAPriv+"/deployments").
		body(map[string]any{"tag": "v1", "environment": "staging"}),
	mx("401 | 403 201 201 201 403 | 403 | 403 403 | 403 403", "POST", mxAPub+"/deployments").
		body(map[string]any{"tag": "v1", "environment": "staging"}),
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/schedules"),
	mx("404 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", mxBPriv+"/schedules"),
	// "Run now": repo admins, as people.
	mx("404 | 403 403 201 201 403 | 404 | 403 403 | 403 403", "POST", mxAPriv+"/schedules/{id}/run").prep(mxScheduleOf(mxPrivA)),
	mx("401 | 403 403 201 201 403 | 403 | 403 403 | 403 403", "POST", mxAPub+"/schedules/{id}/run").prep(mxScheduleOf(mxPubA)),
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/metrics?branch=main&name=accuracy"),
	mx("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", "GET", mxAPub+"/metrics"),
	mx("404 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", mxBPriv+"/metrics"),
	mx("404 | 403 202 202 202 403 | 404 | 403 403 | 403 403", "POST", mxAPriv+"/builds/{n}/cancel").prep(mxFreshBuild),
	mx("401 | 403 202 202 202 403 | 403 | 403 403 | 403 403", "POST", mxAPub+"/builds/1/cancel"),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 403", "POST", mxBPriv+"/builds/1/cancel").note("B has no build #1"),
	mx("404 | 403 201 201 201 403 | 404 | 403 403 | 403 403", "POST", mxAPriv+"/builds/1/rerun"),
	mx("401 | 403 201 201 201 403 | 403 | 403 403 | 403 403", "POST", mxAPub+"/builds/1/rerun"),
	mx("404 | 403 201 201 201 403 | 404 | 403 403 | 403 403", "POST", mxAPriv+"/builds/1/rerun-exact"),
	mx("401 | 403 201 201 201 403 | 403 | 403 403 | 403 403", "POST", mxAPub+"/builds/1/rerun-exact"),

	// ---- workspaces ({id} is a workspace of A's private or public repo, opened once per world
	// by mxWorkspace; stop gets a fresh one per call, mxFreshWorkspace). Write access to the repo:
	// a caller who cannot read it gets 404 like an unknown id, a reader 403, a job token 403;
	// anonymous callers 401 on the public repo. No agent runs them, so they stay queued: what
	// needs a ready workspace answers 409 after authorization, the WebSockets (sent without
	// the upgrade) 400, and the preview login and token only authorize.
	//  anon | rep dev adm own bil | out | nosc ro | dep job
	mx("401 | 200 200 200 200 200 | 404 | 403 403 | 404 403", "GET", mxA+"/workspaces").
		note("members below developer: an empty list"),
	mx("401 | 200 200 200 200 200 | 404 | 403 403 | 404 403", "GET", mxA+"/workspaces?all=true"),
	mx("401 | 404 404 404 404 404 | 200 | 404 404 | 404 403", "GET", mxB+"/workspaces"),
	mx("401 | 404 404 404 404 404 | 404 | 404 404 | 404 403", "GET", "/api/v1/orgs/"+mxGhostOrg+"/workspaces"),
	mx("404 | 403 200 200 200 403 | 404 | 403 403 | 403 403", "GET", "/api/v1/workspaces/{id}").
		note("A's private repo").prep(mxWorkspace(mxPrivA)),
	mx("401 | 403 200 200 200 403 | 403 | 403 403 | 403 403", "GET", "/api/v1/workspaces/{id}").
		note("A's public repo").prep(mxWorkspace(mxPubA)),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 403", "GET", "/api/v1/workspaces/"+mxGhostWorkspace),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 403", "GET", "/api/v1/workspaces/{id}").
		note("a pipeline that is not a workspace").prep(mxNotAWorkspace),
	mx("404 | 403 202 202 202 403 | 404 | 403 403 | 403 403", "POST", "/api/v1/workspaces/{id}/stop").
		note("A's private repo; queued: its build is cancelled").prep(mxFreshWorkspace(mxPrivA)),
	mx("401 | 403 202 202 202 403 | 403 | 403 403 | 403 403", "POST", "/api/v1/workspaces/{id}/stop").
		note("A's public repo; queued: its build is cancelled").prep(mxFreshWorkspace(mxPubA)),
	mx("404 | 403 409 409 409 403 | 404 | 403 403 | 403 403", "POST", "/api/v1/workspaces/{id}/keepalive").
		note("queued: not ready").prep(mxWorkspace(mxPrivA)),
	mx("404 | 403 409 409 409 403 | 404 | 403 403 | 403 403", "POST", "/api/v1/workspaces/{id}/restore").
		note("queued: not ready").body(map[string]string{"ref": "refs/nimbus/workspaces/main/1"}).prep(mxWorkspace(mxPrivA)),
	mx("404 | 403 303 303 303 403 | 404 | 403 403 | 403 403", "GET", "/api/v1/workspaces/{id}/preview/8080").
		note("the one-time login").prep(mxWorkspace(mxPrivA)),
	mx("401 | 403 303 303 303 403 | 403 | 403 403 | 403 403", "GET", "/api/v1/workspaces/{id}/preview/8080").
		note("A's public repo").prep(mxWorkspace(mxPubA)),
	mx("404 | 403 200 200 200 403 | 404 | 403 403 | 403 403", "POST", "/api/v1/workspaces/{id}/preview/8080/token").
		prep(mxWorkspace(mxPrivA)),
	mx("404 | 403 400 400 400 403 | 404 | 403 403 | 403 403", "GET", "/api/v1/workspaces/{id}/terminal").
		note("a WebSocket: without the upgrade a 400, after authorization").prep(mxWorkspace(mxPrivA)),
	mx("401 | 403 400 400 400 403 | 403 | 403 403 | 403 403", "GET", "/api/v1/workspaces/{id}/terminal").
		note("A's public repo, without the upgrade").prep(mxWorkspace(mxPubA)),
	mx("404 | 403 400 400 400 403 | 404 | 403 403 | 403 403", "GET", "/api/v1/workspaces/{id}/ssh").
		note("a WebSocket: without the upgrade a 400, after authorization").prep(mxWorkspace(mxPrivA)),

	// ---- job logs ({job} is a job of build #1, which the fixture's push made; the private
	// repo's log holds a private marker). Read access to the job's repo, as for its builds; a
	// job of a repo the caller may not see is a 404 like the repo. The stream rows complete the
	// log first, so each stream sends it, then its end event, and returns.
	//  anon | rep dev adm own bil | out | nosc ro | dep job
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", "/api/v1/jobs/{job}/log").
		note("a job of A's private repo").prep(mxJobLog(mxPrivA)),
	mx("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", "GET", "/api/v1/jobs/{job}/log").
		note("a job of A's public repo").prep(mxJobLog(mxPubA)),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "GET", "/api/v1/jobs/"+mxGhostJob+"/log"),
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", "/api/v1/jobs/{job}/log/stream").
		note("a job of A's private repo").prep(mxJobLog(mxPrivA), mxCompleteLog),
	mx("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", "GET", "/api/v1/jobs/{job}/log/stream").
		note("a job of A's public repo").prep(mxJobLog(mxPubA), mxCompleteLog),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "GET", "/api/v1/jobs/"+mxGhostJob+"/log/stream"),
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", "/api/v1/jobs/{job}/log/times").
		note("a job of A's private repo").prep(mxJobLog(mxPrivA)),
	mx("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", "GET", "/api/v1/jobs/{job}/log/times").
		note("a job of A's public repo").prep(mxJobLog(mxPubA)),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "GET", "/api/v1/jobs/"+mxGhostJob+"/log/times"),

	// ---- the model files a pipeline moved ({pipeline} is build #1's of the repo): read access
	// to the repo, as for its builds; a pipeline of another repo is a 404 under this one.
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/pipelines/{pipeline}/artifacts").prep(mxPipelineOf(mxPrivA)),
	mx("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", "GET", mxAPub+"/pipelines/{pipeline}/artifacts").prep(mxPipelineOf(mxPubA)),
	mx("404 | 404 404 404 404 404 | 404 | 403 404 | 404 404", "GET", mxAPub+"/pipelines/{pipeline}/artifacts").
		note("a pipeline of A's private repo, asked under the public one").prep(mxPipelineOf(mxPrivA)),

	// ---- a pipeline's reproducibility record and the comparison of two: read access, as above.
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/pipelines/{pipeline}/record").prep(mxPipelineOf(mxPrivA)),
	mx("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", "GET", mxAPub+"/pipelines/{pipeline}/record").prep(mxPipelineOf(mxPubA)),
	mx("404 | 404 404 404 404 404 | 404 | 403 404 | 404 404", "GET", mxAPub+"/pipelines/{pipeline}/record").
		note("a pipeline of A's private repo, asked under the public one").prep(mxPipelineOf(mxPrivA)),
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/records/compare?a={pipeline}&b={pipeline}").prep(mxPipelineOf(mxPrivA)),
	mx("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", "GET", mxAPub+"/records/compare?a={pipeline}&b={pipeline}").prep(mxPipelineOf(mxPubA)),
	mx("404 | 404 404 404 404 404 | 404 | 403 404 | 404 404", "GET", mxAPub+"/records/compare?a={pipeline}&b={pipeline}").
		note("pipelines of A's private repo, asked under the public one").prep(mxPipelineOf(mxPrivA)),

	// ---- model files (generic artifacts): the registry's rules (package repo's
	// ResolveRegistry), so registry:read reads and registry:write writes; pushes need developer
	// (or the repo's own job token), deletes admin; deploy tokens only read. {v} is a fresh
	// version; the read and delete rows publish it first (mxPublished).
	//  anon | rep dev adm own bil | out | nosc ro | dep job
	mx("404 | 200 200 200 200 200 | 404 | 200 403 | 200 200", "GET", mxAPriv+"/artifacts").prep(mxPublished(mxPrivA)),
	mx("200 | 200 200 200 200 200 | 200 | 200 403 | 200 200", "GET", mxAPub+"/artifacts").prep(mxPublished(mxPubA)),
	mx("404 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", mxBPriv+"/artifacts"),
	mx("404 | 200 200 200 200 200 | 404 | 200 403 | 200 200", "GET", mxAPriv+"/artifacts/model").prep(mxPublished(mxPrivA)),
	mx("404 | 200 200 200 200 200 | 404 | 200 403 | 200 200", "GET", mxAPriv+"/artifacts/model/{v}").prep(mxPublished(mxPrivA)),
	mx("404 | 200 200 200 200 200 | 404 | 200 403 | 200 200", "GET", mxAPriv+"/artifacts/model/latest").note("the newest version").
		prep(mxPublished(mxPrivA)),
	mx("404 | 200 200 200 200 200 | 404 | 200 403 | 200 200", "GET", mxAPriv+"/artifacts/model/{v}/weights.bin").prep(mxPublished(mxPrivA)),
	mx("200 | 200 200 200 200 200 | 200 | 200 403 | 200 200", "GET", mxAPub+"/artifacts/model/{v}/weights.bin").prep(mxPublished(mxPubA)),
	mx("404 | 200 200 200 200 200 | 404 | 200 403 | 200 200", "HEAD", mxAPriv+"/artifacts/model/{v}/weights.bin").prep(mxPublished(mxPrivA)),
	mx("404 | 403 201 201 201 403 | 404 | 403 403 | 403 201", "PUT", mxAPriv+"/artifacts/model/{v}/weights.bin").
		body(mxWeights).prep(mxFreshVersion),
	mx("401 | 403 201 201 201 403 | 403 | 403 403 | 403 403", "PUT", mxAPub+"/artifacts/model/{v}/weights.bin").
		body(mxWeights).prep(mxFreshVersion),
	mx("404 | 404 404 404 404 404 | 201 | 404 404 | 404 404", "PUT", mxBPriv+"/artifacts/model/{v}/weights.bin").
		body(mxWeights).prep(mxFreshVersion),
	mx("404 | 403 403 204 204 403 | 404 | 403 403 | 403 403", "DELETE", mxAPriv+"/artifacts/model/{v}/weights.bin").prep(mxPublished(mxPrivA)),
	mx("404 | 403 403 204 204 403 | 404 | 403 403 | 403 403", "DELETE", mxAPriv+"/artifacts/model/{v}").prep(mxPublished(mxPrivA)),
	// ---- the Hugging Face endpoint (artifacts/hf.go): model files read-only under the hub's
	// paths, with the same rules as their downloads. <org>.<repo>/<package> names any package;
	// <org>/<repo> the package named like the repo (none here: a 404 for everyone).
	//  anon | rep dev adm own bil | out | nosc ro | dep job
	mx("404 | 200 200 200 200 200 | 404 | 200 403 | 200 200", "GET", "/api/v1/hf/api/models/"+mxOrgA+"."+mxPrivA+"/model").prep(mxPublished(mxPrivA)),
	mx("200 | 200 200 200 200 200 | 200 | 200 403 | 200 200", "GET", "/api/v1/hf/api/models/"+mxOrgA+"."+mxPubA+"/model").prep(mxPublished(mxPubA)),
	mx("404 | 404 404 404 404 404 | 404 | 404 403 | 404 404", "GET", "/api/v1/hf/api/models/"+mxOrgA+"/"+mxPrivA).prep(mxPublished(mxPrivA)),
	mx("404 | 200 200 200 200 200 | 404 | 200 403 | 200 200", "GET", "/api/v1/hf/api/models/"+mxOrgA+"."+mxPrivA+"/model/revision/{v}").prep(mxPublished(mxPrivA)),
	mx("404 | 200 200 200 200 200 | 404 | 200 403 | 200 200", "GET", "/api/v1/hf/api/models/"+mxOrgA+"."+mxPrivA+"/model/tree/main").prep(mxPublished(mxPrivA)),
	mx("404 | 200 200 200 200 200 | 404 | 200 403 | 200 200", "GET", "/api/v1/hf/"+mxOrgA+"."+mxPrivA+"/model/resolve/{v}/weights.bin").prep(mxPublished(mxPrivA)),
	mx("200 | 200 200 200 200 200 | 200 | 200 403 | 200 200", "GET", "/api/v1/hf/"+mxOrgA+"."+mxPubA+"/model/resolve/main/weights.bin").prep(mxPublished(mxPubA)),
	mx("404 | 200 200 200 200 200 | 404 | 200 403 | 200 200", "HEAD", "/api/v1/hf/"+mxOrgA+"."+mxPrivA+"/model/resolve/{v}/weights.bin").prep(mxPublished(mxPrivA)),
	mx("404 | 200 200 200 200 200 | 404 | 200 403 | 200 200", "GET", "/api/v1/hf/"+mxOrgA+"."+mxPrivA+"/model/raw/{v}/weights.bin").prep(mxPublished(mxPrivA)),
	mx("404 | 200 200 200 200 200 | 404 | 200 403 | 200 200", "HEAD", "/api/v1/hf/"+mxOrgA+"."+mxPrivA+"/model/raw/main/weights.bin").prep(mxPublished(mxPrivA)),
	mx("404 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", "/api/v1/hf/"+mxOrgB+"."+mxPrivB+"/model/resolve/main/weights.bin").
		note("another team's private repo").prep(mxPublishedB),
	// ---- releases: the same rules (their files are model files). {tag} is a fresh tag of the
	// repo; the file rows first make its release as the caller where the caller may (a release
	// takes files from its producer only).
	//  anon | rep dev adm own bil | out | nosc ro | dep job
	mx("404 | 200 200 200 200 200 | 404 | 200 403 | 200 200", "GET", mxAPriv+"/releases").prep(mxReleased(mxPrivA)),
	mx("200 | 200 200 200 200 200 | 200 | 200 403 | 200 200", "GET", mxAPub+"/releases").prep(mxReleased(mxPubA)),
	mx("404 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", mxBPriv+"/releases"),
	mx("404 | 200 200 200 200 200 | 404 | 200 403 | 200 200", "GET", mxAPriv+"/releases/{tag}").prep(mxReleased(mxPrivA)),
	mx("404 | 403 201 201 201 403 | 404 | 403 403 | 403 201", "PUT", mxAPriv+"/releases/{tag}").
		body(map[string]string{"title": "matrix"}).prep(mxFreshTag(mxPrivA)),
	mx("401 | 403 201 201 201 403 | 403 | 403 403 | 403 403", "PUT", mxAPub+"/releases/{tag}").
		body(map[string]string{"title": "matrix"}).prep(mxFreshTag(mxPubA)),
	mx("404 | 403 403 204 204 403 | 404 | 403 403 | 403 403", "DELETE", mxAPriv+"/releases/{tag}").prep(mxReleased(mxPrivA)),
	mx("404 | 403 201 201 201 403 | 404 | 403 403 | 403 201", "PUT", mxAPriv+"/releases/{tag}/files/weights.bin").
		body(mxWeights).prep(mxCallersRelease(mxPrivA)),
	mx("404 | 200 200 200 200 200 | 404 | 200 403 | 200 200", "GET", mxAPriv+"/releases/{tag}/files/weights.bin").prep(mxReleasedFile(mxPrivA)),
	mx("404 | 200 200 200 200 200 | 404 | 200 403 | 200 200", "HEAD", mxAPriv+"/releases/{tag}/files/weights.bin").prep(mxReleasedFile(mxPrivA)),
	mx("401 | 200 200 200 200 200 | 404 | 200 200 | 404 404", "GET", mxA+"/storage"),
	mx("401 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", mxB+"/storage"),

	// ---- billing: members with the billing, admin or owner role, through billing:read (or
	// billing:write for changes); other members 403, non-members 404 like every org route. The
	// world has no Stripe key, so top-ups are 409 (disabled) for whoever may make them; credit
	// grants are for platform admins only (none of these callers is one); the Stripe webhook
	// takes no Nimbus credentials and refuses what Stripe did not sign.
	//  anon | rep dev adm own bil | out | nosc ro | dep job
	mx("401 | 403 403 200 200 200 | 404 | 403 403 | 404 404", "GET", mxA+"/billing"),
	mx("401 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", mxB+"/billing"),
	mx("401 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "GET", "/api/v1/orgs/"+mxGhostOrg+"/billing"),
	mx("401 | 403 403 200 200 200 | 404 | 403 403 | 404 404", "PUT", mxA+"/billing/settings").
		body(map[string]any{"low_balance_threshold": "1.00", "spending_cap": nil}),
	mx("401 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "PUT", mxB+"/billing/settings").body(map[string]any{}),
	mx("401 | 403 403 200 200 200 | 404 | 403 403 | 404 404", "GET", mxA+"/billing/usage"),
	mx("401 | 403 403 200 200 200 | 404 | 403 403 | 404 404", "GET", mxA+"/billing/ledger"),
	mx("401 | 403 403 200 200 200 | 404 | 403 403 | 404 404", "GET", mxA+"/billing/notifications"),
	mx("401 | 403 403 200 200 200 | 404 | 403 403 | 404 404", "GET", mxA+"/billing/statements/2026-06"),
	mx("401 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", mxB+"/billing/statements/2026-06"),
	mx("401 | 403 403 409 409 409 | 404 | 403 403 | 404 404", "POST", mxA+"/billing/topups").note("no Stripe key").
		body(map[string]string{"amount": "100.00"}),
	mx("401 | 403 403 403 403 403 | 403 | 403 403 | 403 403", "POST", "/api/v1/admin/orgs/"+mxOrgA+"/credits").
		note("platform admins only").body(map[string]string{"amount": "10.00", "note": "matrix"}),
	mx("401 | 403 403 403 403 403 | 403 | 403 403 | 403 403", "GET", "/api/v1/admin/agents").note("platform admins only"),
	mx("401 | 403 403 403 403 403 | 403 | 403 403 | 403 403", "GET", "/api/v1/admin/orgs").note("platform admins only"),
	mx("401 | 403 403 403 403 403 | 403 | 403 403 | 403 403", "GET", "/api/v1/admin/registration-tokens").note("platform admins only"),
	mx("401 | 403 403 403 403 403 | 403 | 403 403 | 403 403", "POST", "/api/v1/admin/registration-tokens").
		note("platform admins only").body(map[string]string{"name": "matrix"}),
	mx("401 | 403 403 403 403 403 | 403 | 403 403 | 403 403", "DELETE", "/api/v1/admin/registration-tokens/{id}").
		note("platform admins only").prep(mxRegistrationToken),
	mx("401 | 403 403 403 403 403 | 403 | 403 403 | 403 403", "GET", "/api/v1/admin/settings").note("platform admins only"),
	// The installation's prices: no secret, for anyone signed in or holding a token.
	mx("401 | 200 200 200 200 200 | 200 | 200 200 | 200 200", "GET", "/api/v1/pricing"),

	// ---- team runners: members list the team's runners; admins and owners (org:write) pause,
	// resume and revoke them and manage the runner tokens (listed with repo:read, as
	// invitations). Another team's runner or token under B is a 404 even to B's owner.
	//  anon | rep dev adm own bil | out | nosc ro | dep job
	mx("401 | 200 200 200 200 200 | 404 | 403 200 | 404 404", "GET", mxA+"/agents"),
	mx("401 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", mxB+"/agents"),
	mx("401 | 403 403 200 200 403 | 404 | 403 403 | 404 404", "POST", mxA+"/agents/{id}/pause").prep(mxTeamAgent),
	mx("401 | 403 403 200 200 403 | 404 | 403 403 | 404 404", "POST", mxA+"/agents/{id}/resume").prep(mxTeamAgent),
	mx("401 | 403 403 204 204 403 | 404 | 403 403 | 404 404", "DELETE", mxA+"/agents/{id}").prep(mxTeamAgent),
	mx("401 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "POST", mxB+"/agents/{id}/pause").note("A's runner").prep(mxTeamAgent),
	mx("401 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "DELETE", mxB+"/agents/{id}").note("A's runner").prep(mxTeamAgent),
	mx("401 | 403 403 200 200 403 | 404 | 403 200 | 404 404", "GET", mxA+"/runner-tokens"),
	mx("401 | 403 403 201 201 403 | 404 | 403 403 | 404 404", "POST", mxA+"/runner-tokens").body(map[string]string{"name": "matrix"}),
	mx("401 | 403 403 204 204 403 | 404 | 403 403 | 404 404", "DELETE", mxA+"/runner-tokens/{id}").prep(mxRunnerToken),
	mx("401 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "DELETE", mxB+"/runner-tokens/{id}").note("A's token").prep(mxRunnerToken),
	mx("400 | 400 400 400 400 400 | 400 | 400 400 | 400 400", "POST", "/api/v1/billing/stripe/webhook").
		note("not signed by Stripe").body(map[string]any{"id": "evt_matrix", "type": "checkout.session.completed",
		"data": map[string]any{"object": map[string]any{"id": "cs_matrix", "payment_status": "paid", "amount_total": 100000}}}),

	// ---- the agent API (outside the user middleware): only agent credentials work there, so
	// every user credential, and the job token, is 401. The agent token's own answer is .agent().
	//  anon | rep dev adm own bil | out | nosc ro | dep job
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "POST", "/api/v1/agent/register").
		note("needs the registration token").body(mxAgentRegistration("intruder")).agent(401),
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "POST", "/api/v1/agent/facts").
		body(mxAgentRegistration("matrix-agent")).agent(200),
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "POST", "/api/v1/agent/poll").
		body(protocol.PollRequest{FreeCPUs: 64}).agent(200).prep(mxQueueWork),
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "POST", "/api/v1/agent/control").
		agent(200).prep(mxStoppingLease),
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "POST", "/api/v1/agent/deregister").
		agent(204),
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "GET", "/api/v1/agent/tunnel").
		note("a WebSocket: the agent token without the upgrade is a 400").agent(400),
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "GET", "/api/v1/agent/tunnel/data").
		note("an upgrade: the agent token without it is a 400").agent(400),
	// The replicas' forwarding of tunnel streams: only a replica's signature opens it.
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "GET", "/internal/v1/tunnel/forward?agent=agt_matrix").
		note("replicas only").agent(401),
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "POST", "/api/v1/agent/leases/{lease}/renew").
		agent(200).prep(mxOwnLease),
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "POST", "/api/v1/agent/leases/{lease}/imports").
		note("another agent's lease").body(map[string]string{"url": "https://x/a/b/-/blob/main/env.yml", "kind": "imports"}).
		agent(409).prep(mxOtherAgentsLease),
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "POST", "/api/v1/agent/leases/{lease}/locks").
		body(map[string]string{"key": "matrix", "scope": `stage "s"`}).agent(200).prep(mxOwnLease),
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "POST", "/api/v1/agent/leases/{lease}/locks").
		note("another agent's lease").body(map[string]string{"key": "matrix", "scope": `stage "s"`}).
		agent(409).prep(mxOtherAgentsLease),
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "POST", "/api/v1/agent/leases/{lease}/builds").
		note("another agent's lease").body(map[string]string{"kind": "apply", "event": "api_trigger"}).
		agent(409).prep(mxOtherAgentsLease),
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "POST", "/api/v1/agent/leases/{lease}/builds/status").
		note("a build the pipeline did not start").body(map[string]any{"slug": mxOrgA + "/" + mxPrivA, "number": 1}).
		agent(404).prep(mxOwnLease),
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "POST", "/api/v1/agent/leases/{lease}/keys/resolve").
		note("another agent's lease").body(map[string]string{"key": "k"}).agent(409).prep(mxOtherAgentsLease),
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "POST", "/api/v1/agent/leases/{lease}/keys/await").
		note("a key no pipeline resolves: dead lock").body(map[string]string{"key": "matrix"}).agent(409).prep(mxOwnLease),
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "POST", "/api/v1/agent/leases/{lease}/locks/release").
		body(map[string]string{"key": "matrix", "scope": `stage "s"`}).agent(204).prep(mxOwnLease),
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "POST", "/api/v1/agent/leases/{lease}/renew").
		note("another agent's lease").agent(409).prep(mxOtherAgentsLease),
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "POST", "/api/v1/agent/leases/{lease}/events").
		body(mxStarted).agent(204).prep(mxOwnLease),
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "POST", "/api/v1/agent/leases/{lease}/events").
		note("another agent's lease").body(mxStarted).agent(409).prep(mxOtherAgentsLease),
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "POST", "/api/v1/agent/leases/{lease}/jobs/{job}/log?offset=0").
		note("a job of another pipeline").body("log line\n").agent(404).prep(mxOwnLease, mxOtherAgentsJob),
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "POST", "/api/v1/agent/leases/{lease}/finish").
		body(protocol.FinishRequest{Status: "failed", Reason: "matrix"}).agent(204).prep(mxFreshLease),
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "POST", "/api/v1/agent/leases/{lease}/finish").
		note("another agent's lease").body(protocol.FinishRequest{Status: "failed"}).agent(409).prep(mxOtherAgentsLease),
}

// Preps of the model-file routes.

// mxWeights is the body of every file the rows publish.
const mxWeights = "model weights"

func mxFreshVersion(w *mxWorld, c *mxCall) { c.Vars["v"] = w.unique("v") }

// mxPublished publishes model/{v}/weights.bin in repoName (a repo of A) as A's owner, with a
// fresh {v}.
func mxPublished(repoName string) func(w *mxWorld, c *mxCall) {
	return func(w *mxWorld, c *mxCall) {
		c.Vars["v"] = w.unique("v")
		w.publish(repoName, c.Vars["v"])
	}
}

// mxPublishedB puts model/{v}/weights.bin into B's private repo as B's owner.
func mxPublishedB(w *mxWorld, c *mxCall) {
	c.Vars["v"] = w.unique("v")
	path := "/api/v1/repos/" + mxOrgB + "/" + mxPrivB + "/artifacts/model/" + c.Vars["v"] + "/weights.bin"
	if r := w.do(w.byName["outsider-token"], "PUT", path, mxWeights); r.Status != 201 {
		w.t.Fatalf("publish %s: %d %s", path, r.Status, r.Body)
	}
}

// mxFreshTag names a fresh tag {tag} of repoName (a repo of A), at its main.
func mxFreshTag(repoName string) func(w *mxWorld, c *mxCall) {
	return func(w *mxWorld, c *mxCall) {
		c.Vars["tag"] = w.unique("t")
		w.tag(repoName, c.Vars["tag"])
	}
}

// mxReleased makes release {tag} of repoName, a fresh tag, as A's owner.
func mxReleased(repoName string) func(w *mxWorld, c *mxCall) {
	return func(w *mxWorld, c *mxCall) {
		mxFreshTag(repoName)(w, c)
		w.release(w.byName["owner-token"], repoName, c.Vars["tag"])
	}
}

// mxCallersRelease makes release {tag} of repoName, a fresh tag, as the caller where it may (as
// A's owner otherwise).
func mxCallersRelease(repoName string) func(w *mxWorld, c *mxCall) {
	return func(w *mxWorld, c *mxCall) {
		mxFreshTag(repoName)(w, c)
		path := "/api/v1/repos/" + mxOrgA + "/" + repoName + "/releases/" + c.Vars["tag"]
		if r := w.do(c.P, "PUT", path, map[string]any{}); r.Status != 201 {
			w.release(w.byName["owner-token"], repoName, c.Vars["tag"])
		}
	}
}

// mxReleasedFile makes release {tag} of repoName hold weights.bin, both made by A's owner.
func mxReleasedFile(repoName string) func(w *mxWorld, c *mxCall) {
	return func(w *mxWorld, c *mxCall) {
		mxReleased(repoName)(w, c)
		path := "/api/v1/repos/" + mxOrgA + "/" + repoName + "/releases/" + c.Vars["tag"] + "/files/weights.bin"
		if r := w.do(w.byName["owner-token"], "PUT", path, mxWeights); r.Status != 201 {
			w.t.Fatalf("publish %s: %d %s", path, r.Status, r.Body)
		}
	}
}

// tag makes tag (lightweight) at main of repoName, a repo of A, in its bare repository.
func (w *mxWorld) tag(repoName, tag string) {
	w.t.Helper()
	var r repo.Repo
	if err := w.app.DB.Where("org_id = ? AND name = ?", w.orgA.ID, repoName).Take(&r).Error; err != nil {
		w.t.Fatal(err)
	}
	cmd := exec.Command("git", "--git-dir", w.app.Repos.Path(&r), "update-ref", "refs/tags/"+tag, "refs/heads/main")
	if out, err := cmd.CombinedOutput(); err != nil {
		w.t.Fatalf("tag %s: %v\n%s", tag, err, out)
	}
}

// release makes release tag of repoName as p.
func (w *mxWorld) release(p *mxPrincipal, repoName, tag string) {
	w.t.Helper()
	path := "/api/v1/repos/" + mxOrgA + "/" + repoName + "/releases/" + tag
	if r := w.do(p, "PUT", path, map[string]any{}); r.Status != 201 {
		w.t.Fatalf("release %s: %d %s", path, r.Status, r.Body)
	}
}

// publish puts model/{version}/weights.bin into repoName of A as A's owner.
func (w *mxWorld) publish(repoName, version string) {
	w.t.Helper()
	path := "/api/v1/repos/" + mxOrgA + "/" + repoName + "/artifacts/model/" + version + "/weights.bin"
	if r := w.do(w.byName["owner-token"], "PUT", path, mxWeights); r.Status != 201 && r.Status != 200 {
		w.t.Fatalf("publish %s: %d %s", path, r.Status, r.Body)
	}
}

var mxStarted = protocol.Event{Kind: protocol.EventPipelineStarted, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}

// mxTeamAgent registers a fresh team runner of A in {id}.
func mxTeamAgent(w *mxWorld, c *mxCall) {
	tok, err := w.app.Scheduler.CreateRunnerToken(w.ctx, w.orgA.ID, w.users["owner"].User.ID, "matrix")
	if err != nil {
		w.t.Fatal(err)
	}
	resp, err := w.app.Scheduler.Register(w.ctx, tok.Token, protocol.RegisterRequest{Name: "team-box", Tags: []string{"matrix-box"}, CPUs: 2, Concurrency: 1})
	if err != nil {
		w.t.Fatal(err)
	}
	c.Vars["id"] = resp.AgentID
}

// mxRunnerToken makes a fresh runner token of A in {id}.
func mxRegistrationToken(w *mxWorld, c *mxCall) {
	tok, err := w.app.Scheduler.CreateRegistrationToken(w.ctx, w.users["owner"].User.ID, "matrix")
	if err != nil {
		w.t.Fatal(err)
	}
	c.Vars["id"] = fmt.Sprint(tok.ID)
}

func mxRunnerToken(w *mxWorld, c *mxCall) {
	tok, err := w.app.Scheduler.CreateRunnerToken(w.ctx, w.orgA.ID, w.users["owner"].User.ID, "matrix")
	if err != nil {
		w.t.Fatal(err)
	}
	c.Vars["id"] = fmt.Sprint(tok.ID)
}

// Preps of the build controls and the agent API.

func mxFreshBuild(w *mxWorld, c *mxCall) { c.Vars["n"] = fmt.Sprint(w.manualBuild()) }

// mxFreshBranch opens from a new branch of repo name of A.
func mxFreshBranch(name string) func(w *mxWorld, c *mxCall) {
	return func(w *mxWorld, c *mxCall) {
		c.Body = map[string]any{"source_branch": w.freshBranch(name), "title": "Matrix pull"}
	}
}

// mxDoomedRule is a rule of A's private repo to delete.
func mxDoomedRule(w *mxWorld, c *mxCall) {
	r, err := w.app.Pulls.SetRule(w.ctx, w.privA, pull.RuleInput{Pattern: w.unique("doomed-")})
	if err != nil {
		w.t.Fatal(err)
	}
	c.Vars["id"] = fmt.Sprint(r.ID)
}

// mxFreshPull merges a new pull request of A's private repo.
func mxFreshPull(w *mxWorld, c *mxCall) { c.Vars["n"] = fmt.Sprint(w.openPull(mxPrivA)) }

// mxHeadOf names the head commit of main of A's repo name, as {sha}.
func mxHeadOf(name string) func(w *mxWorld, c *mxCall) {
	return func(w *mxWorld, c *mxCall) {
		sha, err := git.ResolveRef(w.ctx, w.app.Repos.Path(w.repoOfA(name)), "refs/heads/main")
		if err != nil {
			w.t.Fatal(err)
		}
		c.Vars["sha"] = sha
	}
}

// mxQueueWork queues a pipeline before the agent polls (a poll without work waits 30 s).
func mxQueueWork(w *mxWorld, c *mxCall) {
	if c.P.Agent {
		w.manualBuild()
	}
}

func mxOwnLease(w *mxWorld, c *mxCall) { c.Vars["lease"] = w.lease.ID }

func mxOtherAgentsLease(w *mxWorld, c *mxCall) { c.Vars["lease"] = w.otherLease.ID }

func mxOtherAgentsJob(w *mxWorld, c *mxCall) { c.Vars["job"] = fmt.Sprint(w.otherLease.Jobs[0].ID) }

// mxStoppingLease gives the agent a lease of its own that the server asked to stop, so its
// control long-poll answers at once instead of after a heartbeat (everyone else sends the shared
// lease).
func mxStoppingLease(w *mxWorld, c *mxCall) {
	c.Body = protocol.ControlRequest{Running: []string{w.lease.ID}}
	if c.P.Agent {
		w.manualBuild()
		l := w.pollLease(w.agentToken)
		if err := w.app.Builds.RequestStop(w.ctx, l.PipelineID, "cancelled"); err != nil {
			w.t.Fatal(err)
		}
		c.Body = protocol.ControlRequest{Running: []string{l.ID}}
	}
}

// mxFreshLease gives the agent a lease of its own to finish (everyone else gets the shared one).
func mxFreshLease(w *mxWorld, c *mxCall) {
	c.Vars["lease"] = w.lease.ID
	if c.P.Agent {
		w.manualBuild()
		c.Vars["lease"] = w.pollLease(w.agentToken).ID
	}
}

// Preps of the workspace routes.

// mxGhostWorkspace is a workspace id that no pipeline has.
const mxGhostWorkspace = "987654320"

// mxWorkspace sets {id} to the shared workspace of repoName (a repo of A).
func mxWorkspace(repoName string) func(w *mxWorld, c *mxCall) {
	return func(w *mxWorld, c *mxCall) { c.Vars["id"] = fmt.Sprint(w.workspace(repoName)) }
}

// mxFreshWorkspace sets {id} to a workspace of repoName (a repo of A) opened for this call.
func mxFreshWorkspace(repoName string) func(w *mxWorld, c *mxCall) {
	return func(w *mxWorld, c *mxCall) { c.Vars["id"] = fmt.Sprint(w.openWorkspace(repoName)) }
}

// mxNotAWorkspace sets {id} to the pipeline of build #1 of A's private repo, a build's.
func mxNotAWorkspace(w *mxWorld, c *mxCall) { c.Vars["id"] = fmt.Sprint(w.lease.PipelineID) }

// workspace returns the workspace of repoName (a repo of A) that the rows share, opening it the
// first time. No agent polls while the workspace rows run, so it stays queued.
func (w *mxWorld) workspace(repoName string) int64 {
	w.t.Helper()
	if id, ok := w.workspaces[repoName]; ok {
		return id
	}
	if w.workspaces == nil {
		w.workspaces = map[string]int64{}
	}
	w.workspaces[repoName] = w.openWorkspace(repoName)
	return w.workspaces[repoName]
}

// openWorkspace opens a workspace on main of repoName (a repo of A; the fixture's .cnb.yml
// declares the vscode pipeline "dev") as A's developer and returns its id, its pipeline's.
func (w *mxWorld) openWorkspace(repoName string) int64 {
	w.t.Helper()
	path := "/api/v1/repos/" + mxOrgA + "/" + repoName + "/workspaces"
	r := w.do(w.byName["developer-token"], "POST", path, map[string]string{"branch": "main"})
	if r.Status != http.StatusCreated {
		w.t.Fatalf("open a workspace of %s: %d %s", repoName, r.Status, r.Body)
	}
	var b struct {
		Pipelines []struct {
			ID        int64 `json:"id"`
			Workspace bool  `json:"workspace"`
		} `json:"pipelines"`
	}
	r.decode(w.t, &b)
	for _, p := range b.Pipelines {
		if p.Workspace {
			return p.ID
		}
	}
	w.t.Fatalf("the workspace build of %s has no workspace pipeline: %s", repoName, r.Body)
	return 0
}

// mxGhostJob is a job id that no job has.
const mxGhostJob = "987654321"

// mxPipelineOf sets {pipeline} to the pipeline of build #1's first job of repoName (a repo of A).
func mxPipelineOf(repoName string) func(w *mxWorld, c *mxCall) {
	return func(w *mxWorld, c *mxCall) {
		var ids []int64
		if err := w.app.DB.Table("jobs").Where("id = ?", w.jobOfBuild1(repoName)).Pluck("pipeline_id", &ids).Error; err != nil || len(ids) != 1 {
			w.t.Fatalf("pipeline of build #1 of %s: %v", repoName, err)
		}
		c.Vars["pipeline"] = fmt.Sprint(ids[0])
	}
}

// mxJobLog sets {job} to a job of build #1 of repoName (a repo of A), whose log it fills with a
// line (idempotent: appends are by offset). The private repo's line carries a private marker,
// so a log served to someone who may not read it fails the marker check.
func mxJobLog(repoName string) func(w *mxWorld, c *mxCall) {
	return func(w *mxWorld, c *mxCall) {
		id := w.jobOfBuild1(repoName)
		line := "building " + repoName + "\r\n"
		if repoName == mxPrivA {
			line = "building " + mxCommitA + "\r\n"
		}
		if _, err := w.app.Logs.Append(w.ctx, id, 0, []byte(line)); err != nil {
			w.t.Fatal(err)
		}
		c.Vars["job"] = fmt.Sprint(id)
	}
}

// mxCompleteLog marks {job}'s log complete, so a stream of it ends (with its end event)
// instead of following the log until the client leaves.
func mxCompleteLog(w *mxWorld, c *mxCall) {
	id, err := strconv.ParseInt(c.Vars["job"], 10, 64)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := w.app.Logs.Complete(w.ctx, id); err != nil {
		w.t.Fatal(err)
	}
}

// jobOfBuild1 returns the id of the first job of build #1 of repoName, a repo of A.
func (w *mxWorld) jobOfBuild1(repoName string) int64 {
	w.t.Helper()
	var ids []int64
	err := w.app.DB.Table("jobs").
		Joins("JOIN pipelines ON pipelines.id = jobs.pipeline_id").
		Joins("JOIN builds ON builds.id = pipelines.build_id").
		Joins("JOIN repos ON repos.id = builds.repo_id").
		Where("repos.org_id = ? AND repos.name = ? AND builds.number = 1", w.orgA.ID, repoName).
		Order("jobs.id").Limit(1).Pluck("jobs.id", &ids).Error
	if err != nil || len(ids) == 0 {
		w.t.Fatalf("no job of build #1 of %s/%s: %v", mxOrgA, repoName, err)
	}
	return ids[0]
}

// mxGitMatrix is the git endpoint (smart HTTP, served by the same handler outside /api): the
// ref advertisement that starts every clone (upload-pack) and push (receive-pack). Tokens go as
// the HTTP Basic password, as git sends them; session principals send only their cookie, which
// must count for nothing, so they expect the anon column.
var mxGitMatrix = []mxRow{
	//  anon | rep dev adm own bil | out | nosc ro | dep job
	mxGit("401 | 200 200 200 200 200 | 404 | 403 200 | 200 200", mxOrgA, mxPrivA, "upload"),
	mxGit("401 | 403 200 200 200 403 | 404 | 403 403 | 403 200", mxOrgA, mxPrivA, "receive"),
	mxGit("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", mxOrgA, mxPubA, "upload"),
	mxGit("401 | 403 200 200 200 403 | 403 | 403 403 | 403 403", mxOrgA, mxPubA, "receive"),
	mxGit("401 | 404 404 404 404 404 | 200 | 404 404 | 404 404", mxOrgB, mxPrivB, "upload"),
	mxGit("401 | 404 404 404 404 404 | 200 | 404 404 | 404 404", mxOrgB, mxPrivB, "receive"),
	mxGit("401 | 404 404 404 404 404 | 404 | 404 404 | 404 404", mxOrgA, mxGhostRepo, "upload"),
}

func mxGit(want, org, repo, service string) mxRow {
	return mxRow{Want: want, Method: "GET", Path: "/" + org + "/" + repo + ".git/info/refs?service=git-" + service + "-pack", Git: true}
}
