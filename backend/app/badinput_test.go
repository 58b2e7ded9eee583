package app

import (
	"encoding/json"
	"fmt"
	"github.com/nimbus-build/nimbus/backend/pull"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// Bad input on every write endpoint: each case must answer its 4xx status with the error
// envelope and that status's stable code, and the cases of an endpoint, all together, must not
// change a single row. Every write route under /api/v1 needs an entry (the test fails otherwise).
//
// Endpoints that take a JSON body also get the generic cases (mxMalformed): no body, broken
// JSON, a non-object, the valid body with trailing data after it, an unknown field (where the
// OpenAPI document closes the body's schema), a body over the 1 MiB limit, duplicate keys
// (mxDuplicateKeys).
//
// Requests go as A's owner through the session cookie (with its CSRF token) unless the case
// says otherwise: the strongest caller, so that a 4xx is about the input, not the caller.

type mxBadEndpoint struct {
	Method, Path string // Path may hold {placeholders} that Setup fills
	JSON         bool   // takes a JSON body: the generic cases apply
	As           string // default principal of its cases ("owner")
	Valid        any    // a body that would be accepted (the generic cases derive from it)
	Setup        func(w *mxWorld, vars map[string]string)
	Cases        []mxBad
}

type mxBad struct {
	Name   string
	Path   string // overrides the endpoint's path
	Body   any
	Want   int
	As     string                                   // principal name (default "owner")
	Setup  func(w *mxWorld, vars map[string]string) // runs before the endpoint's snapshot
	Header map[string]string                        // request headers (a checksum, …)
	InMsg  string                                   // the error message must hold this
	Field  string                                   // the error's details.field must be this
}

var mxLong = func(n int) string { return strings.Repeat("a", n) }

// mxMalformed are the generic cases of every JSON endpoint. The trailing-data cases append to
// the valid body, which alone would be accepted: trailing data after a JSON body used to be
// accepted when it began with '}' or ']' (POST /api/v1/orgs with {"name":"x1"}} created the org).
// closed: the OpenAPI document says additionalProperties: false for the body, so an unknown
// field is refused too.
func mxMalformed(t *testing.T, valid any, closed bool) []mxBad {
	raw, err := json.Marshal(valid)
	if err != nil || !strings.HasPrefix(string(raw), "{") {
		t.Fatalf("the valid body of a JSON endpoint must be an object: %s %v", raw, err)
	}
	ok := string(raw)
	cases := []mxBad{
		{Name: "no body", Body: nil, Want: 400},
		{Name: "empty body", Body: "", Want: 400},
		{Name: "broken JSON", Body: `{"name": `, Want: 400},
		{Name: "not JSON", Body: `name=x`, Want: 400},
		{Name: "an array", Body: `[]`, Want: 400},
		{Name: "an array of the valid body", Body: "[" + ok + "]", Want: 400},
		{Name: "a string", Body: `"x"`, Want: 400},
		{Name: "null", Body: `null`, Want: 400},
		{Name: "two objects", Body: `{} {}`, Want: 400},
		{Name: "valid body, then a stray }", Body: ok + "}", Want: 400},
		{Name: "valid body, then a stray ]", Body: ok + "\n]", Want: 400},
		{Name: "valid body, then a second object", Body: ok + ` {"name": "x"}`, Want: 400},
		{Name: "valid body, then garbage", Body: ok + ` trailing`, Want: 400},
		{Name: "over 1 MiB", Body: `{"name": "` + mxLong(1<<20+10) + `"}`, Want: 413},
	}
	cases = append(cases, mxDuplicateKeys(t, ok, closed)...)
	if closed {
		unknown := map[string]any{"unexpected_field": 1}
		if m, ok := valid.(map[string]any); ok {
			for k, v := range m {
				unknown[k] = v
			}
		}
		cases = append(cases, mxBad{Name: "unknown field beside valid ones", Body: unknown, Want: 400, InMsg: "unexpected_field"})
	}
	return cases
}

func mxSetScratchOrg(w *mxWorld, v map[string]string)  { v["org"] = w.scratchOrg() }
func mxSetScratchRepo(w *mxWorld, v map[string]string) { v["repo"] = w.scratchRepo() }

// mxBadEndpoints lists every write endpoint with its bad inputs.
var mxBadEndpoints = slices.Concat(mxBadUserEndpoints, mxBadAgentEndpoints, mxBadBillingEndpoints, mxBadArtifactEndpoints,
	mxBadWorkspaceEndpoints)

var mxBadUserEndpoints = []mxBadEndpoint{
	{Method: "POST", Path: "/api/v1/auth/signup", JSON: true,
		Valid: map[string]any{"username": "fine", "email": "fine@example.com", "password": mxPassword},
		Cases: []mxBad{
			{Name: "username with a slash", Body: map[string]any{"username": "../x", "email": "x1@example.com", "password": mxPassword}, Want: 422},
			{Name: "username with a space", Body: map[string]any{"username": "a b", "email": "x2@example.com", "password": mxPassword}, Want: 422},
			{Name: "username ending in '-'", Body: map[string]any{"username": "abc-", "email": "x3@example.com", "password": mxPassword}, Want: 422},
			{Name: "username of 40 characters", Body: map[string]any{"username": mxLong(40), "email": "x4@example.com", "password": mxPassword}, Want: 422},
			{Name: "empty username", Body: map[string]any{"username": "", "email": "x5@example.com", "password": mxPassword}, Want: 422},
			{Name: "email without @", Body: map[string]any{"username": "newx6", "email": "nope", "password": mxPassword}, Want: 422},
			{Name: "email with a header injection", Body: map[string]any{"username": "newx7", "email": "a@example.com\r\nBcc: b@example.com", "password": mxPassword}, Want: 422},
			{Name: "short password", Body: map[string]any{"username": "newx8", "email": "x8@example.com", "password": "short"}, Want: 422},
			{Name: "common password", Body: map[string]any{"username": "newx9", "email": "x9@example.com", "password": "password123"}, Want: 422},
			{Name: "password holding the username", Body: map[string]any{"username": "newx10", "email": "x10@example.com", "password": "xx-newx10-xx-yy"}, Want: 422},
			{Name: "password of 257 characters", Body: map[string]any{"username": "newx11", "email": "x11@example.com", "password": mxLong(257)}, Want: 422},
			{Name: "taken username, other case", Body: map[string]any{"username": "OWNER", "email": "x12@example.com", "password": mxPassword}, Want: 409},
			{Name: "taken email, other case", Body: map[string]any{"username": "newx13", "email": "Owner@Example.com", "password": mxPassword}, Want: 409},
			{Name: "username as a number", Body: map[string]any{"username": 7, "email": "x14@example.com", "password": mxPassword}, Want: 400},
		}},
	{Method: "POST", Path: "/api/v1/auth/login", JSON: true,
		Valid: map[string]any{"login": "root", "password": mxPassword},
		Cases: []mxBad{
			{Name: "no password", Body: map[string]any{"login": "root"}, Want: 422},
			{Name: "no login", Body: map[string]any{"password": mxPassword}, Want: 422},
			{Name: "wrong password", Body: map[string]any{"login": "root", "password": "not-the-password-1"}, Want: 401},
			{Name: "unknown account", Body: map[string]any{"login": "nobody-here", "password": mxPassword}, Want: 401},
			{Name: "password as a list", Body: map[string]any{"login": "root", "password": []string{mxPassword}}, Want: 400},
		}},
	{Method: "POST", Path: "/api/v1/auth/logout", JSON: false,
		Cases: []mxBad{
			// Logout reads no input; these show that a body cannot make it do anything else.
			{Name: "a body is ignored", Body: `{"all_sessions": true}`, Want: 204, As: "anon"},
		}},
	{Method: "POST", Path: "/api/v1/auth/password-reset", JSON: true,
		Valid: map[string]any{"email": "root@example.com"},
		Cases: []mxBad{
			{Name: "not an email", Body: map[string]any{"email": "root"}, Want: 422},
			{Name: "empty email", Body: map[string]any{"email": ""}, Want: 422},
			{Name: "email with a header injection", Body: map[string]any{"email": "root@example.com\r\nBcc: x@example.com"}, Want: 422},
			// Unknown addresses answer like known ones (no account discovery) and store nothing.
			{Name: "unknown email", Body: map[string]any{"email": "nobody@example.com"}, Want: 202},
		}},
	{Method: "POST", Path: "/api/v1/auth/password-reset/confirm", JSON: true,
		Valid: map[string]any{"token": "x", "password": mxPassword},
		Setup: func(w *mxWorld, v map[string]string) {
			v["token"] = w.resetToken(w.users["resetme"])
			// A used token: reset once, for real, before the snapshot.
			used := w.resetToken(w.users["resetme"])
			if r := w.do(nil, "POST", "/api/v1/auth/password-reset/confirm", map[string]string{"token": used, "password": mxPassword}); r.Status != 204 {
				w.t.Fatalf("reset: %d %s", r.Status, r.Body)
			}
			v["used"] = used
		},
		Cases: []mxBad{
			{Name: "unknown token", Body: map[string]any{"token": "nope", "password": mxPassword}, Want: 422},
			{Name: "empty token", Body: map[string]any{"token": "", "password": mxPassword}, Want: 422},
			{Name: "used token", Body: `{"token": "{used}", "password": "` + mxPassword + `"}`, Want: 422},
			{Name: "valid token, short password", Body: `{"token": "{token}", "password": "short"}`, Want: 422},
			{Name: "valid token, common password", Body: `{"token": "{token}", "password": "password123"}`, Want: 422},
			{Name: "valid token, password holding the username", Body: `{"token": "{token}", "password": "my-resetme-password"}`, Want: 422},
		}},
	{Method: "PUT", Path: "/api/v1/user/password", JSON: true,
		Valid: map[string]any{"current_password": mxPassword, "new_password": mxPassword},
		Cases: []mxBad{
			{Name: "wrong current password", Body: map[string]any{"current_password": "wrong-password-99", "new_password": "another-fine-password"}, Want: 422},
			{Name: "no current password", Body: map[string]any{"new_password": "another-fine-password"}, Want: 422},
			{Name: "short new password", Body: map[string]any{"current_password": mxPassword, "new_password": "short"}, Want: 422},
			{Name: "common new password", Body: map[string]any{"current_password": mxPassword, "new_password": "password123"}, Want: 422},
			{Name: "new password holding the username", Body: map[string]any{"current_password": mxPassword, "new_password": "the-owner-password"}, Want: 422},
		}},
	{Method: "POST", Path: "/api/v1/user/tokens", JSON: true,
		Valid: map[string]any{"name": "ci", "scopes": []string{"repo:read"}},
		Cases: []mxBad{
			{Name: "empty name", Body: map[string]any{"name": " ", "scopes": []string{"repo:read"}}, Want: 422},
			{Name: "name of 101 characters", Body: map[string]any{"name": mxLong(101), "scopes": []string{"repo:read"}}, Want: 422},
			{Name: "no scopes", Body: map[string]any{"name": "ci", "scopes": []string{}}, Want: 422},
			{Name: "unknown scope", Body: map[string]any{"name": "ci", "scopes": []string{"repo:delete"}}, Want: 422},
			{Name: "admin scope for a non-admin", Body: map[string]any{"name": "ci", "scopes": []string{"admin"}}, Want: 403},
			{Name: "both expiry forms", Body: map[string]any{"name": "ci", "scopes": []string{"repo:read"}, "expires_at": "2099-01-01T00:00:00Z", "expires_in_days": 3}, Want: 422},
			{Name: "scopes as a string", Body: map[string]any{"name": "ci", "scopes": "repo:read"}, Want: 400},
			{Name: "expiry in the past", Body: map[string]any{"name": "ci", "scopes": []string{"repo:read"}, "expires_at": "2001-01-01T00:00:00Z"}, Want: 422},
			{Name: "expiry not a time", Body: map[string]any{"name": "ci", "scopes": []string{"repo:read"}, "expires_at": "tomorrow"}, Want: 400},
			{Name: "expires_in_days 0", Body: map[string]any{"name": "ci", "scopes": []string{"repo:read"}, "expires_in_days": 0}, Want: 422},
			{Name: "expires_in_days 3651", Body: map[string]any{"name": "ci", "scopes": []string{"repo:read"}, "expires_in_days": 3651}, Want: 422},
			{Name: "expires_in_days 1.5", Body: map[string]any{"name": "ci", "scopes": []string{"repo:read"}, "expires_in_days": 1.5}, Want: 400},
		}},
	{Method: "DELETE", Path: "/api/v1/user/tokens/{id}",
		Setup: func(w *mxWorld, v map[string]string) {
			_, t, _ := w.tokenRow(w.token(w.users["owner"], "repo:read"))
			if err := w.app.Auth.RevokeToken(w.ctx, t.UserID, t.ID); err != nil {
				w.t.Fatal(err)
			}
			v["id"] = fmt.Sprint(t.ID)
		},
		Cases: []mxBad{
			{Name: "not a number", Path: "/api/v1/user/tokens/abc", Want: 404},
			{Name: "negative", Path: "/api/v1/user/tokens/-1", Want: 404},
			{Name: "beyond int64", Path: "/api/v1/user/tokens/99999999999999999999", Want: 404},
			{Name: "no such token", Path: "/api/v1/user/tokens/987654", Want: 404},
			{Name: "already revoked: a no-op", Path: "/api/v1/user/tokens/{id}", Want: 204},
		}},
	{Method: "DELETE", Path: "/api/v1/user/sessions/{id}",
		Setup: func(w *mxWorld, v map[string]string) {
			_, s, err := w.app.Auth.CreateSession(w.ctx, w.users["root"].ID)
			if err != nil {
				w.t.Fatal(err)
			}
			v["lookup"] = s.ID
			v["roots"] = auth.PublicSessionID(s.ID)
		},
		Cases: []mxBad{
			{Name: "no such session", Path: "/api/v1/user/sessions/0123456789abcdef", Want: 404},
			{Name: "not hex", Path: "/api/v1/user/sessions/zzz", Want: 404},
			{Name: "the lookup key, not the public id", Path: "/api/v1/user/sessions/{lookup}", Want: 404},
			{Name: "someone else's session", Path: "/api/v1/user/sessions/{roots}", Want: 404},
			{Name: "an id of 300 characters", Path: "/api/v1/user/sessions/" + mxLong(300), Want: 404},
		}},

	{Method: "POST", Path: "/api/v1/orgs", JSON: true,
		Valid: map[string]any{"name": "fine-team"},
		Cases: []mxBad{
			{Name: "path traversal", Body: map[string]any{"name": "../x"}, Want: 422},
			{Name: "a slash", Body: map[string]any{"name": "a/b"}, Want: 422},
			{Name: "ends in .git", Body: map[string]any{"name": "team.git"}, Want: 422},
			{Name: "ends in '-'", Body: map[string]any{"name": "team-"}, Want: 422},
			{Name: "empty", Body: map[string]any{"name": ""}, Want: 422},
			{Name: "40 characters", Body: map[string]any{"name": mxLong(40)}, Want: 422},
			{Name: "reserved: api", Body: map[string]any{"name": "api"}, Want: 422},
			{Name: "reserved, other case: Admin", Body: map[string]any{"name": "Admin"}, Want: 422},
			{Name: "reserved: healthz", Body: map[string]any{"name": "healthz"}, Want: 422},
			{Name: "taken, other case", Body: map[string]any{"name": "ACME"}, Want: 409},
			{Name: "name as a number", Body: map[string]any{"name": 5}, Want: 400},
		}},
	{Method: "PATCH", Path: "/api/v1/orgs/{org}", JSON: true, Setup: mxSetScratchOrg,
		Valid: map[string]any{"name": "fine-rename"},
		Cases: []mxBad{
			{Name: "path traversal", Body: map[string]any{"name": "../acme"}, Want: 422},
			{Name: "reserved", Body: map[string]any{"name": "metrics"}, Want: 422},
			{Name: "empty", Body: map[string]any{"name": ""}, Want: 422},
			{Name: "taken by another org", Body: map[string]any{"name": "Globex"}, Want: 409},
			{Name: "no such org", Path: "/api/v1/orgs/" + mxGhostOrg, Body: map[string]any{"name": "fine-rename"}, Want: 404},
		}},
	{Method: "DELETE", Path: "/api/v1/orgs/{org}",
		Cases: []mxBad{
			{Name: "no such org", Path: "/api/v1/orgs/" + mxGhostOrg, Want: 404},
			{Name: "an org that still has repos", Path: mxA, Want: 409},
		}},
	{Method: "PUT", Path: "/api/v1/orgs/{org}/members/{user}", JSON: true, Setup: func(w *mxWorld, v map[string]string) {
		mxSetScratchOrg(w, v)
		v["user"] = "victim"
	}, Valid: map[string]any{"role": "developer"},
		Cases: []mxBad{
			{Name: "unknown role", Body: map[string]any{"role": "superuser"}, Want: 422},
			{Name: "empty role", Body: map[string]any{"role": ""}, Want: 422},
			{Name: "role in capitals", Body: map[string]any{"role": "ADMIN"}, Want: 422},
			{Name: "role as a number", Body: map[string]any{"role": 1}, Want: 400},
			{Name: "no such user", Path: "/api/v1/orgs/{org}/members/nobody-here", Body: map[string]any{"role": "developer"}, Want: 404},
			{Name: "a user who is not a member", Path: "/api/v1/orgs/{org}/members/root", Body: map[string]any{"role": "developer"}, Want: 404},
			{Name: "no such org", Path: "/api/v1/orgs/" + mxGhostOrg + "/members/victim", Body: map[string]any{"role": "developer"}, Want: 404},
		}},
	{Method: "DELETE", Path: "/api/v1/orgs/{org}/members/{user}", Setup: mxSetScratchOrg,
		Cases: []mxBad{
			{Name: "no such user", Path: "/api/v1/orgs/{org}/members/nobody-here", Want: 404},
			{Name: "a user who is not a member", Path: "/api/v1/orgs/{org}/members/root", Want: 404},
			{Name: "the last owner", Path: "/api/v1/orgs/{org}/members/owner", Want: 409},
		}},
	{Method: "POST", Path: mxA + "/runner-tokens", JSON: true, Valid: map[string]any{"name": "gpu boxes"},
		Cases: []mxBad{
			{Name: "no name", Body: map[string]any{}, Want: 422},
			{Name: "blank name", Body: map[string]any{"name": "   "}, Want: 422},
			{Name: "name of 101 characters", Body: map[string]any{"name": mxLong(101)}, Want: 422},
			{Name: "name as a number", Body: map[string]any{"name": 5}, Want: 400},
			{Name: "no such org", Path: "/api/v1/orgs/" + mxGhostOrg + "/runner-tokens", Body: map[string]any{"name": "x"}, Want: 404},
		}},
	{Method: "DELETE", Path: mxA + "/runner-tokens/{id}",
		Cases: []mxBad{
			{Name: "not a number", Path: mxA + "/runner-tokens/abc", Want: 404},
			{Name: "negative", Path: mxA + "/runner-tokens/-1", Want: 404},
			{Name: "beyond int64", Path: mxA + "/runner-tokens/99999999999999999999", Want: 404},
			{Name: "no such token", Path: mxA + "/runner-tokens/987654", Want: 404},
		}},
	{Method: "POST", Path: mxA + "/agents/{id}/pause", Setup: mxPlatformAgent,
		Cases: []mxBad{
			{Name: "no such runner", Path: mxA + "/agents/agt_nope/pause", Want: 404},
			{Name: "a platform agent", Path: mxA + "/agents/{platform}/pause", Want: 404},
		}},
	{Method: "POST", Path: mxA + "/agents/{id}/resume", Setup: mxPlatformAgent,
		Cases: []mxBad{
			{Name: "no such runner", Path: mxA + "/agents/agt_nope/resume", Want: 404},
			{Name: "a platform agent", Path: mxA + "/agents/{platform}/resume", Want: 404},
		}},
	{Method: "DELETE", Path: mxA + "/agents/{id}", Setup: mxPlatformAgent,
		Cases: []mxBad{
			{Name: "no such runner", Path: mxA + "/agents/agt_nope", Want: 404},
			{Name: "a platform agent", Path: mxA + "/agents/{platform}", Want: 404},
		}},
	{Method: "POST", Path: mxA + "/invitations", JSON: true,
		Valid: map[string]any{"email": "fine@example.com", "role": "developer"},
		Setup: func(w *mxWorld, v map[string]string) {
			v["open"] = w.unique("pending-") + "@example.com"
			if _, err := w.app.Orgs.Invite(w.ctx, w.orgA, w.users["owner"].User, org.Owner, "", v["open"], org.Reporter); err != nil {
				w.t.Fatal(err)
			}
		},
		Cases: []mxBad{
			{Name: "unknown role", Body: map[string]any{"email": "n1@example.com", "role": "god"}, Want: 422},
			{Name: "no role", Body: map[string]any{"email": "n2@example.com"}, Want: 422},
			{Name: "both username and email", Body: map[string]any{"username": "victim", "email": "n3@example.com", "role": "developer"}, Want: 422},
			{Name: "neither username nor email", Body: map[string]any{"role": "developer"}, Want: 422},
			{Name: "email without @", Body: map[string]any{"email": "nope", "role": "developer"}, Want: 422},
			{Name: "email with a header injection", Body: map[string]any{"email": "a@example.com\r\nBcc: b@example.com", "role": "developer"}, Want: 422},
			{Name: "email of 255 characters", Body: map[string]any{"email": mxLong(243) + "@example.com", "role": "developer"}, Want: 422},
			{Name: "no such user", Body: map[string]any{"username": "nobody-here", "role": "developer"}, Want: 404},
			{Name: "already a member", Body: map[string]any{"username": "reporter", "role": "developer"}, Want: 409},
			{Name: "already invited", Body: `{"email": "{open}", "role": "developer"}`, Want: 409},
			{Name: "no such org", Path: "/api/v1/orgs/" + mxGhostOrg + "/invitations", Body: map[string]any{"email": "n4@example.com", "role": "developer"}, Want: 404},
		}},
	{Method: "DELETE", Path: mxA + "/invitations/{id}",
		Setup: func(w *mxWorld, v map[string]string) {
			b, _ := w.app.Orgs.ByName(w.ctx, mxOrgB)
			v["other"] = fmt.Sprint(w.invitation(b, w.users["outsider"], ""))
		},
		Cases: []mxBad{
			{Name: "not a number", Path: mxA + "/invitations/abc", Want: 404},
			{Name: "no such invitation", Path: mxA + "/invitations/987654", Want: 404},
			{Name: "another org's invitation", Path: mxA + "/invitations/{other}", Want: 404},
		}},
	{Method: "POST", Path: "/api/v1/user/invitations/{id}/accept",
		Setup: mxExpiredInvitation,
		Cases: []mxBad{
			{Name: "not a number", Path: "/api/v1/user/invitations/abc/accept", Want: 404},
			{Name: "no such invitation", Path: "/api/v1/user/invitations/987654/accept", Want: 404},
			{Name: "expired", Path: "/api/v1/user/invitations/{expired}/accept", Want: 404, As: "victim"},
			{Name: "addressed to someone else", Path: "/api/v1/user/invitations/{victims}/accept", Want: 404},
		}},
	{Method: "POST", Path: "/api/v1/invitations/preview", JSON: true,
		Valid: map[string]any{"token": "a-token-from-an-invitation-email"},
		Cases: []mxBad{
			{Name: "empty token", Body: map[string]any{"token": ""}, Want: 422},
			{Name: "no such invitation", Body: map[string]any{"token": "nope"}, Want: 404},
			{Name: "token as a number", Body: map[string]any{"token": 5}, Want: 400},
		}},
	{Method: "POST", Path: "/api/v1/invitations/accept", JSON: true,
		Valid: map[string]any{"token": "a-token-from-an-invitation-email"},
		Cases: []mxBad{
			{Name: "empty token", Body: map[string]any{"token": ""}, Want: 422},
			{Name: "no such invitation", Body: map[string]any{"token": "nope"}, Want: 404},
			{Name: "token as a number", Body: map[string]any{"token": 5}, Want: 400},
		}},
	{Method: "POST", Path: "/api/v1/user/invitations/{id}/decline",
		Setup: mxExpiredInvitation,
		Cases: []mxBad{
			{Name: "not a number", Path: "/api/v1/user/invitations/1e3/decline", Want: 404},
			{Name: "no such invitation", Path: "/api/v1/user/invitations/987654/decline", Want: 404},
			{Name: "expired", Path: "/api/v1/user/invitations/{expired}/decline", Want: 404, As: "victim"},
			{Name: "addressed to someone else", Path: "/api/v1/user/invitations/{victims}/decline", Want: 404},
		}},

	{Method: "POST", Path: mxA + "/repos", JSON: true,
		Valid: map[string]any{"name": "fine-repo", "visibility": "private"},
		Cases: []mxBad{
			{Name: "path traversal", Body: map[string]any{"name": "../x"}, Want: 422},
			{Name: "only dots", Body: map[string]any{"name": ".."}, Want: 422},
			{Name: "two dots inside", Body: map[string]any{"name": "a..b"}, Want: 422},
			{Name: "a slash", Body: map[string]any{"name": "a/b"}, Want: 422},
			{Name: "a backslash", Body: map[string]any{"name": `a\b`}, Want: 422},
			{Name: "ends in .git", Body: map[string]any{"name": "model.git"}, Want: 422},
			{Name: "ends in .GIT", Body: map[string]any{"name": "model.GIT"}, Want: 422},
			{Name: "starts with a dot", Body: map[string]any{"name": ".hidden"}, Want: 422},
			{Name: "empty", Body: map[string]any{"name": ""}, Want: 422},
			{Name: "101 characters", Body: map[string]any{"name": mxLong(101)}, Want: 422},
			{Name: "NUL byte", Body: map[string]any{"name": "a\x00b"}, Want: 400},
			{Name: "unknown visibility", Body: map[string]any{"name": "fine-repo", "visibility": "internal"}, Want: 422},
			{Name: "default branch with ..", Body: map[string]any{"name": "fine-repo", "default_branch": "../main"}, Want: 422},
			{Name: "default branch ending .lock", Body: map[string]any{"name": "fine-repo", "default_branch": "main.lock"}, Want: 422},
			{Name: "default branch with //", Body: map[string]any{"name": "fine-repo", "default_branch": "a//b"}, Want: 422},
			{Name: "default branch starting with -", Body: map[string]any{"name": "fine-repo", "default_branch": "-main"}, Want: 422},
			{Name: "description of 1001 characters", Body: map[string]any{"name": "fine-repo", "description": mxLong(1001)}, Want: 422},
			{Name: "taken, other case", Body: map[string]any{"name": strings.ToUpper(mxPrivA)}, Want: 409},
			{Name: "visibility as a bool", Body: map[string]any{"name": "fine-repo", "visibility": true}, Want: 400},
			{Name: "no such org", Path: "/api/v1/orgs/" + mxGhostOrg + "/repos", Body: map[string]any{"name": "fine-repo"}, Want: 404},
		}},
	// A data directory out of step with the database (an older database backup restored) holds
	// a repository where the new repo would go: that was a 500 (mkdir …: file exists) that then
	// removed the directory. An entry of its own, so no other case takes the id first.
	{Method: "POST", Path: mxA + "/repos", Setup: mxOrphanRepoDir,
		Cases: []mxBad{
			{Name: "a directory without a row at the new id", Body: `{"name": "{name}"}`, Want: 409,
				InMsg: "out of step with its database"},
		}},
	{Method: "PATCH", Path: mxARepo, JSON: true, Setup: mxSetScratchRepo,
		Valid: map[string]any{"description": "fine"},
		Cases: []mxBad{
			{Name: "nothing to change", Body: map[string]any{}, Want: 422},
			{Name: "path traversal", Body: map[string]any{"name": "../x"}, Want: 422},
			{Name: "ends in .git", Body: map[string]any{"name": "x.git"}, Want: 422},
			{Name: "empty name", Body: map[string]any{"name": ""}, Want: 422},
			{Name: "taken name", Body: map[string]any{"name": mxPubA}, Want: 409},
			{Name: "unknown visibility", Body: map[string]any{"visibility": "secret"}, Want: 422},
			{Name: "bad default branch", Body: map[string]any{"default_branch": "a..b"}, Want: 422},
			{Name: "description of 1001 characters", Body: map[string]any{"description": mxLong(1001)}, Want: 422},
			{Name: "archived as a string", Body: map[string]any{"archived": "yes"}, Want: 400},
			{Name: "good description, bad visibility", Body: map[string]any{"description": "changed", "visibility": "nope"}, Want: 422},
			{Name: "good name, bad branch", Body: map[string]any{"name": "fine-new-name", "default_branch": "x//y"}, Want: 422},
			{Name: "no such repo", Path: "/api/v1/repos/" + mxOrgA + "/" + mxGhostRepo, Body: map[string]any{"description": "x"}, Want: 404},
		}},
	{Method: "DELETE", Path: mxARepo,
		Cases: []mxBad{
			{Name: "no such repo", Path: "/api/v1/repos/" + mxOrgA + "/" + mxGhostRepo, Want: 404},
			{Name: "no such org", Path: "/api/v1/repos/" + mxGhostOrg + "/" + mxPrivA, Want: 404},
			{Name: "the .git name", Path: mxAPriv + ".git", Want: 404},
		}},
	{Method: "PUT", Path: mxAPriv + "/secrets/{name}", JSON: true,
		Valid: map[string]any{"value": "v"}, Setup: func(w *mxWorld, v map[string]string) { v["name"] = mxSecretName },
		Cases: []mxBad{
			{Name: "name starting with a digit", Path: mxAPriv + "/secrets/1BAD", Body: map[string]any{"value": "v"}, Want: 422},
			{Name: "name with a dash", Path: mxAPriv + "/secrets/has-dash", Body: map[string]any{"value": "v"}, Want: 422},
			{Name: "name with a dot", Path: mxAPriv + "/secrets/a.b", Body: map[string]any{"value": "v"}, Want: 422},
			{Name: "CNB_ prefix", Path: mxAPriv + "/secrets/CNB_TOKEN", Body: map[string]any{"value": "v"}, Want: 422},
			{Name: "cnb_ prefix", Path: mxAPriv + "/secrets/cnb_token", Body: map[string]any{"value": "v"}, Want: 422},
			{Name: "name of 129 characters", Path: mxAPriv + "/secrets/" + strings.Repeat("A", 129), Body: map[string]any{"value": "v"}, Want: 422},
			{Name: "empty value", Path: mxAPriv + "/secrets/" + mxSecretName, Body: map[string]any{"value": ""}, Want: 422},
			{Name: "no value", Path: mxAPriv + "/secrets/" + mxSecretName, Body: map[string]any{}, Want: 422},
			{Name: "value over 64 KiB", Path: mxAPriv + "/secrets/" + mxSecretName, Body: map[string]any{"value": mxLong(64<<10 + 1)}, Want: 422},
			{Name: "value as an object", Path: mxAPriv + "/secrets/" + mxSecretName, Body: map[string]any{"value": map[string]string{"a": "b"}}, Want: 400},
			{Name: "no such repo", Path: "/api/v1/repos/" + mxOrgA + "/" + mxGhostRepo + "/secrets/OK", Body: map[string]any{"value": "v"}, Want: 404},
		}},
	{Method: "DELETE", Path: mxAPriv + "/secrets/{name}",
		Cases: []mxBad{
			{Name: "no such secret", Path: mxAPriv + "/secrets/NOPE", Want: 404},
			{Name: "other case of an existing one", Path: mxAPriv + "/secrets/" + strings.ToLower(mxSecretName), Want: 404},
			{Name: "invalid name", Path: mxAPriv + "/secrets/1-x", Want: 404},
		}},
	{Method: "PUT", Path: mxARepo + "/secret-files/env.yml", JSON: true,
		Valid: map[string]any{"content": "K: v\n"}, Setup: mxSecretRepoVars,
		Cases: []mxBad{
			{Name: "YAML that does not parse", Body: map[string]any{"content": "a: [unclosed\n"}, Want: 422},
			{Name: "a YAML list", Path: mxARepo + "/secret-files/list.yml", Body: map[string]any{"content": "- a\n"}, Want: 422},
			{Name: "a KEY=VALUE line without =", Path: mxARepo + "/secret-files/env", Body: map[string]any{"content": "nothing\n"}, Want: 422},
			// The path rule (internal/userpath): a 400 naming the path and the reason. The path is
			// what follows …/secret-files/ as written: …/secret-files//etc/x.yml was stored as
			// "/etc/x.yml" while a//b.yml was refused. An empty, "." or ".." segment and a
			// control character are refused at the edge already, for every route.
			{Name: "a path with ..", Path: mxARepo + "/secret-files/a/../../b.yml", Body: map[string]any{"content": "K: v\n"}, Want: 400,
				InMsg: `".." segment`},
			{Name: "a path starting with /", Path: mxARepo + "/secret-files//etc/x.yml", Body: map[string]any{"content": "K: v\n"}, Want: 400,
				InMsg: "empty segment"},
			{Name: "a path with an empty segment", Path: mxARepo + "/secret-files/a//b.yml", Body: map[string]any{"content": "K: v\n"}, Want: 400,
				InMsg: "empty segment"},
			{Name: "a path ending in /", Path: mxARepo + "/secret-files/prod/", Body: map[string]any{"content": "K: v\n"}, Want: 400,
				InMsg: "empty segment"},
			{Name: "a path with a . segment", Path: mxARepo + "/secret-files/./env.yml", Body: map[string]any{"content": "K: v\n"}, Want: 400,
				InMsg: `"." segment`},
			{Name: "a path with a backslash", Path: mxARepo + "/secret-files/prod%5Cenv.yml", Body: map[string]any{"content": "K: v\n"}, Want: 400,
				InMsg: "backslash"},
			{Name: "a path with a newline", Path: mxARepo + "/secret-files/a%0Ab.yml", Body: map[string]any{"content": "K: v\n"}, Want: 400,
				InMsg: "control character"},
			{Name: "no content", Body: map[string]any{}, Want: 422},
			{Name: "content as an object", Body: map[string]any{"content": map[string]string{"a": "b"}}, Want: 400},
			{Name: "over 256 KiB", Path: mxARepo + "/secret-files/big.env", Body: map[string]any{"content": mxLong(256<<10 + 1)}, Want: 413},
			{Name: "an ordinary repo", Path: mxAPriv + "/secret-files/env.yml", Body: map[string]any{"content": "K: v\n"}, Want: 404},
		}},
	{Method: "DELETE", Path: mxARepo + "/secret-files/env.yml", Setup: mxSecretRepoVars,
		Cases: []mxBad{
			{Name: "no such file", Path: mxARepo + "/secret-files/nope.yml", Want: 404},
			{Name: "an ordinary repo", Path: mxAPriv + "/secret-files/env.yml", Want: 404},
		}},
	{Method: "PUT", Path: mxAPriv + "/webhooks/publish", JSON: true,
		Valid: map[string]any{"url": "http://127.0.0.1:9/hook"},
		Cases: []mxBad{
			{Name: "no url", Body: map[string]any{}, Want: 422},
			{Name: "not http", Body: map[string]any{"url": "ftp://127.0.0.1/x"}, Want: 422},
			{Name: "url of 2049 characters", Body: map[string]any{"url": "http://127.0.0.1/" + mxLong(2032)}, Want: 422},
			{Name: "secret too short", Body: map[string]any{"url": "http://127.0.0.1:9/hook", "secret": "short"}, Want: 422},
			{Name: "unknown field", Body: map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"x"}}, Want: 400},
			{Name: "url not a string", Body: map[string]any{"url": 7}, Want: 400},
		}},
	{Method: "DELETE", Path: mxAPriv + "/webhooks/publish",
		Cases: []mxBad{{Name: "no such repo", Path: "/api/v1/repos/" + mxOrgA + "/" + mxGhostRepo + "/webhooks/publish", Want: 404}}},
	{Method: "POST", Path: mxAPub + "/forks", JSON: true,
		Valid: map[string]any{"org": mxOrgA, "name": "fork-fine"},
		Cases: []mxBad{
			{Name: "no org", Body: map[string]any{"name": "f1"}, Want: 422, Field: "org"},
			{Name: "a team nobody has", Body: map[string]any{"org": mxGhostOrg}, Want: 422, Field: "org"},
			{Name: "a team the caller is not in", Body: map[string]any{"org": mxOrgB, "name": "f2"}, Want: 422, Field: "org"},
			{Name: "a bad name", Body: map[string]any{"org": mxOrgA, "name": "-bad"}, Want: 422, Field: "name"},
			{Name: "the source's own name in its own team", Body: map[string]any{"org": mxOrgA}, Want: 409},
			{Name: "org not a string", Body: map[string]any{"org": 7}, Want: 400},
			{Name: "no such repo", Path: "/api/v1/repos/" + mxOrgA + "/" + mxGhostRepo + "/forks", Body: map[string]any{"org": mxOrgA}, Want: 404},
		}},
	{Method: "POST", Path: mxAPriv + "/deploy-tokens", JSON: true,
		Valid: map[string]any{"name": "fine"},
		Cases: []mxBad{
			{Name: "empty name", Body: map[string]any{"name": ""}, Want: 422},
			{Name: "name of 101 characters", Body: map[string]any{"name": mxLong(101)}, Want: 422},
			{Name: "expiry in the past", Body: map[string]any{"name": "x", "expires_at": "2001-01-01T00:00:00Z"}, Want: 422},
			{Name: "expiry not a time", Body: map[string]any{"name": "x", "expires_at": "soon"}, Want: 400},
			{Name: "scopes are not settable", Body: map[string]any{"name": "x", "scopes": []string{"repo:write"}}, Want: 400},
		}},
	{Method: "DELETE", Path: mxAPriv + "/deploy-tokens/{id}",
		Setup: func(w *mxWorld, v map[string]string) {
			t, err := w.app.Repos.CreateDeployToken(w.ctx, w.privA, w.users["owner"].ID, "revoked", nil)
			if err != nil {
				w.t.Fatal(err)
			}
			if err := w.app.Repos.RevokeDeployToken(w.ctx, w.privA.ID, t.ID); err != nil {
				w.t.Fatal(err)
			}
			v["id"] = fmt.Sprint(t.ID)
			live, err := w.app.Repos.CreateDeployToken(w.ctx, w.privA, w.users["owner"].ID, "live", nil)
			if err != nil {
				w.t.Fatal(err)
			}
			v["live"] = fmt.Sprint(live.ID)
		},
		Cases: []mxBad{
			{Name: "not a number", Path: mxAPriv + "/deploy-tokens/x1", Want: 404},
			{Name: "no such token", Path: mxAPriv + "/deploy-tokens/987654", Want: 404},
			{Name: "already revoked: a no-op", Path: mxAPriv + "/deploy-tokens/{id}", Want: 204},
			{Name: "another repo's token", Path: mxAPub + "/deploy-tokens/{live}", Want: 404},
		}},
	{Method: "POST", Path: mxAPriv + "/buttons/press", JSON: true,
		Valid: map[string]any{"button": "Run"},
		Cases: []mxBad{
			{Name: "no button", Body: map[string]any{}, Want: 422},
			{Name: "no such button", Body: map[string]any{"button": "Nope"}, Want: 404},
			{Name: "not one of the options", Body: map[string]any{"button": "Run", "inputs": map[string]string{"MODE": "slow"}}, Want: 422},
			{Name: "an input the button lacks", Body: map[string]any{"button": "Run", "inputs": map[string]string{"OTHER": "x"}}, Want: 422},
			{Name: "input as a number", Body: map[string]any{"button": "Run", "inputs": map[string]any{"MODE": 1}}, Want: 400},
			{Name: "no such branch", Body: map[string]any{"button": "Run", "branch": "nope"}, Want: 422},
			{Name: "unknown field", Body: map[string]any{"button": "Run", "input": map[string]string{}}, Want: 400},
		}},
	{Method: "GET", Path: mxAPriv + "/pulls/1/files",
		Cases: []mxBad{
			{Name: "no such request", Path: mxAPriv + "/pulls/987654/files", Want: 404},
			{Name: "not a number", Path: mxAPriv + "/pulls/x/commits", Want: 404},
			{Name: "metrics of no such request", Path: mxAPriv + "/pulls/987654/metrics", Want: 404},
		}},
	{Method: "POST", Path: mxAPriv + "/pulls/{n}/approve-run",
		Cases: []mxBad{
			{Name: "no such request", Path: mxAPriv + "/pulls/987654/approve-run", Want: 404},
			{Name: "not a number", Path: mxAPriv + "/pulls/x/approve-run", Want: 404},
			{Name: "a request that does not wait", Path: mxAPriv + "/pulls/1/approve-run", Want: 409},
		}},
	{Method: "POST", Path: mxAPriv + "/pulls", JSON: true,
		Valid: map[string]any{"source_branch": "nope", "title": "t"},
		Setup: func(w *mxWorld, v map[string]string) { v["branch"] = w.freshBranch(mxPrivA) },
		Cases: []mxBad{
			{Name: "no such source", Body: map[string]any{"source_branch": "nope", "title": "t"}, Want: 422, Field: "source_branch"},
			{Name: "no such target", Body: map[string]any{"source_branch": "main", "target_branch": "nope", "title": "t"}, Want: 422, Field: "target_branch"},
			{Name: "the same branch twice", Body: map[string]any{"source_branch": "main", "target_branch": "main", "title": "t"}, Want: 422},
			{Name: "source as an option", Body: map[string]any{"source_branch": "--upload-pack=x", "title": "t"}, Want: 422},
			{Name: "source as a full ref", Body: map[string]any{"source_branch": "refs/heads/main", "title": "t"}, Want: 422},
			{Name: "source path traversal", Body: map[string]any{"source_branch": "../../main", "title": "t"}, Want: 422},
			{Name: "source_repo not org/name", Body: `{"source_repo": "nofork", "source_branch": "{branch}", "title": "t"}`, Want: 422, Field: "source_repo"},
			{Name: "source_repo nobody has", Body: `{"source_repo": "` + mxOrgA + `/` + mxGhostRepo + `", "source_branch": "{branch}", "title": "t"}`, Want: 422, Field: "source_repo"},
			{Name: "source_repo not a fork of it", Body: `{"source_repo": "` + mxOrgA + `/` + mxPubA + `", "source_branch": "{branch}", "title": "t"}`, Want: 422, Field: "source_repo"},
			{Name: "no title", Body: `{"source_branch": "{branch}", "title": " "}`, Want: 422, Field: "title"},
			{Name: "a two-line title", Body: `{"source_branch": "{branch}", "title": "a\nb"}`, Want: 422, Field: "title"},
			{Name: "a title of 257 characters", Body: `{"source_branch": "{branch}", "title": "` + mxLong(257) + `"}`, Want: 422, Field: "title"},
			{Name: "a description over 64 KiB", Body: `{"source_branch": "{branch}", "title": "t", "body": "` + mxLong(64<<10+1) + `"}`, Want: 422, Field: "body"},
			{Name: "title as a number", Body: `{"source_branch": "{branch}", "title": 7}`, Want: 400},
			{Name: "a second request for the same branches", Body: `{"source_branch": "{open}", "title": "t"}`, Want: 409,
				Setup: func(w *mxWorld, v map[string]string) {
					pr, err := w.app.Pulls.Get(w.ctx, w.privA, 1)
					if err != nil {
						w.t.Fatal(err)
					}
					v["open"] = pr.SourceBranch
				}},
			{Name: "no such repo", Path: "/api/v1/repos/" + mxOrgA + "/" + mxGhostRepo + "/pulls", Body: map[string]any{"source_branch": "x", "title": "t"}, Want: 404},
		}},
	{Method: "PATCH", Path: mxAPriv + "/pulls/1", JSON: true,
		Valid: map[string]any{"title": "t"},
		Cases: []mxBad{
			{Name: "an empty title", Body: map[string]any{"title": ""}, Want: 422, Field: "title"},
			{Name: "a two-line title", Body: map[string]any{"title": "a\nb"}, Want: 422, Field: "title"},
			{Name: "state merged", Body: map[string]any{"state": "merged"}, Want: 422, Field: "state"},
			{Name: "an unknown state", Body: map[string]any{"state": "draft"}, Want: 422, Field: "state"},
			{Name: "state as a bool", Body: map[string]any{"state": true}, Want: 400},
			{Name: "no such request", Path: mxAPriv + "/pulls/999", Body: map[string]any{"title": "t"}, Want: 404},
			{Name: "a number that is not one", Path: mxAPriv + "/pulls/x", Body: map[string]any{"title": "t"}, Want: 404},
			{Name: "a negative number", Path: mxAPriv + "/pulls/-1", Body: map[string]any{"title": "t"}, Want: 404},
		}},
	{Method: "PUT", Path: mxAPriv + "/branch-rules", JSON: true,
		Valid: map[string]any{"pattern": "hotfix/*"},
		Cases: []mxBad{
			{Name: "no pattern", Body: map[string]any{"required_approvals": 1}, Want: 422, Field: "pattern"},
			{Name: "a full ref", Body: map[string]any{"pattern": "refs/heads/main"}, Want: 422, Field: "pattern"},
			{Name: "a broken glob", Body: map[string]any{"pattern": "release/["}, Want: 422, Field: "pattern"},
			{Name: "a pattern with a newline", Body: map[string]any{"pattern": "a\nb"}, Want: 422, Field: "pattern"},
			{Name: "a reporter may push", Body: map[string]any{"pattern": "x", "push_roles": []string{"reporter"}}, Want: 422, Field: "push_roles"},
			{Name: "an unknown role", Body: map[string]any{"pattern": "x", "push_roles": []string{"god"}}, Want: 422, Field: "push_roles"},
			{Name: "11 approvals", Body: map[string]any{"pattern": "x", "required_approvals": 11}, Want: 422, Field: "required_approvals"},
			{Name: "negative approvals", Body: map[string]any{"pattern": "x", "required_approvals": -1}, Want: 422, Field: "required_approvals"},
			{Name: "approvals as a string", Body: map[string]any{"pattern": "x", "required_approvals": "1"}, Want: 400},
			{Name: "an empty check", Body: map[string]any{"pattern": "x", "required_checks": []string{""}}, Want: 422, Field: "required_checks"},
			{Name: "roles as a string", Body: map[string]any{"pattern": "x", "push_roles": "owner"}, Want: 400},
			{Name: "a developer", As: "developer", Body: map[string]any{"pattern": "x"}, Want: 403},
		}},
	{Method: "DELETE", Path: mxAPriv + "/branch-rules/999",
		Cases: []mxBad{
			{Name: "no such rule", Want: 404},
			{Name: "not a number", Path: mxAPriv + "/branch-rules/x", Want: 404},
		}},
	{Method: "POST", Path: mxAPriv + "/pulls/1/reviews", JSON: true,
		Valid: map[string]any{"state": "comment", "body": "fine"},
		Cases: []mxBad{
			{Name: "an unknown state", Body: map[string]any{"state": "lgtm"}, Want: 422, Field: "state"},
			{Name: "the author approves", Body: map[string]any{"state": "approve"}, Want: 422, Field: "state"},
			{Name: "changes without a body", Body: map[string]any{"state": "request_changes"}, Want: 422, Field: "body"},
			{Name: "a comment without a body", Body: map[string]any{"state": "comment", "body": "  "}, Want: 422, Field: "body"},
			{Name: "a body over 64 KiB", Body: map[string]any{"state": "comment", "body": mxLong(64<<10 + 1)}, Want: 422, Field: "body"},
			{Name: "state as a number", Body: map[string]any{"state": 1}, Want: 400},
			{Name: "no such request", Path: mxAPriv + "/pulls/999/reviews", Body: map[string]any{"state": "comment", "body": "x"}, Want: 404},
			{Name: "a reporter", As: "reporter", Body: map[string]any{"state": "approve"}, Want: 403},
		}},
	{Method: "POST", Path: mxAPriv + "/pulls/1/reviewers", JSON: true,
		Valid: map[string]any{"add": []string{"admin"}},
		Cases: []mxBad{
			{Name: "an unknown user", Body: map[string]any{"add": []string{"nobody-here"}}, Want: 422, Field: "add"},
			{Name: "a reporter, who cannot approve", Body: map[string]any{"add": []string{"reporter"}}, Want: 422, Field: "add"},
			{Name: "the author", Body: map[string]any{"add": []string{"owner"}}, Want: 422, Field: "add"},
			{Name: "pick 11", Body: map[string]any{"pick": 11}, Want: 422, Field: "pick"},
			{Name: "a negative pick", Body: map[string]any{"pick": -1}, Want: 422, Field: "pick"},
			{Name: "add as a string", Body: map[string]any{"add": "admin"}, Want: 400},
			{Name: "an unknown field", Body: map[string]any{"assignees": []string{"admin"}}, Want: 400},
			{Name: "no such request", Path: mxAPriv + "/pulls/999/reviewers", Body: map[string]any{"add": []string{"admin"}}, Want: 404},
		}},
	{Method: "POST", Path: mxAPriv + "/pulls/1/comments", JSON: true,
		Valid: map[string]any{"body": "fine"},
		Cases: []mxBad{
			{Name: "no body", Body: map[string]any{"body": " "}, Want: 422, Field: "body"},
			{Name: "a body over 64 KiB", Body: map[string]any{"body": mxLong(64<<10 + 1)}, Want: 422, Field: "body"},
			{Name: "a line without a file", Body: map[string]any{"body": "x", "line": 3}, Want: 422, Field: "path"},
			{Name: "a file without a line", Body: map[string]any{"body": "x", "path": "README.md"}, Want: 422, Field: "line"},
			{Name: "a negative line", Body: map[string]any{"body": "x", "path": "README.md", "line": -1}, Want: 422, Field: "line"},
			{Name: "a file the request does not change", Body: map[string]any{"body": "x", "path": "no/such/file", "line": 1}, Want: 422, Field: "path"},
			{Name: "a path with a newline", Body: map[string]any{"body": "x", "path": "a\nb", "line": 1}, Want: 422, Field: "path"},
			{Name: "line as a string", Body: map[string]any{"body": "x", "path": "a", "line": "1"}, Want: 400},
			{Name: "an unknown field", Body: map[string]any{"body": "x", "side": "left"}, Want: 400},
			{Name: "no such request", Path: mxAPriv + "/pulls/999/comments", Body: map[string]any{"body": "x"}, Want: 404},
		}},
	{Method: "POST", Path: mxAPriv + "/statuses/{sha}", JSON: true,
		Valid: map[string]any{"state": "success", "context": "eval"},
		Setup: func(w *mxWorld, v map[string]string) {
			sha, err := git.ResolveRef(w.ctx, w.app.Repos.Path(w.privA), "refs/heads/main")
			if err != nil {
				w.t.Fatal(err)
			}
			v["sha"] = sha
		},
		Cases: []mxBad{
			{Name: "no state", Body: map[string]any{"context": "eval"}, Want: 422, Field: "state"},
			{Name: "an unknown state", Body: map[string]any{"state": "green"}, Want: 422, Field: "state"},
			{Name: "a two-line context", Body: map[string]any{"state": "success", "context": "a\nb"}, Want: 422, Field: "context"},
			{Name: "a context of 256 bytes", Body: map[string]any{"state": "success", "context": mxLong(256)}, Want: 422, Field: "context"},
			{Name: "a javascript URL", Body: map[string]any{"state": "success", "target_url": "javascript:alert(1)"}, Want: 422, Field: "target_url"},
			{Name: "a description over 1 KiB", Body: map[string]any{"state": "success", "description": mxLong(1025)}, Want: 422, Field: "description"},
			{Name: "state as a number", Body: map[string]any{"state": 1}, Want: 400},
			{Name: "an unknown field", Body: map[string]any{"state": "success", "url": "x"}, Want: 400},
			{Name: "a short SHA", Path: mxAPriv + "/statuses/abc123", Body: map[string]any{"state": "success"}, Want: 404},
			{Name: "an unknown commit", Path: mxAPriv + "/statuses/" + strings.Repeat("ab", 20), Body: map[string]any{"state": "success"}, Want: 404},
			{Name: "a reporter", As: "reporter", Body: map[string]any{"state": "success"}, Want: 403},
		}},
	{Method: "POST", Path: mxAPriv + "/deployments", JSON: true,
		Valid: map[string]any{"tag": "v1", "environment": "staging"},
		Cases: []mxBad{
			{Name: "no tag", Body: map[string]any{"environment": "staging"}, Want: 422, Field: "tag"},
			{Name: "no environment", Body: map[string]any{"tag": "v1"}, Want: 422, Field: "environment"},
			{Name: "no such tag", Body: map[string]any{"tag": "v9", "environment": "staging"}, Want: 404},
			{Name: "a tag path traversal", Body: map[string]any{"tag": "../heads/main", "environment": "staging"}, Want: 404},
			{Name: "no such environment", Body: map[string]any{"tag": "v1", "environment": "production"}, Want: 404},
			{Name: "tag as a number", Body: map[string]any{"tag": 1, "environment": "staging"}, Want: 400},
			{Name: "an unknown field", Body: map[string]any{"tag": "v1", "environment": "staging", "inputs": map[string]string{}}, Want: 400},
			{Name: "a reporter", As: "reporter", Body: map[string]any{"tag": "v1", "environment": "staging"}, Want: 403},
		}},
	{Method: "PUT", Path: mxAPriv + "/pull-settings", JSON: true,
		Valid: map[string]any{"allow_merge": true},
		Cases: []mxBad{
			{Name: "no mode left", Body: map[string]any{"allow_merge": false, "allow_squash": false, "allow_rebase": false}, Want: 422, Field: "allow_merge"},
			{Name: "a mode as a string", Body: map[string]any{"allow_merge": "yes"}, Want: 400},
			{Name: "an unknown field", Body: map[string]any{"allow_octopus": true}, Want: 400},
			{Name: "a developer", As: "developer", Body: map[string]any{"allow_merge": true}, Want: 403},
			{Name: "no such repo", Path: "/api/v1/repos/" + mxOrgA + "/" + mxGhostRepo + "/pull-settings", Body: map[string]any{"allow_merge": true}, Want: 404},
		}},
	{Method: "POST", Path: mxAPriv + "/pulls/1/merge", JSON: true,
		Valid: map[string]any{"mode": "merge"},
		Cases: []mxBad{
			{Name: "an unknown mode", Body: map[string]any{"mode": "octopus"}, Want: 422, Field: "mode"},
			{Name: "mode as a number", Body: map[string]any{"mode": 1}, Want: 400},
			{Name: "delete_source_branch as a string", Body: map[string]any{"delete_source_branch": "yes"}, Want: 400},
			{Name: "a NUL in the message", Body: map[string]any{"mode": "merge", "message": "bad\x00nul"}, Want: 400},
			{Name: "a message over 64 KiB", Body: map[string]any{"mode": "merge", "message": strings.Repeat("m", pull.MaxBody+1)}, Want: 422, Field: "message"},
			{Name: "no such request", Path: mxAPriv + "/pulls/999/merge", Body: map[string]any{}, Want: 404},
			{Name: "a merged request", Path: mxAPriv + "/pulls/{merged}/merge", Body: map[string]any{}, Want: 409,
				Setup: func(w *mxWorld, v map[string]string) {
					n := w.openPull(mxPrivA)
					owner := w.users["owner"]
					if _, err := w.app.Pulls.Merge(w.ctx, w.privA, n, pull.Person{ID: owner.ID, Name: owner.Name, Email: owner.Email}, pull.MergeInput{}); err != nil {
						w.t.Fatal(err)
					}
					v["merged"] = fmt.Sprint(n)
				}},
		}},
	{Method: "POST", Path: mxAPriv + "/builds", JSON: true,
		Valid: map[string]any{"branch": "main", "event": "web_trigger"},
		Cases: []mxBad{
			{Name: "not a manual event", Body: map[string]any{"branch": "main", "event": "push"}, Want: 422},
			{Name: "manual prefix without a name", Body: map[string]any{"branch": "main", "event": "web_trigger_"}, Want: 422},
			{Name: "an event the file does not declare", Body: map[string]any{"branch": "main", "event": "api_trigger"}, Want: 422},
			{Name: "no such branch", Body: map[string]any{"branch": "nope", "event": "web_trigger"}, Want: 422},
			{Name: "branch path traversal", Body: map[string]any{"branch": "../../main", "event": "web_trigger"}, Want: 422},
			{Name: "branch as an option", Body: map[string]any{"branch": "--upload-pack=x", "event": "web_trigger"}, Want: 422},
			{Name: "env name starting with a digit", Body: map[string]any{"branch": "main", "env": map[string]string{"1X": "y"}}, Want: 422},
			{Name: "env name with a dash", Body: map[string]any{"branch": "main", "env": map[string]string{"A-B": "y"}}, Want: 422},
			{Name: "built-in env", Body: map[string]any{"branch": "main", "env": map[string]string{"CNB_BRANCH": "evil"}}, Want: 422},
			{Name: "empty env name", Body: map[string]any{"branch": "main", "env": map[string]string{"": "y"}}, Want: 422},
			{Name: "env value as a number", Body: map[string]any{"branch": "main", "env": map[string]any{"X": 1}}, Want: 400},
			{Name: "env as a list", Body: map[string]any{"branch": "main", "env": []string{"X=1"}}, Want: 400},
			{Name: "no such repo", Path: "/api/v1/repos/" + mxOrgA + "/" + mxGhostRepo + "/builds", Body: map[string]any{"branch": "main"}, Want: 404},
		}},
	{Method: "POST", Path: mxAPriv + "/workspaces", JSON: true,
		Valid: map[string]any{"branch": "main"},
		Cases: []mxBad{
			{Name: "no such branch", Body: map[string]any{"branch": "nope"}, Want: 422},
			{Name: "branch path traversal", Body: map[string]any{"branch": "../../main"}, Want: 422},
			{Name: "branch as an option", Body: map[string]any{"branch": "--upload-pack=x"}, Want: 422},
			{Name: "branch as a number", Body: map[string]any{"branch": 7}, Want: 400},
			{Name: "an unknown field", Body: map[string]any{"branch": "main", "event": "push"}, Want: 400},
			{Name: "no such repo", Path: "/api/v1/repos/" + mxOrgA + "/" + mxGhostRepo + "/workspaces", Body: map[string]any{"branch": "main"}, Want: 404},
		}},
}

