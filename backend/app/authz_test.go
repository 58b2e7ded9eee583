package app

import (
	"bytes"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/agent/protocol"
)

// The authorization matrix: every route of the server × every kind of caller.
//
// A row is a request and the status each principal must get, as one string with one status per
// column (the "|" are decoration):
//
//	anon | reporter developer admin owner billing | outsider | noscope readonly | deploy
//
//	anon      no credentials
//	reporter… a member of org A with that role, through a session cookie + X-CSRF-Token, and
//	          again through a full-scope token of theirs (same expectation, except on
//	          session-only routes, where every token gets 403)
//	outsider  the owner of org B (session and token), a member of nothing in A
//	noscope   A's owner through a token with only registry:read
//	readonly  A's owner through a token with only repo:read
//	deploy    the read-only deploy token of A's private repo
//
// Revoked, expired and unknown personal tokens get 401 on every /api route and on git (and what
// anonymous gets on the ops endpoints). Besides the status, every call checks: the error
// envelope and its code; no 5xx; no secret value and no private marker of an org the caller is
// not in; no 403 that tells a non-member a private thing exists; every 404 a non-member gets for
// another team's private thing is byte-for-byte the answer for a name that does not exist; and
// the refused writes of a row, together, change no row of the database. The routes come from
// the server itself (Server.Routes): a route without a row fails the test.
//
// After the rows: the same matrix for git smart HTTP (mxGitMatrix), and CSRF: every write as a
// session without, or with another session's, X-CSRF-Token is 403 and changes nothing.
//
// Placeholders ({org}, {repo}, {id}, {self}, {name}, {job}…) are filled per call by the row's
// prep, which also makes fresh targets for routes that destroy theirs, so every principal meets
// the same situation whatever the other calls did.
type mxRow struct {
	Want, Method, Path string
	Note               string
	Body               any
	Prep               func(w *mxWorld, c *mxCall)
	SessionOnly        bool
	Git                bool // a git smart-HTTP request: tokens go as HTTP Basic, cookies count for nothing
	Agent              int  // the agent token's status on an agent API route (0: like an invalid token)
}

func mx(want, method, path string) mxRow { return mxRow{Want: want, Method: method, Path: path} }

func (r mxRow) body(b any) mxRow { r.Body = b; return r }

func (r mxRow) note(s string) mxRow { r.Note = s; return r }

func (r mxRow) sessionOnly() mxRow { r.SessionOnly = true; return r }

func (r mxRow) agent(status int) mxRow { r.Agent = status; return r }

func (r mxRow) prep(fs ...func(w *mxWorld, c *mxCall)) mxRow {
	r.Prep = func(w *mxWorld, c *mxCall) {
		for _, f := range fs {
			f(w, c)
		}
	}
	return r
}

func (r mxRow) name() string {
	if r.Note != "" {
		return r.Method + " " + r.Path + " (" + r.Note + ")"
	}
	return r.Method + " " + r.Path
}

// mxCall is one principal's call of a row.
type mxCall struct {
	P            *mxPrincipal
	Vars         map[string]string
	Body         any
	Cookie, CSRF string // a fresh session replacing the principal's (routes that end sessions)
}

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

func mxOwnInvitation(w *mxWorld, c *mxCall) {
	c.Vars["id"] = fmt.Sprint(w.invitationFor(mxUserOf(w, c)))
}

func mxVictimsInvitation(w *mxWorld, c *mxCall) {
	c.Vars["id"] = fmt.Sprint(w.invitationFor(w.users["victim"]))
}

func mxInvitationOfA(w *mxWorld, c *mxCall) {
	c.Vars["id"] = fmt.Sprint(w.invitation(w.orgA, w.users["owner"], ""))
}

