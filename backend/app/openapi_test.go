package app

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/backend/config"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// TestOpenAPICoversEveryRoute builds the real app and compares the routes its engine registered
// under /api/v1 with the operations of the document it serves at /api/v1/openapi.json: a route
// missing from the document fails, and so does a documented operation that no route serves.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	dir := storetest.SQLiteDataDir(t)
	cfg, _, err := config.Load("nimbus-server", []string{"--data-dir", dir, "--builtin-agent", "false"},
		func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(context.Background(), cfg, slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })

	var routes []string
	for _, r := range a.Server.Routes() {
		if strings.HasPrefix(r.Path, apiPrefix+"/") {
			routes = append(routes, r.Method+" "+openAPIPath(r.Path))
		}
	}
	if len(routes) < 10 {
		t.Fatalf("only %d routes under %s; is the app assembled?", len(routes), apiPrefix)
	}

	w := httptest.NewRecorder()
	a.Server.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, apiPrefix+"/openapi.json", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("GET %s/openapi.json: %d %s", apiPrefix, w.Code, w.Body)
	}
	documented, err := documentedOperations(w.Body.Bytes())
	if err != nil {
		t.Fatal(err)
	}

	missing, stale := compareOperations(routes, documented)
	for _, op := range missing {
		t.Errorf("route %s is not in backend/server/openapi.yaml", op)
	}
	for _, op := range stale {
		t.Errorf("backend/server/openapi.yaml documents %s, which no route serves", op)
	}
}

const apiPrefix = "/api/v1"

var ginParam = regexp.MustCompile(`[:*]([A-Za-z0-9_]+)`)

// openAPIPath turns gin's /api/v1/repos/:org/:repo into /api/v1/repos/{org}/{repo}.
func openAPIPath(p string) string { return ginParam.ReplaceAllString(p, "{$1}") }

// documentedOperations returns "METHOD /api/v1/path" for every operation of an OpenAPI document,
// with the server URL (which must be the API prefix) in front of each path.
func documentedOperations(doc []byte) ([]string, error) {
	var d struct {
		Servers []struct {
			URL string `json:"url"`
		} `json:"servers"`
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, err
	}
	base := ""
	if len(d.Servers) > 0 {
		base = strings.TrimRight(d.Servers[0].URL, "/")
	}
	var out []string
	for p, item := range d.Paths {
		for m := range item {
			switch m {
			case "get", "put", "post", "delete", "options", "head", "patch", "trace":
				out = append(out, strings.ToUpper(m)+" "+base+p)
			}
		}
	}
	return out, nil
}

// compareOperations returns the routes the document lacks and the documented operations that
// no route serves, each sorted.
func compareOperations(routes, documented []string) (missing, stale []string) {
	for _, r := range routes {
		if !slices.Contains(documented, r) {
			missing = append(missing, r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(routes, d) {
			stale = append(stale, d)
		}
	}
	slices.Sort(missing)
	slices.Sort(stale)
	return missing, stale
}

func TestCompareOperations(t *testing.T) {
	doc := []byte(`{"servers":[{"url":"/api/v1"}],"paths":{
		"/orgs/{org}":{"parameters":[],"get":{},"delete":{}},
		"/gone":{"post":{}}}}`)
	documented, err := documentedOperations(doc)
	if err != nil {
		t.Fatal(err)
	}
	routes := []string{
		"GET " + openAPIPath("/api/v1/orgs/:org"),
		"DELETE " + openAPIPath("/api/v1/orgs/:org"),
		"PATCH " + openAPIPath("/api/v1/orgs/:org"),        // not documented
		"GET " + openAPIPath("/api/v1/files/*path"),        // not documented
		"GET " + openAPIPath("/api/v1/orgs/:name/members"), // not documented
	}
	missing, stale := compareOperations(routes, documented)
	wantMissing := []string{"GET /api/v1/files/{path}", "GET /api/v1/orgs/{name}/members", "PATCH /api/v1/orgs/{org}"}
	if !slices.Equal(missing, wantMissing) {
		t.Errorf("missing = %q, want %q", missing, wantMissing)
	}
	if want := []string{"POST /api/v1/gone"}; !slices.Equal(stale, want) {
		t.Errorf("stale = %q, want %q", stale, want)
	}
	// A parameter named differently in the document is both missing and stale.
	missing, stale = compareOperations([]string{"GET /api/v1/orgs/{name}"}, []string{"GET /api/v1/orgs/{org}"})
	if len(missing) != 1 || len(stale) != 1 {
		t.Errorf("renamed parameter: missing %q, stale %q", missing, stale)
	}
	if m, s := compareOperations(routes[:2], documented[:0]); len(m) != 2 || len(s) != 0 {
		t.Errorf("empty document: missing %q, stale %q", m, s)
	}
}