// Build controls and the agent API. Agent calls go as the first agent ("agent-token"), on its
// lease of build #1 of A's private repo; none of these may move that pipeline.

var mxBuildNumbers = []mxBad{
	{Name: "not a number", Path: mxAPriv + "/builds/abc/{verb}", Want: 404},
	{Name: "zero", Path: mxAPriv + "/builds/0/{verb}", Want: 404},
	{Name: "negative", Path: mxAPriv + "/builds/-1/{verb}", Want: 404},
	{Name: "beyond int64", Path: mxAPriv + "/builds/99999999999999999999/{verb}", Want: 404},
	{Name: "no such build", Path: mxAPriv + "/builds/987654/{verb}", Want: 404},
	{Name: "no such repo", Path: "/api/v1/repos/" + mxOrgA + "/" + mxGhostRepo + "/builds/1/{verb}", Want: 404},
}

var mxBadAgentEndpoints = []mxBadEndpoint{
	{Method: "POST", Path: mxAPriv + "/builds/{n}/cancel", Setup: func(w *mxWorld, v map[string]string) { v["verb"] = "cancel" },
		Cases: mxBuildNumbers},
	{Method: "POST", Path: mxAPriv + "/builds/{n}/rerun", Setup: func(w *mxWorld, v map[string]string) { v["verb"] = "rerun" },
		Cases: append([]mxBad{{Name: "failed is not a boolean", Path: mxAPriv + "/builds/1/rerun?failed=maybe", Want: 422}}, mxBuildNumbers...)},
	{Method: "POST", Path: mxAPriv + "/builds/{n}/rerun-exact", Setup: func(w *mxWorld, v map[string]string) { v["verb"] = "rerun-exact" },
		Cases: mxBuildNumbers},
	{Method: "POST", Path: "/api/v1/agent/register", JSON: true, As: "registration",
		Valid: map[string]any{"name": "a", "tags": []string{"cnb:arch:amd64"}, "cpus": 4, "concurrency": 1},
		Cases: []mxBad{
			{Name: "no tags", Body: map[string]any{"name": "a", "cpus": 4, "concurrency": 1}, Want: 422},
			{Name: "tags that name no runner class", Body: map[string]any{"name": "a", "tags": []string{"gpu:imaginary"}, "cpus": 4, "concurrency": 1}, Want: 422},
			{Name: "no cpus", Body: map[string]any{"name": "a", "tags": []string{"cnb:arch:amd64"}, "cpus": 0, "concurrency": 1}, Want: 422},
			{Name: "no concurrency", Body: map[string]any{"name": "a", "tags": []string{"cnb:arch:amd64"}, "cpus": 4, "concurrency": 0}, Want: 422},
			{Name: "name of 201 characters", Body: map[string]any{"name": mxLong(201), "tags": []string{"cnb:arch:amd64"}, "cpus": 4, "concurrency": 1}, Want: 422},
			{Name: "cpus as a string", Body: map[string]any{"name": "a", "tags": []string{"cnb:arch:amd64"}, "cpus": "4", "concurrency": 1}, Want: 400},
			{Name: "tags as a string", Body: map[string]any{"name": "a", "tags": "cnb:arch:amd64", "cpus": 4, "concurrency": 1}, Want: 400},
			{Name: "valid, without the registration token", As: "anon", Body: map[string]any{"name": "a", "tags": []string{"cnb:arch:amd64"}, "cpus": 4, "concurrency": 1}, Want: 401},
		}},
	// The facts of a registered agent: the checks of registration.
	{Method: "POST", Path: "/api/v1/agent/facts", JSON: true, As: "agent-token",
		Valid: mxAgentRegistration("matrix-agent"),
		Cases: []mxBad{
			{Name: "no tags", Body: map[string]any{"name": "matrix-agent", "tags": []string{}, "cpus": 4, "concurrency": 1}, Want: 422},
			{Name: "no class named", Body: map[string]any{"name": "matrix-agent", "tags": []string{"nowhere"}, "cpus": 4, "concurrency": 1}, Want: 422, Field: "tags"},
			{Name: "no cpus", Body: map[string]any{"name": "matrix-agent", "tags": []string{"cnb:arch:amd64"}, "cpus": 0, "concurrency": 1}, Want: 422},
			{Name: "cpus as a string", Body: map[string]any{"name": "matrix-agent", "tags": []string{"cnb:arch:amd64"}, "cpus": "4", "concurrency": 1}, Want: 400},
			{Name: "without the agent token", As: "anon", Body: mxAgentRegistration("matrix-agent"), Want: 401},
		}},
	// Only input that fails before the long-poll: a poll that is accepted waits for work.
	{Method: "POST", Path: "/api/v1/agent/poll", JSON: true, As: "agent-token",
		Valid: map[string]any{"freeCpus": 64},
		Cases: []mxBad{
			{Name: "freeCpus as a string", Body: map[string]any{"freeCpus": "64"}, Want: 400},
			{Name: "running as a string", Body: map[string]any{"freeCpus": 64, "running": "lease_x"}, Want: 400},
			{Name: "freeGpus as numbers", Body: map[string]any{"freeCpus": 64, "freeGpus": []int{0}}, Want: 400},
		}},
	// Only input that fails before the long-poll, as for poll.
	{Method: "POST", Path: "/api/v1/agent/control", JSON: true, As: "agent-token",
		Valid: map[string]any{"running": []string{"lease_x"}},
		Cases: []mxBad{
			{Name: "running as a string", Body: map[string]any{"running": "lease_x"}, Want: 400},
			{Name: "running as numbers", Body: map[string]any{"running": []int{1}}, Want: 400},
		}},
	{Method: "POST", Path: "/api/v1/agent/deregister", As: "agent-token",
		Cases: []mxBad{
			{Name: "without the agent token", As: "anon", Want: 401},
		}},
	{Method: "POST", Path: "/api/v1/agent/leases/{lease}/renew", As: "agent-token",
		Cases: []mxBad{
			{Name: "no such lease", Path: "/api/v1/agent/leases/lease_nope/renew", Want: 409},
			{Name: "another agent's lease", Path: "/api/v1/agent/leases/{other}/renew", Want: 409},
		}},
	{Method: "POST", Path: "/api/v1/agent/leases/{lease}/imports", JSON: true, As: "agent-token",
		Valid: map[string]any{"url": "https://cnb.cool/nobody/nothing/-/blob/main/env.yml", "kind": "imports"},
		Cases: []mxBad{
			{Name: "unknown kind", Body: map[string]any{"url": "https://cnb.cool/a/b/-/blob/main/env.yml", "kind": "secrets"}, Want: 422},
			{Name: "not a file URL", Body: map[string]any{"url": "./env.yml", "kind": "imports"}, Want: 400},
			// The file's path follows the path rule; these reached git, whose refusal was a 500.
			{Name: "a path starting with /", Body: map[string]any{"url": "https://cnb.cool/" + mxOrgA + "/" + mxPrivA + "/-/blob/main//etc/x.yml",
				"kind": "imports"}, Want: 400, InMsg: `path "/etc/x.yml" starts with "/"`},
			{Name: "a path with ..", Body: map[string]any{"url": "https://cnb.cool/" + mxOrgA + "/" + mxPrivA + "/-/blob/main/../x.yml",
				"kind": "imports"}, Want: 400, InMsg: `".." segment`},
			{Name: "a ref git refuses", Body: map[string]any{"url": "https://cnb.cool/" + mxOrgA + "/" + mxPrivA + "/-/blob/--output=x/env.yml",
				"kind": "imports"}, Want: 404},
			{Name: "url as a number", Body: map[string]any{"url": 1, "kind": "imports"}, Want: 400},
			{Name: "no such repo", Body: map[string]any{"url": "https://cnb.cool/nobody/nothing/-/blob/main/env.yml", "kind": "imports"}, Want: 404},
			{Name: "another agent's lease", Path: "/api/v1/agent/leases/{other}/imports", Body: map[string]any{"url": "https://cnb.cool/a/b/-/blob/main/env.yml", "kind": "imports"}, Want: 409},
		}},
	{Method: "PUT", Path: "/api/v1/repos/" + mxOrgA + "/" + mxPrivA + "/releases/v1", JSON: true, As: "owner-token",
		Valid: map[string]any{"title": "v1", "notes": "n", "overlying": true},
		Cases: []mxBad{
			{Name: "unknown field", Body: map[string]any{"titel": "v1"}, Want: 400},
			{Name: "title as a number", Body: map[string]any{"title": 1}, Want: 400},
			{Name: "title too long", Body: map[string]any{"title": strings.Repeat("t", 501), "overlying": true}, Want: 422},
			{Name: "not a tag", Path: "/api/v1/repos/" + mxOrgA + "/" + mxPrivA + "/releases/v9", Body: map[string]any{"title": "x"}, Want: 422},
			{Name: "tag that is no name", Path: "/api/v1/repos/" + mxOrgA + "/" + mxPrivA + "/releases/..", Body: map[string]any{"title": "x"}, Want: 400,
				InMsg: `".." segment`},
			{Name: "tag outside the alphabet", Path: "/api/v1/repos/" + mxOrgA + "/" + mxPrivA + "/releases/-v1", Body: map[string]any{"title": "x"}, Want: 422},
		}},
	{Method: "PUT", Path: "/api/v1/repos/" + mxOrgA + "/" + mxPrivA + "/releases/v1/files/weights.bin", As: "owner-token",
		Cases: []mxBad{
			{Name: "no such release", Path: "/api/v1/repos/" + mxOrgA + "/" + mxPrivA + "/releases/v9/files/weights.bin", Body: mxWeights, Want: 404},
			{Name: "hidden file", Path: "/api/v1/repos/" + mxOrgA + "/" + mxPrivA + "/releases/v1/files/.hidden", Body: mxWeights, Want: 422},
			{Name: "file name ..", Path: "/api/v1/repos/" + mxOrgA + "/" + mxPrivA + "/releases/v1/files/..", Body: mxWeights, Want: 400,
				InMsg: `".." segment`},
			{Name: "file name with a backslash", Path: "/api/v1/repos/" + mxOrgA + "/" + mxPrivA + "/releases/v1/files/a%5Cb", Body: mxWeights, Want: 400,
				InMsg: "backslash"},
		}},
	{Method: "DELETE", Path: "/api/v1/repos/" + mxOrgA + "/" + mxPrivA + "/releases/v1", As: "owner-token",
		Cases: []mxBad{
			{Name: "no such release", Path: "/api/v1/repos/" + mxOrgA + "/" + mxPrivA + "/releases/v9", Want: 404},
		}},
	{Method: "POST", Path: "/api/v1/agent/leases/{lease}/builds", JSON: true, As: "agent-token",
		Valid: map[string]any{"kind": "trigger", "slug": "nobody/nothing", "token": "nbp_nope", "event": "api_trigger"},
		Cases: []mxBad{
			{Name: "unknown kind", Body: map[string]any{"kind": "fork", "event": "api_trigger"}, Want: 422},
			{Name: "apply of a push event", Body: map[string]any{"kind": "apply", "event": "push"}, Want: 422},
			{Name: "apply of an event the file lacks", Body: map[string]any{"kind": "apply", "event": "api_trigger_nope"}, Want: 422},
			{Name: "apply from a broken config", Body: map[string]any{"kind": "apply", "event": "api_trigger", "config": "main: [unclosed"}, Want: 422},
			{Name: "trigger without a token", Body: map[string]any{"kind": "trigger", "slug": "a/b", "event": "api_trigger"}, Want: 422},
			{Name: "trigger with a bad token", Body: map[string]any{"kind": "trigger", "slug": "a/b", "token": "nbp_nope", "event": "api_trigger"}, Want: 403},
			{Name: "env of a built-in", Body: map[string]any{"kind": "apply", "event": "api_trigger", "env": map[string]string{"CNB_BRANCH": "x"}}, Want: 422},
			{Name: "event as a number", Body: map[string]any{"kind": "apply", "event": 1}, Want: 400},
			{Name: "another agent's lease", Path: "/api/v1/agent/leases/{other}/builds", Body: map[string]any{"kind": "apply", "event": "api_trigger"}, Want: 409},
		}},
	{Method: "POST", Path: "/api/v1/agent/leases/{lease}/builds/status", JSON: true, As: "agent-token",
		Valid: map[string]any{"slug": "acme/alpha-weights", "number": 1},
		Cases: []mxBad{
			{Name: "not a child", Body: map[string]any{"slug": "acme/alpha-weights", "number": 1}, Want: 404},
			{Name: "number as a string", Body: map[string]any{"slug": "a/b", "number": "1"}, Want: 400},
		}},
	{Method: "POST", Path: "/api/v1/agent/leases/{lease}/keys/resolve", JSON: true, As: "agent-token",
		Valid: map[string]any{"key": "k", "data": map[string]any{"a": 1}},
		Cases: []mxBad{
			{Name: "no key", Body: map[string]any{"data": map[string]any{}}, Want: 422},
			{Name: "data as a list", Body: map[string]any{"key": "k", "data": []int{1}}, Want: 400},
			{Name: "another agent's lease", Path: "/api/v1/agent/leases/{other}/keys/resolve", Body: map[string]any{"key": "k"}, Want: 409},
		}},
	{Method: "POST", Path: "/api/v1/agent/leases/{lease}/keys/await", JSON: true, As: "agent-token",
		Valid: map[string]any{"key": "k"},
		Cases: []mxBad{
			{Name: "no key", Body: map[string]any{}, Want: 422},
			{Name: "key too long", Body: map[string]any{"key": strings.Repeat("k", 201)}, Want: 422},
		}},
	{Method: "POST", Path: "/api/v1/agent/leases/{lease}/locks", JSON: true, As: "agent-token",
		Valid: map[string]any{"key": "k", "scope": `stage "s"`},
		Cases: []mxBad{
			{Name: "no key", Body: map[string]any{"scope": `stage "s"`}, Want: 422},
			{Name: "no scope", Body: map[string]any{"key": "k"}, Want: 422},
			{Name: "scope of two lines", Body: map[string]any{"key": "k", "scope": "a\nb"}, Want: 422},
			{Name: "key too long", Body: map[string]any{"key": strings.Repeat("k", 501), "scope": "s"}, Want: 422},
			{Name: "expires not a duration", Body: map[string]any{"key": "k", "scope": "s", "expires": "soon"}, Want: 400},
			{Name: "key as a number", Body: map[string]any{"key": 1, "scope": "s"}, Want: 400},
			{Name: "another agent's lease", Path: "/api/v1/agent/leases/{other}/locks", Body: map[string]any{"key": "k", "scope": "s"}, Want: 409},
		}},
	{Method: "POST", Path: "/api/v1/agent/leases/{lease}/locks/release", JSON: true, As: "agent-token",
		Valid: map[string]any{"key": "k", "scope": `stage "s"`},
		Cases: []mxBad{
			{Name: "no key", Body: map[string]any{"scope": "s"}, Want: 422},
			{Name: "another agent's lease", Path: "/api/v1/agent/leases/{other}/locks/release", Body: map[string]any{"key": "k", "scope": "s"}, Want: 409},
		}},
	{Method: "POST", Path: "/api/v1/agent/leases/{lease}/events", JSON: true, As: "agent-token",
		Valid: map[string]any{"kind": "pipeline_started"},
		Cases: []mxBad{
			{Name: "unknown kind", Body: map[string]any{"kind": "exploded"}, Want: 422},
			{Name: "no kind", Body: map[string]any{"jobId": 1}, Want: 422},
			{Name: "job_finished without a status", Body: `{"kind": "job_finished", "jobId": {job}}`, Want: 422},
			{Name: "job_finished with a running status", Body: `{"kind": "job_finished", "jobId": {job}, "status": "running"}`, Want: 422},
			{Name: "job_started of another pipeline's job", Body: `{"kind": "job_started", "jobId": {otherjob}}`, Want: 404},
			{Name: "job_finished of another pipeline's job", Body: `{"kind": "job_finished", "jobId": {otherjob}, "status": "success"}`, Want: 404},
			{Name: "jobId as a string", Body: map[string]any{"kind": "job_started", "jobId": "1"}, Want: 400},
			{Name: "at not a time", Body: map[string]any{"kind": "pipeline_started", "at": "now"}, Want: 400},
			{Name: "another agent's lease", Path: "/api/v1/agent/leases/{other}/events", Body: map[string]any{"kind": "pipeline_started"}, Want: 409},
		}},
	{Method: "POST", Path: "/api/v1/agent/leases/{lease}/jobs/{job}/log", As: "agent-token",
		Cases: []mxBad{
			{Name: "no offset", Path: "/api/v1/agent/leases/{lease}/jobs/{job}/log", Body: "x", Want: 400},
			{Name: "negative offset", Path: "/api/v1/agent/leases/{lease}/jobs/{job}/log?offset=-1", Body: "x", Want: 400},
			{Name: "offset not a number", Path: "/api/v1/agent/leases/{lease}/jobs/{job}/log?offset=x", Body: "x", Want: 400},
			{Name: "job not a number", Path: "/api/v1/agent/leases/{lease}/jobs/x/log?offset=0", Body: "x", Want: 400},
			{Name: "another pipeline's job", Path: "/api/v1/agent/leases/{lease}/jobs/{otherjob}/log?offset=0", Body: "x", Want: 404},
			{Name: "another agent's lease", Path: "/api/v1/agent/leases/{other}/jobs/{otherjob}/log?offset=0", Body: "x", Want: 409},
			{Name: "a chunk over 4 MiB", Path: "/api/v1/agent/leases/{lease}/jobs/{job}/log?offset=0", Body: mxLong(4<<20 + 1), Want: 413},
		}},
	{Method: "POST", Path: "/api/v1/agent/leases/{lease}/finish", JSON: true, As: "agent-token",
		Valid: map[string]any{"status": "failed"},
		Cases: []mxBad{
			{Name: "unknown status", Body: map[string]any{"status": "done"}, Want: 422},
			{Name: "no status", Body: map[string]any{"reason": "x"}, Want: 422},
			{Name: "a running status", Body: map[string]any{"status": "running"}, Want: 422},
			{Name: "terminated is the server's to decide", Body: map[string]any{"status": "terminated"}, Want: 422},
			{Name: "another agent's lease", Path: "/api/v1/agent/leases/{other}/finish", Body: map[string]any{"status": "failed"}, Want: 409},
		}},
}