func mxDoomedSecret(w *mxWorld, c *mxCall) {
	c.Vars["name"] = w.unique("DOOMED_")
	if err := w.app.Repos.PutSecret(w.ctx, w.privA, c.Vars["name"], "x"); err != nil {
		w.t.Fatal(err)
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
	mx("401 | 200 200 200 200 200 | 200 | 403 200 | 401 403", "GET", "/api/v1/user/orgs"),
	mx("401 | 200 200 200 200 200 | 200 | 403 200 | 401 403", "GET", "/api/v1/user/invitations"),
	mx("401 | 204 204 204 204 204 | 204 | 403 403 | 401 403", "POST", "/api/v1/user/invitations/{id}/accept").
		note("own invitation").prep(mxOwnInvitation),
	mx("401 | 204 204 204 204 204 | 204 | 403 403 | 401 403", "POST", "/api/v1/user/invitations/{id}/decline").
		note("own invitation").prep(mxOwnInvitation),
	mx("401 | 404 404 404 404 404 | 404 | 403 403 | 401 403", "POST", "/api/v1/invitations/accept").
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
	mx("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", "GET", mxA+"/repos").note("non-members: public ones"),
	mx("200 | 200 200 200 200 200 | 200 | 200 200 | 200 200", "GET", mxB+"/repos").note("non-members: public ones"),
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
	mx("404 | 403 403 200 200 403 | 404 | 403 403 | 403 403", "GET", mxAPriv+"/secrets"),
	mx("401 | 403 403 200 200 403 | 403 | 403 403 | 403 403", "GET", mxAPub+"/secrets"),
	mx("404 | 403 403 204 204 403 | 404 | 403 403 | 403 403", "PUT", mxAPriv+"/secrets/"+mxSecretName).
		body(map[string]string{"value": mxSecretValue}),
	mx("404 | 403 403 204 204 403 | 404 | 403 403 | 403 403", "DELETE", mxAPriv+"/secrets/{name}").prep(mxDoomedSecret),
	mx("404 | 403 403 200 200 403 | 404 | 403 403 | 403 403", "GET", mxAPriv+"/deploy-tokens"),
	mx("404 | 403 403 201 201 403 | 404 | 403 403 | 403 403", "POST", mxAPriv+"/deploy-tokens").
		body(map[string]string{"name": "inference"}),
	mx("404 | 403 403 204 204 403 | 404 | 403 403 | 403 403", "DELETE", mxAPriv+"/deploy-tokens/{id}").prep(mxDeployTokenOfA),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 404", "DELETE", mxBPriv+"/deploy-tokens/{id}").
		note("A's deploy token through B").prep(mxDeployTokenOfA),

	// ---- builds
	//  anon | rep dev adm own bil | out | nosc ro | dep job
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/builds"),
	mx("200 | 200 200 200 200 200 | 200 | 403 200 | 200 200", "GET", mxAPub+"/builds"),
	mx("404 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", mxBPriv+"/builds"),
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/builds/1"),
	mx("404 | 404 404 404 404 404 | 404 | 403 404 | 404 404", "GET", mxAPriv+"/builds/999"),
	mx("404 | 403 201 201 201 403 | 404 | 403 403 | 403 403", "POST", mxAPriv+"/builds").
		body(map[string]any{"branch": "main", "event": "web_trigger", "env": map[string]string{"FOO": "bar"}}),
	mx("401 | 403 201 201 201 403 | 403 | 403 403 | 403 403", "POST", mxAPub+"/builds").
		body(map[string]any{"branch": "main", "event": "web_trigger"}),
	mx("404 | 200 200 200 200 200 | 404 | 403 200 | 200 200", "GET", mxAPriv+"/schedules"),
	mx("404 | 404 404 404 404 404 | 200 | 404 404 | 404 404", "GET", mxBPriv+"/schedules"),
	mx("404 | 403 202 202 202 403 | 404 | 403 403 | 403 403", "POST", mxAPriv+"/builds/{n}/cancel").prep(mxFreshBuild),
	mx("401 | 403 202 202 202 403 | 403 | 403 403 | 403 403", "POST", mxAPub+"/builds/1/cancel"),
	mx("404 | 404 404 404 404 404 | 404 | 404 404 | 404 403", "POST", mxBPriv+"/builds/1/cancel").note("B has no build #1"),
	mx("404 | 403 201 201 201 403 | 404 | 403 403 | 403 403", "POST", mxAPriv+"/builds/1/rerun"),
	mx("401 | 403 201 201 201 403 | 403 | 403 403 | 403 403", "POST", mxAPub+"/builds/1/rerun"),

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
	mx("400 | 400 400 400 400 400 | 400 | 400 400 | 400 400", "POST", "/api/v1/billing/stripe/webhook").
		note("not signed by Stripe").body(map[string]any{"id": "evt_matrix", "type": "checkout.session.completed",
		"data": map[string]any{"object": map[string]any{"id": "cs_matrix", "payment_status": "paid", "amount_total": 100000}}}),

	// ---- the agent API (outside the user middleware): only agent credentials work there, so
	// every user credential, and the job token, is 401. The agent token's own answer is .agent().
	//  anon | rep dev adm own bil | out | nosc ro | dep job
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "POST", "/api/v1/agent/register").
		note("needs the registration token").body(mxAgentRegistration("intruder")).agent(401),
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "POST", "/api/v1/agent/poll").
		body(protocol.PollRequest{FreeCPUs: 64}).agent(200).prep(mxQueueWork),
	mx("401 | 401 401 401 401 401 | 401 | 401 401 | 401 401", "POST", "/api/v1/agent/leases/{lease}/renew").
		agent(200).prep(mxOwnLease),
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

