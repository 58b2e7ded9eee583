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
	if rest, ok := strings.CutPrefix(q.Path, "/api/v1/workspaces/"); ok {
		mxCheckWorkspaceIndistinguishable(t, w, who, p, q, res, rest)
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

// mxCheckWorkspaceIndistinguishable is mxCheckJobIndistinguishable for
// /api/v1/workspaces/{id}/…: a 404 or 403 that a non-member gets for a workspace of a team's
// private repo must be the answer for a workspace id that does not exist, but for the id.
func mxCheckWorkspaceIndistinguishable(t *testing.T, w *mxWorld, who string, p *mxPrincipal, q mxReq, res *mxResp, rest string) {
	t.Helper()
	id, tail, slash := strings.Cut(rest, "/")
	id, query, _ := strings.Cut(id, "?")
	wid, err := strconv.ParseInt(id, 10, 64)
	if err != nil || id == mxGhostWorkspace || (res.Status != http.StatusNotFound && res.Status != http.StatusForbidden) {
		return
	}
	var at struct{ Org, Repo string }
	err = w.app.DB.Table("pipelines").Select("orgs.name AS org, repos.name AS repo").
		Joins("JOIN repos ON repos.id = pipelines.repo_id").
		Joins("JOIN orgs ON orgs.id = repos.org_id").
		Where("pipelines.id = ?", wid).Take(&at).Error
	if err != nil {
		t.Fatalf("%s: the workspace's repo: %v", who, err)
	}
	layout := w.layout[at.Org]
	if layout == "" || p.Sees[layout] || at.Repo == mxPubA {
		return
	}
	g := q
	g.Path = "/api/v1/workspaces/" + mxGhostWorkspace
	switch {
	case slash:
		g.Path += "/" + tail
	case query != "":
		g.Path += "?" + query
	}
	gres := w.send(p, g)
	norm := func(b []byte, id string) string {
		return regexp.MustCompile(`\b`+id+`\b`).ReplaceAllString(string(b), "{}")
	}
	if gres.Status != res.Status || norm(res.Body, id) != norm(gres.Body, mxGhostWorkspace) {
		t.Errorf("%s: a non-member can tell workspace %s exists:\n  %d %s\n  vs %s: %d %s", who, id,
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
		t.Errorf("route %s has no row in the authorization matrix (mxMatrix in authz_matrix_test.go): add one", m)
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