// mxExpiredInvitation opens an invitation for victim and backdates it past its expiry, and
// another for victim that is still open (someone else's, for the owner).
func mxExpiredInvitation(w *mxWorld, v map[string]string) {
	id := w.invitationFor(w.users["victim"])
	if err := w.app.DB.Model(&org.Invitation{}).Where("id = ?", id).Update("expires_at", time.Now().UTC().Add(-time.Minute)).Error; err != nil {
		w.t.Fatal(err)
	}
	v["expired"] = fmt.Sprint(id)
	v["victims"] = fmt.Sprint(w.invitationFor(w.users["victim"]))
}

func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	mxEachDialect(t, func(t *testing.T, w *mxWorld) {
		mxCheckBadInputCoverage(t, w)
		// Victim needs a session of its own for the cases sent as victim.
		w.byName["victim"] = &mxPrincipal{Name: "victim", User: w.users["victim"], Session: true,
			Cookie: w.users["victim"].Cookie, CSRF: w.users["victim"].CSRF}
		w.byName["registration"] = &mxPrincipal{Name: "registration", Bearer: w.app.RegistrationToken}
		for _, e := range mxBadEndpoints {
			t.Run(e.Method+" "+e.Path, func(t *testing.T) {
				w.t = t
				mxRunBadInput(t, w, e)
			})
		}
	})
}