var mxStarted = protocol.Event{Kind: protocol.EventPipelineStarted, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}

// Preps of the build controls and the agent API.

func mxFreshBuild(w *mxWorld, c *mxCall) { c.Vars["n"] = fmt.Sprint(w.manualBuild()) }

// mxQueueWork queues a pipeline before the agent polls (a poll without work waits 30 s).
func mxQueueWork(w *mxWorld, c *mxCall) {
	if c.P.Agent {
		w.manualBuild()
	}
}

func mxOwnLease(w *mxWorld, c *mxCall) { c.Vars["lease"] = w.lease.ID }

func mxOtherAgentsLease(w *mxWorld, c *mxCall) { c.Vars["lease"] = w.otherLease.ID }

func mxOtherAgentsJob(w *mxWorld, c *mxCall) { c.Vars["job"] = fmt.Sprint(w.otherLease.Jobs[0].ID) }

// mxFreshLease gives the agent a lease of its own to finish (everyone else gets the shared one).
func mxFreshLease(w *mxWorld, c *mxCall) {
	c.Vars["lease"] = w.lease.ID
	if c.P.Agent {
		w.manualBuild()
		c.Vars["lease"] = w.pollLease(w.agentToken).ID
	}
}

// mxGhostJob is a job id that no job has.
const mxGhostJob = "987654321"

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

// mxRunGitPasswords checks HTTP Basic with a username and password (the other way git
// authenticates): a member clones A's private repo, the outsider gets 404, a wrong password 401.
func mxRunGitPasswords(t *testing.T, w *mxWorld) {
	path := "/" + mxOrgA + "/" + mxPrivA + ".git/info/refs?service=git-upload-pack"
	for _, c := range []struct {
		user, password string
		want           int
	}{
		{"reporter", mxPassword, 200},
		{"outsider", mxPassword, 404},
		{"reporter", "not-the-password-7", 401},
	} {
		req := mxReq{Method: "GET", Path: path, Header: map[string]string{"Authorization": "Basic " + mxBasic(c.user, c.password)}}
		if res := w.send(nil, req); res.Status != c.want {
			t.Errorf("git as %s with password %q: got %d, want %d: %s", c.user, c.password, res.Status, c.want, mxShort(res.Body))
		}
	}
}

// mxWants parses a Want string.
func mxWants(t *testing.T, s string) [mxCols]int {
	t.Helper()
	var out [mxCols]int
	var n int
	for _, f := range strings.Fields(s) {
		if f == "|" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || n >= mxCols {
			t.Fatalf("bad Want %q", s)
		}
		out[n] = v
		n++
	}
	if n != mxCols {
		t.Fatalf("Want %q has %d columns, not %d", s, n, mxCols)
	}
	return out
}

var mxPlaceholder = regexp.MustCompile(`\{[a-z]+\}`)

