package app

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/backend/git"
)

// The path sweep: bad input in every path parameter of every route the server serves, made
// from the route tables themselves, so that a route added later is swept without a line here:
//
//   - the API, the Hugging Face routes, downloads and the operations endpoints: the server's
//     own table (Server.Routes), each route with the valid values, caller and body of its row in
//     the authorization matrix (which must cover every route);
//   - git smart HTTP (git.Routes) and the OCI registry (registry.Handler.Routes), with the
//     world's repo and A's owner's token;
//   - the dashboard: the pages of frontend/src/router.tsx, which the server serves as
//     index.html.
//
// Each parameter in turn gets invalid UTF-8 (three ways), a NUL byte, "..", a double slash
// before it and, unless it ends the path (that would be a trailing slash, which names the same
// thing), nothing between two slashes; one that spans segments (a secret file's path, a
// registry name) also gets a double slash and ".." inside and ".." after it. Each route also
// gets invalid UTF-8 in its query. Every answer must be a 400 or a 404 in the route's dialect:
// the error envelope with the status's code wherever the route speaks JSON (and on a dashboard
// page's 400), OCI's error format on /v2/, anything on git; never a 5xx, never an ERROR line in
// the server's log, and the cases of a route, all together, change no row. (The server's edge
// refuses nearly all of them: server.checkURL.)

// mxSweepRoute is one route with what makes a request of it valid.
type mxSweepRoute struct {
	Method, Template string            // {name} a parameter, {name...} one that spans segments
	Query            string            // the valid query, without "?"
	Valid            map[string]string // parameter → a value that names something real
	Dialect          string            // mxDialect*
	As               *mxPrincipal
	Basic            bool // the principal's token as the HTTP Basic password (git)
	Body             any
}

const (
	mxDialectJSON      = "json"      // the API's error envelope
	mxDialectOCI       = "oci"       // the registry's {"errors":[…]}
	mxDialectGit       = "git"       // plain text
	mxDialectDashboard = "dashboard" // HTML pages; the envelope on a 400
)

// mxBadSegments go into every parameter, made from its valid value v.
var mxBadSegments = []struct {
	Name  string
	Value func(v string) string
}{
	{"invalid UTF-8 (0xFF)", func(string) string { return "%FF" }},
	{"invalid UTF-8 (a broken sequence)", func(string) string { return "%c3%28" }},
	{"invalid UTF-8 (an overlong /)", func(string) string { return "%C0%AF" }},
	{"a NUL byte", func(string) string { return "%00" }},
	{"..", func(string) string { return ".." }},
	{"a double slash before it", func(v string) string { return "/" + v }},
	{"nothing, between two slashes", func(string) string { return "" }}, // not for the last: a trailing slash
}

// mxBadSpans go into parameters that span segments, around their valid value v.
var mxBadSpans = []struct {
	Name  string
	Value func(v string) string
}{
	{"a double slash inside", func(v string) string { return "x//" + v }},
	{".. inside", func(v string) string { return "x/../" + v }},
	{".. at the end", func(v string) string { return v + "/.." }},
}

// mxParam matches a template's parameters.
var mxParam = regexp.MustCompile(`\{([a-z]+)(\.\.\.)?\}`)

func TestBadInputInEveryPathParameter(t *testing.T) {
	t.Parallel()
	mxEachDialect(t, func(t *testing.T, w *mxWorld) {
		t.Run("the URLs of issue 32, anonymously", func(t *testing.T) {
			w.t = t
			mxIssueURLs(t, w)
		})
		routes := mxSweepRoutes(t, w)
		for _, r := range routes {
			t.Run(r.Method+" "+r.Template, func(t *testing.T) {
				w.t = t
				mxSweep(t, w, r)
			})
		}
	})
}