func mxRunBadInput(t *testing.T, w *mxWorld, e mxBadEndpoint) {
	vars := map[string]string{"lease": w.lease.ID, "other": w.otherLease.ID,
		"job": fmt.Sprint(w.lease.Jobs[0].ID), "otherjob": fmt.Sprint(w.otherLease.Jobs[0].ID)}
	if e.Setup != nil {
		e.Setup(w, vars)
	}
	cases := e.Cases
	if e.JSON {
		cases = append(mxMalformed(t, e.Valid, mxBodyIsClosed(t, w, e.Method, e.Path)), cases...)
	}
	type prepared struct {
		c mxBad
		p *mxPrincipal
		q mxReq
	}
	var calls []prepared
	for _, c := range cases {
		if c.Setup != nil {
			c.Setup(w, vars)
		}
		path := c.Path
		if path == "" {
			path = e.Path
		}
		body := c.Body
		if s, ok := body.(string); ok {
			body = mxExpandAll(s, vars)
		}
		as := c.As
		if as == "" {
			as = e.As
		}
		if as == "" {
			as = "owner"
		}
		p := w.byName[as]
		if p == nil {
			t.Fatalf("no principal %q", as)
		}
		calls = append(calls, prepared{c, p, mxReq{Method: e.Method, Path: mxExpandAll(path, vars), Body: body, Header: c.Header}})
	}
	if len(calls) == 0 {
		t.Fatal("no cases")
	}
	before := w.snapshot()
	for _, k := range calls {
		if strings.Contains(k.q.Path, "{") {
			t.Fatalf("%s: unfilled placeholder in %s", k.c.Name, k.q.Path)
		}
		res := w.send(k.p, k.q)
		who := fmt.Sprintf("%s %s (%s)", k.q.Method, mxShortPath(k.q.Path), k.c.Name)
		if res.Status != k.c.Want {
			t.Errorf("%s: got %d, want %d: %s", who, res.Status, k.c.Want, mxShort(res.Body))
			continue
		}
		if res.Status < 400 {
			continue
		}
		code, msg, ok := res.envelope()
		switch {
		case !ok:
			t.Errorf("%s: %d without the error envelope: %s", who, res.Status, mxShort(res.Body))
		case code != mxCodeFor[res.Status] && mxExtraCodes[code] != res.Status:
			t.Errorf("%s: %d with code %q, want %q", who, res.Status, code, mxCodeFor[res.Status])
		case len(msg) > 1000:
			t.Errorf("%s: the message echoes the input (%d bytes)", who, len(msg))
		case !strings.Contains(msg, k.c.InMsg):
			t.Errorf("%s: message %q does not name %q", who, msg, k.c.InMsg)
		case k.c.Field != "" && mxDetailsField(res) != k.c.Field:
			t.Errorf("%s: details.field = %q, want %q: %s", who, mxDetailsField(res), k.c.Field, mxShort(res.Body))
		}
	}
	if d := before.diff(w.snapshot()); d != "" {
		var names []string
		for _, k := range calls {
			names = append(names, k.c.Name)
		}
		t.Errorf("bad input changed the database (cases: %s):\n%s", strings.Join(names, "; "), d)
	}
}