func mxExpand(path string, vars map[string]string) string {
	return mxPlaceholder.ReplaceAllStringFunc(path, func(m string) string {
		if v, ok := vars[m[1:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// mxWant is what principal p must get from row r.
func mxWant(r mxRow, wants [mxCols]int, p *mxPrincipal) int {
	switch {
	case p.Agent && r.Agent != 0:
		return r.Agent
	case (p.Invalid || p.Agent) && (r.Git || strings.HasPrefix(r.Path, "/api/")):
		return http.StatusUnauthorized
	case p.Invalid || p.Agent:
		return wants[mxColAnon]
	case r.Git && p.Session:
		return wants[mxColAnon] // a cookie never authenticates git: the request is anonymous
	case p.Token && r.SessionOnly:
		return http.StatusForbidden
	}
	return wants[p.Col]
}

func mxIsWrite(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

// mxTargetAt reads the org and repo a path names (/api/v1/orgs/{org}/…, /api/v1/repos/{org}/{repo}/…
// or git's /{org}/{repo}.git/…) and the index, in the path split at "/", of the innermost name:
// the repo's segment when there is a repo, else the org's.
func mxTargetAt(path string) (org, repo string, at int) {
	path, _, _ = strings.Cut(path, "?")
	parts := strings.Split(path, "/")
	switch {
	case len(parts) >= 5 && parts[1] == "api" && parts[3] == "orgs":
		return parts[4], "", 4
	case len(parts) >= 6 && parts[1] == "api" && parts[3] == "repos":
		return parts[4], parts[5], 5
	case len(parts) >= 3 && parts[1] != "api" && strings.HasSuffix(parts[2], ".git"):
		return parts[1], strings.TrimSuffix(parts[2], ".git"), 2
	}
	return "", "", -1
}

// mxPrepared is one call ready to go.
type mxPrepared struct {
	P    *mxPrincipal
	Q    mxReq
	Want int
}

func (c mxPrepared) who() string { return c.Q.Method + " " + c.Q.Path + " as " + c.P.Name }

// mxPrepare makes every principal's call of row r, with its fresh targets.
func mxPrepare(w *mxWorld, r mxRow) []mxPrepared {
	wants := mxWants(w.t, r.Want)
	var out []mxPrepared
	for _, p := range w.principals {
		c := &mxCall{P: p, Vars: map[string]string{}, Body: r.Body}
		if r.Prep != nil {
			r.Prep(w, c)
		}
		q := mxReq{Method: r.Method, Path: mxExpand(r.Path, c.Vars), Body: c.Body, Cookie: c.Cookie, CSRF: c.CSRF, Basic: r.Git}
		out = append(out, mxPrepared{P: p, Q: q, Want: mxWant(r, wants, p)})
	}
	return out
}

// TestAuthorizationMatrix runs, on both dialects, mxMatrix (checking first that it covers every
// route), mxGitMatrix, git with passwords, and the CSRF checks.
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	mxEachDialect(t, func(t *testing.T, w *mxWorld) {
		mxCheckCoverage(t, w)
		mxCheckSnapshot(t, w)
		for _, r := range mxMatrix {
			t.Run(r.name(), func(t *testing.T) {
				w.t = t
				mxRunRow(t, w, r)
			})
		}
		for _, r := range mxGitMatrix {
			t.Run("git "+r.name(), func(t *testing.T) {
				w.t = t
				mxRunRow(t, w, r)
			})
		}
		t.Run("git with a password", func(t *testing.T) {
			w.t = t
			mxRunGitPasswords(t, w)
		})
		t.Run("csrf", func(t *testing.T) {
			w.t = t
			mxRunCSRF(t, w)
		})
	})
}

// mxRunRow sends a row as every principal: first the calls that must be refused, between two
// snapshots of the database, then the ones that must succeed.
func mxRunRow(t *testing.T, w *mxWorld, r mxRow) {
	t.Helper()
	calls := mxPrepare(w, r)
	var refused, allowed []mxPrepared
	for _, c := range calls {
		if c.Want >= 400 {
			refused = append(refused, c)
		} else {
			allowed = append(allowed, c)
		}
	}
	var before mxSnapshot
	if mxIsWrite(r.Method) {
		before = w.snapshot()
	}
	for _, c := range refused {
		mxSendAndCheck(t, w, c)
	}
	if before != nil {
		if d := before.diff(w.snapshot()); d != "" {
			var who []string
			for _, c := range refused {
				who = append(who, c.P.Name)
			}
			t.Errorf("%s: the refused calls (%s) changed the database:\n%s", r.name(), strings.Join(who, ", "), d)
		}
	}
	for _, c := range allowed {
		mxSendAndCheck(t, w, c)
	}
}

func mxSendAndCheck(t *testing.T, w *mxWorld, c mxPrepared) {
	t.Helper()
	res := w.send(c.P, c.Q)
	if res.Status != c.Want {
		t.Errorf("%s: got %d, want %d: %s", c.who(), res.Status, c.Want, mxShort(res.Body))
	}
	mxCheckResponse(t, w, c.who(), c.P, c.Q, res)
	mxCheckIndistinguishable(t, w, c.who(), c.P, c.Q, res)
}

// mxCheckSnapshot makes sure the snapshot used for "changes nothing" sees a change and ignores
// what reads update (a token's last-used time).
func mxCheckSnapshot(t *testing.T, w *mxWorld) {
	t.Helper()
	before := w.snapshot()
	if r := w.do(w.byName["owner-token"], "GET", mxAPriv, nil); r.Status != http.StatusOK {
		t.Fatalf("GET as owner-token: %d %s", r.Status, r.Body)
	}
	if d := before.diff(w.snapshot()); d != "" {
		t.Fatalf("a read changed the snapshot:\n%s", d)
	}
	if r := w.do(w.byName["owner-token"], "PATCH", mxAPub, map[string]string{"description": "public docs, v2"}); r.Status != http.StatusOK {
		t.Fatalf("PATCH as owner-token: %d %s", r.Status, r.Body)
	}
	if before.diff(w.snapshot()) == "" {
		t.Fatal("the snapshot missed a change of a repo's description")
	}
}

// mxCSRFExempt are the writes that need no X-CSRF-Token: they create a session or act without
// one (package auth).
var mxCSRFExempt = map[string]bool{
	"/api/v1/auth/signup": true, "/api/v1/auth/login": true,
	"/api/v1/auth/password-reset": true, "/api/v1/auth/password-reset/confirm": true,
}

// mxRunCSRF sends every write row of the matrix as A's owner through the session cookie, once
// without the X-CSRF-Token header and once with the CSRF token of another session: both are 403
// and, all together, change nothing, except on the exempt routes, which work without it.
func mxRunCSRF(t *testing.T, w *mxWorld) {
	owner := w.byName["owner"]
	other := w.users["admin"].CSRF
	type call struct {
		who  string
		q    mxReq
		want int
	}
	var refused []call
	for _, r := range mxMatrix {
		if !mxIsWrite(r.Method) {
			continue
		}
		wants := mxWants(t, r.Want)
		for _, variant := range []string{"no header", "another session's token"} {
			c := &mxCall{P: owner, Vars: map[string]string{}, Body: r.Body}
			if r.Prep != nil {
				r.Prep(w, c)
			}
			cookie := c.Cookie
			if cookie == "" {
				cookie = owner.Cookie
			}
			q := mxReq{Method: r.Method, Path: mxExpand(r.Path, c.Vars), Body: c.Body, Cookie: cookie, NoCSRF: true}
			if variant != "no header" {
				q.CSRF, q.NoCSRF = other, false
			}
			who := fmt.Sprintf("%s %s as owner's session, %s", q.Method, q.Path, variant)
			if !mxCSRFExempt[r.Path] {
				want := http.StatusForbidden
				if strings.HasPrefix(r.Path, "/api/v1/agent/") {
					want = http.StatusUnauthorized // the agent API takes no cookies at all
				}
				refused = append(refused, call{who, q, want})
				continue
			}
			if res := w.send(owner, q); res.Status != wants[mxColOwner] {
				t.Errorf("%s (exempt): got %d, want %d: %s", who, res.Status, wants[mxColOwner], mxShort(res.Body))
			}
		}
	}
	before := w.snapshot()
	for _, c := range refused {
		res := w.send(owner, c.q)
		if code, _, _ := res.envelope(); res.Status != c.want || code != mxCodeFor[c.want] {
			t.Errorf("%s: got %d, want %d %s: %s", c.who, res.Status, c.want, mxCodeFor[c.want], mxShort(res.Body))
		}
	}
	if d := before.diff(w.snapshot()); d != "" {
		t.Errorf("writes refused for their CSRF token changed the database:\n%s", d)
	}
	if len(refused) < 30 {
		t.Errorf("only %d CSRF checks: the matrix lost its write rows?", len(refused))
	}
}

// mxCheckResponse holds for every response: no 5xx, an envelope with the status's code on
// every /api error, no secret value ever, and no marker of an org the caller may not see.
func mxCheckResponse(t *testing.T, w *mxWorld, who string, p *mxPrincipal, q mxReq, res *mxResp) {
	t.Helper()
	if res.Status >= 500 {
		t.Errorf("%s: server error %d: %s", who, res.Status, mxShort(res.Body))
	}
	if res.Status >= 400 && strings.HasPrefix(q.Path, "/api/") {
		code, _, ok := res.envelope()
		if !ok {
			t.Errorf("%s: %d without the error envelope: %s", who, res.Status, mxShort(res.Body))
		} else if want := mxCodeFor[res.Status]; code != want && mxExtraCodes[code] != res.Status {
			t.Errorf("%s: %d with code %q, want %q", who, res.Status, code, want)
		}
	}
	if bytes.Contains(res.Body, []byte(mxSecretValue)) && !p.Secrets {
		t.Errorf("%s: the response contains a secret's value: %s", who, mxShort(res.Body))
	}
	sent := q.Path + fmt.Sprint(q.Body)
	markers := map[string]string{mxPrivA: "A", mxDescA: "A", mxCommitA: "A", mxDeployNameA: "A", mxSecretName: "A",
		mxPrivB: "B", mxDescB: "B"}
	for m, owner := range markers {
		if p.Sees[owner] || strings.Contains(sent, m) {
			continue
		}
		if bytes.Contains(res.Body, []byte(m)) {
			t.Errorf("%s: the response shows %q, private data of org %s: %s", who, m, owner, mxShort(res.Body))
		}
	}
}

// mxCheckIndistinguishable compares a 404 or 403 that a non-member gets for an org's private
// thing with the answer for a name that does not exist at all: same status, same body but for
// the name. (A 403 that does not depend on the target, such as "job tokens cannot do this",
// passes; one that only existing things get tells that the thing exists.)
func mxCheckIndistinguishable(t *testing.T, w *mxWorld, who string, p *mxPrincipal, q mxReq, res *mxResp) {
	t.Helper()
	if rest, ok := strings.CutPrefix(q.Path, "/api/v1/jobs/"); ok {
		mxCheckJobIndistinguishable(t, w, who, p, q, res, rest)
		return
	}
	org, repo, at := mxTargetAt(q.Path)
	layout := w.layout[org]
	if (res.Status != http.StatusNotFound && res.Status != http.StatusForbidden) || layout == "" || p.Sees[layout] || repo == mxPubA {
		return
	}
	real, ghost := org, mxGhostOrg
	if repo != "" {
		real, ghost = repo, mxGhostRepo
	}
	parts := strings.Split(q.Path, "/")
	parts[at] = strings.Replace(parts[at], real, ghost, 1)
	g := q
	g.Path = strings.Join(parts, "/")
	gres := w.send(p, g)
	norm := func(b []byte, name string) string { return strings.ReplaceAll(string(b), name, "{}") }
	if gres.Status != res.Status || norm(res.Body, real) != norm(gres.Body, ghost) {
		t.Errorf("%s: a non-member can tell %s exists:\n  %d %s\n  vs %s: %d %s", who, real,
			res.Status, mxShort(res.Body), g.Path, gres.Status, mxShort(gres.Body))
	}
}

// mxCheckJobIndistinguishable is mxCheckIndistinguishable for /api/v1/jobs/{id}/…: a 404 or 403
// that a non-member gets for a job of a team's private repo must be the answer for a job id that
// does not exist, but for the id.
func mxCheckJobIndistinguishable(t *testing.T, w *mxWorld, who string, p *mxPrincipal, q mxReq, res *mxResp, rest string) {
	t.Helper()
	id, tail, _ := strings.Cut(rest, "/")
	jobID, err := strconv.ParseInt(id, 10, 64)
	if err != nil || id == mxGhostJob || (res.Status != http.StatusNotFound && res.Status != http.StatusForbidden) {
		return
	}
	org, repo, err := w.app.Builds.JobRepo(w.ctx, jobID)
	if err != nil {
		t.Fatalf("%s: the job's repo: %v", who, err)
	}
	layout := w.layout[org]
	if layout == "" || p.Sees[layout] || repo == mxPubA {
		return
	}
	g := q
	g.Path = "/api/v1/jobs/" + mxGhostJob + "/" + tail
	gres := w.send(p, g)
	norm := func(b []byte, id string) string {
		return regexp.MustCompile(`\b`+id+`\b`).ReplaceAllString(string(b), "{}")
	}
	if gres.Status != res.Status || norm(res.Body, id) != norm(gres.Body, mxGhostJob) {
		t.Errorf("%s: a non-member can tell job %s exists:\n  %d %s\n  vs %s: %d %s", who, id,
			res.Status, mxShort(res.Body), g.Path, gres.Status, mxShort(gres.Body))
	}
}

func mxShort(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// mxRouteRE turns a gin route ("/api/v1/orgs/:org") into a regexp matching its paths.
func mxRouteRE(route string) *regexp.Regexp {
	parts := strings.Split(route, "/")
	for i, s := range parts {
		switch {
		case strings.HasPrefix(s, ":"):
			parts[i] = `[^/]+`
		case strings.HasPrefix(s, "*"):
			parts[i] = `.*`
		default:
			parts[i] = regexp.QuoteMeta(s)
		}
	}
	return regexp.MustCompile("^" + strings.Join(parts, "/") + "$")
}

// mxRouteOf returns the route (method + pattern) that serves method and path, preferring static
// segments as gin does, or "".
func mxRouteOf(w *mxWorld, method, path string) string {
	best, bestParams := "", 1<<30
	for _, rt := range w.app.Server.Routes() {
		if rt.Method != method || !mxRouteRE(rt.Path).MatchString(path) {
			continue
		}
		if n := strings.Count(rt.Path, ":") + strings.Count(rt.Path, "*"); n < bestParams {
			best, bestParams = rt.Method+" "+rt.Path, n
		}
	}
	return best
}

// mxCheckCoverage fails when a route of the server has no row in the matrix, or a row names no
// route.
func mxCheckCoverage(t *testing.T, w *mxWorld) {
	t.Helper()
	covered := map[string]bool{}
	for _, r := range mxMatrix {
		path, _, _ := strings.Cut(mxPlaceholder.ReplaceAllString(r.Path, "1"), "?")
		rt := mxRouteOf(w, r.Method, path)
		if rt == "" {
			t.Errorf("matrix row %s %s matches no route of the server", r.Method, r.Path)
		}
		covered[rt] = true
	}
	var missing []string
	for _, rt := range w.app.Server.Routes() {
		if k := rt.Method + " " + rt.Path; !covered[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("route %s has no row in the authorization matrix (mxMatrix in authz_test.go): add one", m)
	}
}

// TestEmailInvitationNeedsItsMailbox: an invitation sent to an email address must be accepted
// only by whoever reads that mailbox. Sign-up does not verify addresses, so someone who merely
// registers the invited address, before or after the invitation, must not be able to claim it
// (and with it a role in the team, up to owner).
func TestEmailInvitationNeedsItsMailbox(t *testing.T) {
	t.Parallel()
	w := newMXWorld(t, "")
	for _, order := range []string{"signs up after the invitation", "signed up before the invitation"} {
		t.Run(order, func(t *testing.T) {
			w.t = t
			invited := w.unique("new-hire-") + "@example.com"
			invite := func() {
				r := w.do(w.byName["owner"], "POST", mxA+"/invitations", map[string]string{"email": invited, "role": "developer"})
				if r.Status != http.StatusCreated {
					t.Fatalf("invite %s: %d %s", invited, r.Status, r.Body)
				}
			}
			if order == "signs up after the invitation" {
				invite()
			}
			// Mallory never sees the email: she guesses the address and signs up with it.
			name := w.unique("mallory")
			r := w.do(nil, "POST", "/api/v1/auth/signup", map[string]string{"username": name, "email": invited, "password": mxPassword})
			if r.Status != http.StatusCreated {
				t.Fatalf("sign up with %s: %d %s", invited, r.Status, r.Body)
			}
			var sess struct {
				CSRF string `json:"csrf_token"`
			}
			r.decode(t, &sess)
			mallory := &mxPrincipal{Name: name, Session: true, CSRF: sess.CSRF}
			for _, c := range r.Cookies {
				if c.Name == "nimbus_session" {
					mallory.Cookie = c.Value
				}
			}
			if order != "signs up after the invitation" {
				invite()
			}
			var list struct {
				Items []struct {
					ID int64 `json:"id"`
				} `json:"items"`
			}
			w.do(mallory, "GET", "/api/v1/user/invitations", nil).decode(t, &list)
			for _, inv := range list.Items {
				w.do(mallory, "POST", fmt.Sprintf("/api/v1/user/invitations/%d/accept", inv.ID), nil)
			}
			if r := w.do(mallory, "GET", mxAPriv, nil); r.Status != http.StatusNotFound {
				t.Errorf("%s registered the invited address %s without owning it, listed %d invitation(s) for it, "+
					"accepted them and now reads A's private repo: GET %s = %d, want 404. An email invitation must be "+
					"claimed with a secret from the email it was sent in (or once the address is verified), not by "+
					"whoever registers the address", name, invited, len(list.Items), mxAPriv, r.Status)
			}
		})
	}
}