// mxIssueURLs are the requests issue 32 named: each was a 500 on PostgreSQL ("invalid byte
// sequence for encoding UTF8", SQLSTATE 22021) with an ERROR line. Now a 400 that says why.
func mxIssueURLs(t *testing.T, w *mxWorld) {
	logged := len(w.logs.String())
	for _, target := range []string{"/api/v1/repos/%ff/x", "/api/v1/orgs/%ff/repos", "/api/v1/hf/api/models/%ff/x",
		"/api/v1/repos/ml/%c3%28", "/orgs/%ff/repos", "/repos/ml/%c3%28"} {
		res := w.do(nil, "GET", target, nil)
		if code, msg, ok := res.envelope(); res.Status != 400 || !ok || code != "bad_request" || msg != "the URL path is not valid UTF-8" {
			t.Errorf("GET %s: %d %s, want 400 saying the path is not valid UTF-8", target, res.Status, mxShort(res.Body))
		}
	}
	if logs := w.logs.String()[logged:]; strings.Contains(logs, "level=ERROR") {
		t.Errorf("logged an ERROR:\n%s", logs)
	}
}

// mxSweepRoutes is every route of the server with its valid values.
func mxSweepRoutes(t *testing.T, w *mxWorld) []mxSweepRoute {
	var out []mxSweepRoute
	// The server's own routes, each with the matrix row that lets a caller through.
	rows := map[string][]mxRow{}
	for _, r := range mxMatrix {
		path, _, _ := strings.Cut(mxPlaceholder.ReplaceAllString(r.Path, "1"), "?")
		rt := mxRouteOf(w, r.Method, path)
		rows[rt] = append(rows[rt], r)
	}
	for _, rt := range w.app.Server.Routes() {
		key := rt.Method + " " + rt.Path
		if len(rows[key]) == 0 {
			t.Errorf("route %s has no row in the authorization matrix to take valid values from", key)
			continue
		}
		out = append(out, mxFromMatrix(t, w, rt.Path, rows[key]))
	}
	owner := w.byName["owner-token"]
	for _, rt := range git.Routes() {
		path, query, _ := strings.Cut(rt.Path, "?")
		out = append(out, mxSweepRoute{Method: rt.Method, Template: path, Query: query, Dialect: mxDialectGit,
			Valid: map[string]string{"org": mxOrgA, "repo": mxPrivA}, As: owner, Basic: true})
	}
	for _, rt := range w.app.Registry.Routes() {
		out = append(out, mxSweepRoute{Method: rt.Method, Template: rt.Path, Dialect: mxDialectOCI, As: owner,
			Valid: map[string]string{"name": mxOrgA + "/" + mxPrivA, "reference": "latest",
				"digest": "sha256:" + strings.Repeat("ab", 32), "session": "0123456789abcdef"}})
	}
	src, err := os.ReadFile("../../frontend/src/router.tsx")
	if err != nil {
		t.Fatal(err)
	}
	pages := regexp.MustCompile(`path: '(/[^']*)'`).FindAllStringSubmatch(string(src), -1)
	if len(pages) < 10 {
		t.Fatalf("found %d dashboard pages in frontend/src/router.tsx: has its shape changed?", len(pages))
	}
	for _, m := range pages {
		out = append(out, mxSweepRoute{Method: "GET", Template: regexp.MustCompile(`:([a-z]+)`).ReplaceAllString(m[1], "{$1}"),
			Dialect: mxDialectDashboard, As: w.byName["owner"],
			Valid: map[string]string{"org": mxOrgA, "repo": mxPrivA, "number": "1", "id": "1", "job": "1", "kind": "tree", "sha": "main"}})
	}
	return out
}