// mxDetailsField is the details.field of an error envelope ("" when there is none).
func mxDetailsField(r *mxResp) string {
	var env struct {
		Error struct {
			Details struct {
				Field string `json:"field"`
			} `json:"details"`
		} `json:"error"`
	}
	json.Unmarshal(r.Body, &env)
	return env.Error.Details.Field
}

// mxExpandAll fills every {placeholder} of s that vars holds.
func mxExpandAll(s string, vars map[string]string) string {
	for k, v := range vars {
		s = strings.ReplaceAll(s, "{"+k+"}", v)
	}
	return s
}

func mxShortPath(p string) string {
	if len(p) > 100 {
		return p[:100] + "…"
	}
	return p
}

// mxCheckBadInputCoverage fails when a write route under /api/v1 has no entry in
// mxBadEndpoints, or an entry names no route.
func mxCheckBadInputCoverage(t *testing.T, w *mxWorld) {
	t.Helper()
	covered := map[string]bool{}
	for _, e := range mxBadEndpoints {
		rt := mxRouteOf(w, e.Method, mxPlaceholder.ReplaceAllString(e.Path, "1"))
		if rt == "" {
			t.Errorf("bad-input entry %s %s matches no route", e.Method, e.Path)
		}
		covered[rt] = true
	}
	var missing []string
	for _, rt := range w.app.Server.Routes() {
		k := rt.Method + " " + rt.Path
		if mxIsWrite(rt.Method) && strings.HasPrefix(rt.Path, "/api/v1/") && !covered[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("write route %s has no entry in mxBadEndpoints (badinput_test.go): add its bad inputs", m)
	}
	if len(covered) == 0 {
		t.Error("no write routes covered")
	}
}

// Billing. The world has a Stripe webhook secret but no Stripe key: valid top-ups are 409.
// Credit grants go as root, the platform admin, through a session of its own.

func mxRootSession(w *mxWorld, _ map[string]string) {
	w.byName["root"] = &mxPrincipal{Name: "root", User: w.users["root"], Session: true, Cookie: w.users["root"].Cookie,
		CSRF: w.users["root"].CSRF}
}

var mxBadBillingEndpoints = []mxBadEndpoint{
	{Method: "PUT", Path: mxA + "/billing/settings", JSON: true,
		Valid: map[string]any{"spending_cap": "100.00"},
		Cases: []mxBad{
			{Name: "negative cap", Body: map[string]any{"spending_cap": "-1"}, Want: 422},
			{Name: "cap not a number", Body: map[string]any{"spending_cap": "ten"}, Want: 422},
			{Name: "cap with 9 decimals", Body: map[string]any{"spending_cap": "1.000000001"}, Want: 422},
			{Name: "cap with an exponent", Body: map[string]any{"spending_cap": "1e9"}, Want: 422},
			// Amounts are exact decimals with nothing around them: " 1" was a cap of 1.
			{Name: "cap with a leading space", Body: map[string]any{"spending_cap": " 1"}, Want: 422, Field: "spending_cap"},
			{Name: "threshold with a trailing newline", Body: map[string]any{"low_balance_threshold": "5\n"}, Want: 422, Field: "low_balance_threshold"},
			{Name: "cap as a JSON number", Body: map[string]any{"spending_cap": 100}, Want: 400},
			{Name: "threshold as a bool", Body: map[string]any{"low_balance_threshold": true}, Want: 400},
			{Name: "threshold of 11 digits", Body: map[string]any{"low_balance_threshold": "12345678901"}, Want: 422},
			{Name: "webhook not http", Body: map[string]any{"alert_webhook_url": "ftp://example.com/x"}, Want: 422},
			{Name: "webhook without a scheme", Body: map[string]any{"alert_webhook_url": "example.com/hook"}, Want: 422},
			{Name: "webhook on loopback", Body: map[string]any{"alert_webhook_url": "http://127.0.0.1:6379/"}, Want: 422},
			{Name: "webhook on localhost", Body: map[string]any{"alert_webhook_url": "http://localhost/hook"}, Want: 422},
			{Name: "webhook on a link-local address", Body: map[string]any{"alert_webhook_url": "http://169.254.169.254/latest"}, Want: 422},
			{Name: "webhook with a header injection", Body: map[string]any{"alert_webhook_url": "https://example.com/\r\nX: y"}, Want: 422},
			{Name: "webhook of 2049 characters", Body: map[string]any{"alert_webhook_url": "https://example.com/" + mxLong(2029)}, Want: 422},
			{Name: "webhook as a list", Body: map[string]any{"alert_webhook_url": []string{"https://example.com"}}, Want: 400},
			{Name: "reporter", As: "reporter", Body: map[string]any{"spending_cap": "1"}, Want: 403},
			{Name: "no such org", Path: "/api/v1/orgs/" + mxGhostOrg + "/billing/settings", Body: map[string]any{"spending_cap": "1"}, Want: 404},
		}},
	{Method: "POST", Path: mxA + "/billing/topups", JSON: true,
		Valid: map[string]any{"amount": "100.00"},
		Cases: []mxBad{
			{Name: "under the minimum", Body: map[string]any{"amount": "9.99"}, Want: 422},
			{Name: "over the maximum", Body: map[string]any{"amount": "100000.01"}, Want: 422},
			{Name: "a fraction of a fen", Body: map[string]any{"amount": "10.001"}, Want: 422},
			{Name: "negative", Body: map[string]any{"amount": "-100"}, Want: 422},
			{Name: "zero", Body: map[string]any{"amount": "0"}, Want: 422},
			{Name: "not a number", Body: map[string]any{"amount": "lots"}, Want: 422},
			{Name: "amount with a leading space", Body: map[string]any{"amount": " 100.00"}, Want: 422, Field: "amount"},
			{Name: "amount with a trailing tab", Body: map[string]any{"amount": "100.00\t"}, Want: 422, Field: "amount"},
			{Name: "no amount", Body: map[string]any{}, Want: 422},
			{Name: "amount as a JSON number", Body: map[string]any{"amount": 100}, Want: 400},
			{Name: "valid, but no Stripe key", Body: map[string]any{"amount": "100.00"}, Want: 409},
			{Name: "developer", As: "developer", Body: map[string]any{"amount": "100.00"}, Want: 403},
			{Name: "no such org", Path: "/api/v1/orgs/" + mxGhostOrg + "/billing/topups", Body: map[string]any{"amount": "100.00"}, Want: 404},
		}},
	{Method: "POST", Path: "/api/v1/admin/orgs/" + mxOrgA + "/credits", JSON: true, As: "root", Setup: mxRootSession,
		Valid: map[string]any{"amount": "10.00", "note": "welcome"},
		Cases: []mxBad{
			{Name: "zero", Body: map[string]any{"amount": "0"}, Want: 422},
			{Name: "negative", Body: map[string]any{"amount": "-5"}, Want: 422},
			{Name: "not a number", Body: map[string]any{"amount": "ten"}, Want: 422},
			{Name: "beyond 10 digits", Body: map[string]any{"amount": "99999999999"}, Want: 422},
			// " 1" granted 1.00 of credit.
			{Name: "amount with a leading space", Body: map[string]any{"amount": " 1"}, Want: 422, Field: "amount"},
			{Name: "amount with a non-breaking space", Body: map[string]any{"amount": "1\u00a0"}, Want: 422, Field: "amount"},
			{Name: "amount as a JSON number", Body: map[string]any{"amount": 10}, Want: 400},
			{Name: "note of 501 bytes", Body: map[string]any{"amount": "1", "note": mxLong(501)}, Want: 422},
			{Name: "note of two lines", Body: map[string]any{"amount": "1", "note": "a\nb"}, Want: 422},
			{Name: "not a platform admin", As: "owner", Body: map[string]any{"amount": "10.00"}, Want: 403},
			{Name: "no such org", Path: "/api/v1/admin/orgs/" + mxGhostOrg + "/credits", Body: map[string]any{"amount": "10.00"}, Want: 404},
		}},
	{Method: "POST", Path: "/api/v1/admin/registration-tokens", JSON: true, As: "root", Setup: mxRootSession,
		Valid: map[string]any{"name": "gpu hosts"},
		Cases: []mxBad{
			{Name: "no name", Body: map[string]any{}, Want: 422},
			{Name: "blank name", Body: map[string]any{"name": "   "}, Want: 422},
			{Name: "name of 101 characters", Body: map[string]any{"name": mxLong(101)}, Want: 422},
			{Name: "name as a number", Body: map[string]any{"name": 5}, Want: 400},
			{Name: "not a platform admin", As: "owner", Body: map[string]any{"name": "x"}, Want: 403},
		}},
	{Method: "DELETE", Path: "/api/v1/admin/registration-tokens/{id}", As: "root", Setup: mxRootSession,
		Cases: []mxBad{
			{Name: "not a number", Path: "/api/v1/admin/registration-tokens/abc", Want: 404},
			{Name: "negative", Path: "/api/v1/admin/registration-tokens/-1", Want: 404},
			{Name: "beyond int64", Path: "/api/v1/admin/registration-tokens/99999999999999999999", Want: 404},
			{Name: "no such token", Path: "/api/v1/admin/registration-tokens/987654", Want: 404},
		}},
	// Stripe's endpoint: nothing that Stripe did not sign with the webhook secret changes a row.
	{Method: "POST", Path: "/api/v1/billing/stripe/webhook", JSON: true, As: "anon",
		Valid: map[string]any{"id": "evt_bad", "type": "checkout.session.completed"},
		Cases: []mxBad{
			{Name: "a paid session, unsigned", Want: 400, Body: map[string]any{"id": "evt_1", "type": "checkout.session.completed",
				"data": map[string]any{"object": map[string]any{"id": "cs_1", "payment_status": "paid", "amount_total": 100000, "currency": "cny",
					"metadata": map[string]string{"nimbus_account_id": "1"}}}}},
			{Name: "a refund, unsigned", Want: 400, Body: map[string]any{"id": "evt_2", "type": "charge.refunded",
				"data": map[string]any{"object": map[string]any{"id": "ch_1", "amount_refunded": 100}}}},
			{Name: "as the owner", As: "owner", Want: 400, Body: map[string]any{"id": "evt_3", "type": "checkout.session.completed"}},
		}},
}

// Workspaces. {id} is a queued workspace of A's private repo (no agent runs it, so whatever needs
// it ready is a 409), {ended} one stopped before the snapshot, {build} a pipeline that is not a
// workspace. The id is read first (not a positive integer: 404), then a preview's port (not
// 1-65535: 422 naming "port") and restore's body (a missing or empty ref: 422 naming "ref"),
// none of which depends on the workspace; then the caller is authorized (a reader 403, another
// team 404), and only then the workspace's state is looked at. The GET rows (preview, the
// WebSockets) change nothing either.

func mxSetWorkspace(w *mxWorld, v map[string]string) {
	v["id"] = fmt.Sprint(w.openWorkspace(mxPrivA))
	ended := w.openWorkspace(mxPrivA)
	if r := w.do(w.byName["developer-token"], "POST", fmt.Sprintf("/api/v1/workspaces/%d/stop", ended), nil); r.Status != 202 {
		w.t.Fatalf("stop workspace %d: %d %s", ended, r.Status, r.Body)
	}
	v["ended"] = fmt.Sprint(ended)
	v["build"] = fmt.Sprint(w.lease.PipelineID)
}

// mxWorkspaceIDs are the ids of no workspace, for the route /api/v1/workspaces/{id}/{verb}.
var mxWorkspaceIDs = []mxBad{
	{Name: "not a number", Path: "/api/v1/workspaces/abc/{verb}", Want: 404},
	{Name: "zero", Path: "/api/v1/workspaces/0/{verb}", Want: 404},
	{Name: "negative", Path: "/api/v1/workspaces/-1/{verb}", Want: 404},
	{Name: "beyond int64", Path: "/api/v1/workspaces/99999999999999999999/{verb}", Want: 404},
	{Name: "no such workspace", Path: "/api/v1/workspaces/987654/{verb}", Want: 404},
	{Name: "a pipeline that is not a workspace", Path: "/api/v1/workspaces/{build}/{verb}", Want: 404},
}

// mxBadPorts are the ports that are not TCP ports, for /api/v1/workspaces/{id}/preview/{port}{rest}.
var mxBadPorts = []mxBad{
	{Name: "port 0", Path: "/api/v1/workspaces/{id}/preview/0{rest}", Want: 422, Field: "port"},
	{Name: "port 70000", Path: "/api/v1/workspaces/{id}/preview/70000{rest}", Want: 422, Field: "port"},
	{Name: "port -1", Path: "/api/v1/workspaces/{id}/preview/-1{rest}", Want: 422, Field: "port"},
	{Name: "port abc", Path: "/api/v1/workspaces/{id}/preview/abc{rest}", Want: 422, Field: "port"},
	{Name: "port 80.5", Path: "/api/v1/workspaces/{id}/preview/80.5{rest}", Want: 422, Field: "port"},
	{Name: "not a number", Path: "/api/v1/workspaces/abc/preview/8080{rest}", Want: 404},
	{Name: "no such workspace", Path: "/api/v1/workspaces/987654/preview/8080{rest}", Want: 404},
	{Name: "a pipeline that is not a workspace", Path: "/api/v1/workspaces/{build}/preview/8080{rest}", Want: 404},
	{Name: "a reader", As: "reporter", Path: "/api/v1/workspaces/{id}/preview/8080{rest}", Want: 403},
	{Name: "another team", As: "outsider", Path: "/api/v1/workspaces/{id}/preview/8080{rest}", Want: 404},
}

func mxWorkspaceVerb(verb string) func(w *mxWorld, v map[string]string) {
	return func(w *mxWorld, v map[string]string) {
		mxSetWorkspace(w, v)
		v["verb"] = verb
	}
}

func mxPreviewRest(rest string) func(w *mxWorld, v map[string]string) {
	return func(w *mxWorld, v map[string]string) {
		mxSetWorkspace(w, v)
		v["rest"] = rest
	}
}

var mxBadWorkspaceEndpoints = []mxBadEndpoint{
	{Method: "POST", Path: "/api/v1/workspaces/{id}/stop", Setup: mxWorkspaceVerb("stop"),
		Cases: append(slices.Clip(mxWorkspaceIDs),
			mxBad{Name: "already ended", Path: "/api/v1/workspaces/{ended}/stop", Want: 409},
			mxBad{Name: "a reader", As: "reporter", Path: "/api/v1/workspaces/{id}/stop", Want: 403},
			mxBad{Name: "another team", As: "outsider", Path: "/api/v1/workspaces/{id}/stop", Want: 404},
			mxBad{Name: "a body is ignored", Path: "/api/v1/workspaces/{ended}/stop", Body: `{"force": true}`, Want: 409})},
	{Method: "POST", Path: "/api/v1/workspaces/{id}/keepalive", Setup: mxWorkspaceVerb("keepalive"),
		Cases: append(slices.Clip(mxWorkspaceIDs),
			mxBad{Name: "queued: not ready", Path: "/api/v1/workspaces/{id}/keepalive", Want: 409},
			mxBad{Name: "ended: not ready", Path: "/api/v1/workspaces/{ended}/keepalive", Want: 409})},
	{Method: "POST", Path: "/api/v1/workspaces/{id}/restore", JSON: true, Setup: mxWorkspaceVerb("restore"),
		Valid: map[string]any{"ref": "refs/nimbus/workspaces/main/1"},
		Cases: []mxBad{
			{Name: "no ref", Body: map[string]any{}, Want: 422, Field: "ref"},
			{Name: "empty ref", Body: map[string]any{"ref": ""}, Want: 422, Field: "ref"},
			{Name: "ref as a number", Body: map[string]any{"ref": 41}, Want: 400},
			{Name: "ref as a list", Body: map[string]any{"ref": []string{"refs/nimbus/workspaces/main/1"}}, Want: 400},
			{Name: "ref as null", Body: `{"ref": null}`, Want: 422, Field: "ref"},
			{Name: "valid, but queued: not ready", Body: map[string]any{"ref": "refs/nimbus/workspaces/main/1"}, Want: 409},
			{Name: "valid, but ended: not ready", Path: "/api/v1/workspaces/{ended}/restore", Body: map[string]any{"ref": "refs/nimbus/workspaces/main/1"}, Want: 409},
			{Name: "not a number", Path: "/api/v1/workspaces/abc/restore", Body: map[string]any{"ref": "refs/nimbus/workspaces/main/1"}, Want: 404},
			{Name: "no such workspace", Path: "/api/v1/workspaces/987654/restore", Body: map[string]any{"ref": "refs/nimbus/workspaces/main/1"}, Want: 404},
			{Name: "a pipeline that is not a workspace", Path: "/api/v1/workspaces/{build}/restore", Body: map[string]any{"ref": "refs/nimbus/workspaces/main/1"}, Want: 404},
			{Name: "a reader", As: "reporter", Body: map[string]any{"ref": "refs/nimbus/workspaces/main/1"}, Want: 403},
			{Name: "another team", As: "outsider", Body: map[string]any{"ref": "refs/nimbus/workspaces/main/1"}, Want: 404},
		}},
	{Method: "POST", Path: "/api/v1/workspaces/{id}/preview/{port}/token", Setup: mxPreviewRest("/token"),
		Cases: append(slices.Clip(mxBadPorts),
			mxBad{Name: "valid: changes nothing", Path: "/api/v1/workspaces/{id}/preview/8080/token", Want: 200})},
	// Reads, with the same path checks.
	{Method: "POST", Path: mxAPriv + "/schedules/{id}/run",
		Cases: []mxBad{
			{Name: "no such schedule", Path: mxAPriv + "/schedules/999999/run", Want: 404},
			{Name: "not a number", Path: mxAPriv + "/schedules/abc/run", Want: 404},
			{Name: "another repo's schedule", Path: mxAPriv + "/schedules/{id}/run", Want: 404, Setup: func(w *mxWorld, v map[string]string) {
				mxScheduleOf(mxPubA)(w, &mxCall{Vars: v})
			}},
		}},
	{Method: "POST", Path: mxARepo + "/auto-tag",
		Cases: []mxBad{
			{Name: "an empty default branch", Setup: func(w *mxWorld, v map[string]string) { v["repo"] = w.scratchRepo() }, Want: 409},
			{Name: "no such repo", Path: "/api/v1/repos/" + mxOrgA + "/" + mxGhostRepo + "/auto-tag", Want: 404},
		}},
	// Code: refs and paths are checked before git sees them.
	{Method: "GET", Path: mxAPriv + "/tree",
		Cases: []mxBad{
			{Name: "a ref that names nothing", Path: mxAPriv + "/tree?ref=nope", Want: 404},
			{Name: "a ref as an option", Path: mxAPriv + "/tree?ref=--output=x", Want: 404},
			{Name: "a ref with a path lookup", Path: mxAPriv + "/tree?ref=main:.cnb.yml", Want: 404},
			{Name: "a path out of the tree", Path: mxAPriv + "/tree?path=../../etc", Want: 422, Field: "path"},
			{Name: "a path that is a file", Path: mxAPriv + "/tree?path=.cnb.yml", Want: 422, Field: "path"},
			{Name: "a path not in the commit", Path: mxAPriv + "/tree?path=nope", Want: 404},
			{Name: "a secret repository has no code", Path: mxARepo + "/tree", Want: 404, Setup: func(w *mxWorld, v map[string]string) {
				c := &mxCall{Vars: v}
				mxSecretRepo(w, c)
			}},
		}},
	{Method: "GET", Path: mxAPriv + "/blob",
		Cases: []mxBad{
			{Name: "no path", Path: mxAPriv + "/blob", Want: 422, Field: "path"},
			{Name: "a directory", Path: mxAPriv + "/blob?path=.cnb", Want: 422, Field: "path"},
			{Name: "a NUL in the path", Path: mxAPriv + "/blob?path=a%00b", Want: 400},
			{Name: "a missing file", Path: mxAPriv + "/blob?path=nope.txt", Want: 404},
		}},
	{Method: "GET", Path: mxAPriv + "/raw",
		Cases: []mxBad{
			{Name: "no path", Path: mxAPriv + "/raw", Want: 422, Field: "path"},
			{Name: "a directory", Path: mxAPriv + "/raw?path=.cnb", Want: 422, Field: "path"},
			{Name: "a missing file", Path: mxAPriv + "/raw?path=nope.txt", Want: 404},
		}},
	{Method: "GET", Path: mxAPriv + "/commits",
		Cases: []mxBad{
			{Name: "a limit of 0", Path: mxAPriv + "/commits?limit=0", Want: 400},
			{Name: "a limit of 101", Path: mxAPriv + "/commits?limit=101", Want: 400},
			{Name: "a cursor not of this list", Path: mxAPriv + "/commits?cursor=!!", Want: 400},
			{Name: "a path out of the tree", Path: mxAPriv + "/commits?path=../x", Want: 422, Field: "path"},
			{Name: "a ref that names nothing", Path: mxAPriv + "/commits?ref=nope", Want: 404},
		}},
	{Method: "GET", Path: mxAPriv + "/commits/main",
		Cases: []mxBad{
			{Name: "a SHA nobody has", Path: mxAPriv + "/commits/" + strings.Repeat("a", 40), Want: 404},
			{Name: "an option", Path: mxAPriv + "/commits/--all", Want: 404},
		}},
	{Method: "GET", Path: "/api/v1/workspaces/{id}/preview/{port}", Setup: mxPreviewRest(""),
		Cases: append(slices.Clip(mxBadPorts),
			mxBad{Name: "valid: the login redirect", Path: "/api/v1/workspaces/{id}/preview/8080", Want: 303})},
	{Method: "GET", Path: "/api/v1/workspaces/{id}/terminal", Setup: mxWorkspaceVerb("terminal"),
		Cases: append(slices.Clip(mxWorkspaceIDs),
			mxBad{Name: "without the WebSocket upgrade", Path: "/api/v1/workspaces/{id}/terminal?session=x&cols=80&rows=24", Want: 400},
			mxBad{Name: "a reader, without the upgrade", As: "reporter", Path: "/api/v1/workspaces/{id}/terminal", Want: 403},
			mxBad{Name: "another team, without the upgrade", As: "outsider", Path: "/api/v1/workspaces/{id}/terminal", Want: 404})},
	{Method: "GET", Path: "/api/v1/workspaces/{id}/ssh", Setup: mxWorkspaceVerb("ssh"),
		Cases: append(slices.Clip(mxWorkspaceIDs),
			mxBad{Name: "without the WebSocket upgrade", Path: "/api/v1/workspaces/{id}/ssh", Want: 400},
			mxBad{Name: "a reader, without the upgrade", As: "reporter", Path: "/api/v1/workspaces/{id}/ssh", Want: 403},
			mxBad{Name: "another team, without the upgrade", As: "outsider", Path: "/api/v1/workspaces/{id}/ssh", Want: 404})},
}

// mxPlatformAgent names the world's platform agent in {platform}: no team's runner.
func mxPlatformAgent(w *mxWorld, v map[string]string) {
	a, err := w.app.Scheduler.AgentByToken(w.ctx, w.agentToken)
	if err != nil {
		w.t.Fatal(err)
	}
	v["platform"] = a.ID
}

// mxOrphanRepoDir puts a repository on disk where A's next repo would go, with no row (as a
// restored database backup leaves it), and names a fresh repo in {name}; the directory goes
// when the endpoint's test ends.
func mxOrphanRepoDir(w *mxWorld, v map[string]string) {
	last, err := w.app.Repos.Create(w.ctx, w.orgA, w.unique("before-restore-"), repo.Private, "main", "")
	if err != nil {
		w.t.Fatal(err)
	}
	dir := w.app.Repos.Path(&repo.Repo{ID: last.ID + 1})
	if err := git.InitBare(w.ctx, dir, "main"); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { os.RemoveAll(dir) })
	v["name"] = w.unique("after-restore-")
}

// mxSecretRepoVars makes a fresh secret repository of A with env.yml, named in {repo}.
func mxSecretRepoVars(w *mxWorld, v map[string]string) {
	c := &mxCall{Vars: v}
	mxSecretRepo(w, c)
}