// mxFromMatrix makes the sweep route of a gin route from its matrix rows: the row and caller
// that get the lowest status (A's owner when it may pass; the agent on the agent API; the
// platform admin on /admin), prepared once, with the values of its path and its body.
func mxFromMatrix(t *testing.T, w *mxWorld, pattern string, rows []mxRow) mxSweepRoute {
	row, who, best := rows[0], w.byName["owner"], 1000
	for _, r := range rows {
		wants := mxWants(t, r.Want)
		for _, p := range append([]*mxPrincipal{w.byName["owner"], w.byName["owner-token"]}, w.principals...) {
			if want := mxWant(r, wants, p); want < best {
				row, who, best = r, p, want
			}
		}
	}
	if strings.HasPrefix(pattern, "/api/v1/admin/") {
		mxRootSession(w, nil) // the platform admin, whom the matrix has no column for
		who = w.byName["root"]
	}
	c := &mxCall{P: who, Vars: map[string]string{}, Body: row.Body}
	if row.Prep != nil {
		row.Prep(w, c)
	}
	path, query, _ := strings.Cut(mxExpand(row.Path, c.Vars), "?")
	// Line the route's segments up with the row's: ":x" is one segment, "*x" the rest.
	valid := map[string]string{}
	pat, got := strings.Split(pattern, "/"), strings.Split(path, "/")
	var tmpl []string
	for i, seg := range pat {
		switch {
		case strings.HasPrefix(seg, ":"):
			valid[seg[1:]] = got[i]
			tmpl = append(tmpl, "{"+seg[1:]+"}")
		case strings.HasPrefix(seg, "*"):
			valid[seg[1:]] = strings.Join(got[i:], "/")
			tmpl = append(tmpl, "{"+seg[1:]+"...}")
		default:
			tmpl = append(tmpl, seg)
		}
	}
	return mxSweepRoute{Method: row.Method, Template: strings.Join(tmpl, "/"), Query: query, Valid: valid,
		Dialect: mxDialectJSON, As: who, Body: c.Body}
}

// mxSweepCase is one bad request of a route.
type mxSweepCase struct {
	Name, Path string
	Want       []int
}

// mxCases are the bad requests of route r.
func mxCases(t *testing.T, r mxSweepRoute) []mxSweepCase {
	fill := func(vals map[string]string) string {
		return mxParam.ReplaceAllStringFunc(r.Template, func(m string) string {
			name := mxParam.FindStringSubmatch(m)[1]
			v, ok := vals[name]
			if !ok {
				t.Fatalf("%s %s: no valid value for {%s}", r.Method, r.Template, name)
			}
			return v
		})
	}
	withQuery := func(path, extra string) string {
		q := r.Query
		if extra != "" {
			q = strings.Trim(q+"&"+extra, "&")
		}
		if q == "" {
			return path
		}
		return path + "?" + q
	}
	var cases []mxSweepCase
	for _, m := range mxParam.FindAllStringSubmatch(r.Template, -1) {
		name, valid := m[1], r.Valid[m[1]]
		spans := m[2] != "" || strings.Contains(valid, "/")
		with := func(v string) map[string]string {
			vals := maps.Clone(r.Valid)
			vals[name] = v
			return vals
		}
		last := strings.HasSuffix(r.Template, m[0])
		bad := slices.Clone(mxBadSegments)
		if spans {
			bad = append(bad, mxBadSpans...)
		}
		for _, b := range bad {
			v := b.Value(valid)
			if v == "" && last {
				continue
			}
			cases = append(cases, mxSweepCase{Name: "{" + name + "}: " + b.Name, Path: withQuery(fill(with(v)), ""), Want: []int{400, 404}})
		}
	}
	cases = append(cases, mxSweepCase{Name: "invalid UTF-8 in the query", Path: withQuery(fill(r.Valid), "x=%FF"), Want: []int{400}})
	return cases
}

// mxSweep sends the bad requests of route r and checks them.
func mxSweep(t *testing.T, w *mxWorld, r mxSweepRoute) {
	cases := mxCases(t, r)
	logged := len(w.logs.String())
	before := w.snapshot()
	for _, c := range cases {
		res := w.send(r.As, mxReq{Method: r.Method, Path: c.Path, Body: r.Body, Basic: r.Basic})
		who := fmt.Sprintf("%s %s (%s, as %s)", r.Method, mxShortPath(c.Path), c.Name, r.As.Name)
		if !slices.Contains(c.Want, res.Status) {
			t.Errorf("%s: got %d, want one of %v: %s", who, res.Status, c.Want, mxShort(res.Body))
			continue
		}
		switch {
		case r.Method == "HEAD":
			// No body to check.
		case r.Dialect == mxDialectJSON || r.Dialect == mxDialectDashboard && res.Status == 400:
			if code, _, ok := res.envelope(); !ok || code != mxCodeFor[res.Status] {
				t.Errorf("%s: %d without the envelope and code %q: %s", who, res.Status, mxCodeFor[res.Status], mxShort(res.Body))
			}
		case r.Dialect == mxDialectOCI:
			var oci struct {
				Errors []struct{ Code, Message string } `json:"errors"`
			}
			if json.Unmarshal(res.Body, &oci) != nil || len(oci.Errors) == 0 || oci.Errors[0].Code == "" {
				t.Errorf("%s: %d not in OCI's error format: %s", who, res.Status, mxShort(res.Body))
			}
		}
	}
	if d := before.diff(w.snapshot()); d != "" {
		t.Errorf("bad paths of %s %s changed the database:\n%s", r.Method, r.Template, d)
	}
	if logs := w.logs.String()[logged:]; strings.Contains(logs, "level=ERROR") {
		t.Errorf("bad paths of %s %s logged an ERROR:\n%s", r.Method, r.Template, logs)
	}
}

// mxDuplicateKeys are the generic cases of a JSON endpoint whose valid body is ok: its first key
// again (the same value: the body is otherwise the valid one), its first key again in capitals
// (encoding/json binds field names without regard to case), and the first key of its first
// non-empty object value again. Each is a 400; named (a closed schema: the body is bound as
// it comes, not verified first, as Stripe's webhook is) also checks that the message names the
// key. Such bodies used to be accepted, the last value winning: {"name":"t4","name":"t5"}
// created the team t5.
func mxDuplicateKeys(t *testing.T, ok string, named bool) []mxBad {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(ok), &fields); err != nil || len(fields) == 0 {
		t.Fatalf("the valid body of a JSON endpoint must have a key to repeat: %s %v", ok, err)
	}
	keys := slices.Sorted(maps.Keys(fields))
	again := func(body, key string, value json.RawMessage) string {
		k, _ := json.Marshal(key)
		return strings.TrimSuffix(body, "}") + "," + string(k) + ":" + string(value) + "}"
	}
	first := keys[0]
	cases := []mxBad{
		{Name: "duplicate key " + first, Body: again(ok, first, fields[first]), Want: 400, InMsg: fmt.Sprintf("duplicate key %q", first)},
		{Name: "duplicate key " + first + " in capitals", Body: again(ok, strings.ToUpper(first), fields[first]), Want: 400,
			InMsg: fmt.Sprintf("duplicate key %q", strings.ToUpper(first))},
	}
	for _, k := range keys {
		var inner map[string]json.RawMessage
		if json.Unmarshal(fields[k], &inner) != nil || len(inner) == 0 {
			continue
		}
		ik := slices.Sorted(maps.Keys(inner))[0]
		nested := map[string]json.RawMessage{}
		maps.Copy(nested, fields)
		nested[k] = json.RawMessage(again(string(fields[k]), ik, inner[ik]))
		body, err := json.Marshal(nested)
		if err != nil {
			t.Fatal(err)
		}
		// json.Marshal compacts a RawMessage, keeping both keys.
		cases = append(cases, mxBad{Name: "duplicate key inside " + k, Body: string(body), Want: 400,
			InMsg: fmt.Sprintf("duplicate key %q", k+"."+ik)})
		break
	}
	if !named {
		for i := range cases {
			cases[i].InMsg = ""
		}
	}
	return cases
}
