package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// httpMethods are the operation keys of an OpenAPI path item.
var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func loadOpenAPI(t *testing.T) map[string]any {
	t.Helper()
	b, err := OpenAPIJSON()
	if err != nil {
		t.Fatalf("embedded openapi.yaml does not convert: %v", err)
	}
	if !json.Valid(b) {
		t.Fatal("converted document is not valid JSON")
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestOpenAPIDocument checks the embedded document's structure: the things a reader or a code
// generator trips over first.
func TestOpenAPIDocument(t *testing.T) {
	doc := loadOpenAPI(t)
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.") {
		t.Errorf("openapi = %q, want 3.x", v)
	}
	info, _ := doc["info"].(map[string]any)
	if s, _ := info["title"].(string); s == "" {
		t.Error("info.title is missing")
	}
	if s, _ := info["version"].(string); s == "" {
		t.Error("info.version is missing")
	}
	servers, _ := doc["servers"].([]any)
	if len(servers) != 1 {
		t.Fatalf("want exactly one server, got %v", doc["servers"])
	}
	if u, _ := servers[0].(map[string]any)["url"].(string); u != "/api/v1" {
		t.Errorf("servers[0].url = %q, want /api/v1 (paths are written without the prefix)", u)
	}
	schemes, _ := doc["components"].(map[string]any)["securitySchemes"].(map[string]any)
	for _, name := range []string{"bearerAuth", "sessionCookie", "csrfToken"} {
		if schemes[name] == nil {
			t.Errorf("securitySchemes.%s is missing", name)
		}
	}
	checkSecurity(t, "document", doc["security"], schemes)

	paths, _ := doc["paths"].(map[string]any)
	if len(paths) == 0 {
		t.Fatal("no paths")
	}
	opIDs := map[string]string{}
	ops := 0
	for p, item := range paths {
		if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "/api/v1") || strings.Contains(p, ":") {
			t.Errorf("path %q: write it as /… without the /api/v1 prefix and with {param}s", p)
		}
		pi, _ := item.(map[string]any)
		shared := paramsIn(t, doc, pi["parameters"])
		n := 0
		for _, m := range httpMethods {
			raw, ok := pi[m]
			if !ok {
				continue
			}
			n++
			ops++
			where := strings.ToUpper(m) + " " + p
			op, _ := raw.(map[string]any)
			id, _ := op["operationId"].(string)
			switch {
			case id == "":
				t.Errorf("%s: no operationId", where)
			case opIDs[id] != "":
				t.Errorf("%s: operationId %q is also used by %s", where, id, opIDs[id])
			default:
				opIDs[id] = where
			}
			if s, _ := op["summary"].(string); s == "" {
				t.Errorf("%s: no summary", where)
			}
			for _, x := range []string{"x-required-role", "x-required-scope"} {
				if s, _ := op[x].(string); s == "" {
					t.Errorf("%s: no %s", where, x)
				}
			}
			checkResponses(t, doc, where, op["responses"])
			if sec, ok := op["security"]; ok {
				checkSecurity(t, where, sec, schemes)
			}
			// Every {param} of the path is declared, as a required path parameter.
			declared := paramsIn(t, doc, op["parameters"])
			for k, v := range shared {
				if _, ok := declared[k]; !ok {
					declared[k] = v
				}
			}
			for _, name := range pathParams(p) {
				prm, ok := declared["path:"+name]
				if !ok {
					t.Errorf("%s: path parameter {%s} is not declared", where, name)
					continue
				}
				if req, _ := prm["required"].(bool); !req {
					t.Errorf("%s: path parameter {%s} must be required: true", where, name)
				}
			}
			for k := range declared {
				if name, ok := strings.CutPrefix(k, "path:"); ok && !slices.Contains(pathParams(p), name) {
					t.Errorf("%s: declares path parameter %q that the path lacks", where, name)
				}
			}
			if rb, ok := op["requestBody"]; ok {
				body := resolve(t, doc, rb)
				content, _ := body["content"].(map[string]any)
				if content["application/json"] == nil {
					t.Errorf("%s: the request body must be application/json", where)
				}
			}
		}
		if n == 0 {
			t.Errorf("path %q has no operations", p)
		}
	}
	if ops < 40 {
		t.Errorf("only %d operations documented; did paths get lost?", ops)
	}

	// Every $ref in the whole document resolves.
	walkRefs(doc, "#", func(at, ref string) {
		if _, err := lookupRef(doc, ref); err != nil {
			t.Errorf("%s: $ref %q: %v", at, ref, err)
		}
	})

	// The error envelope lists every stable code, and nothing else.
	codes := schemaEnum(t, doc, "ErrorCode")
	want := []string{"bad_request", "validation_failed", "unauthenticated", "forbidden", "not_found",
		"method_not_allowed", "conflict", "payload_too_large", "rate_limited", "unavailable", "internal"}
	sort.Strings(codes)
	sort.Strings(want)
	if !slices.Equal(codes, want) {
		t.Errorf("ErrorCode enum = %v, want %v", codes, want)
	}
}

func checkResponses(t *testing.T, doc map[string]any, where string, raw any) {
	t.Helper()
	rs, _ := raw.(map[string]any)
	if len(rs) == 0 {
		t.Errorf("%s: no responses", where)
		return
	}
	success := false
	for code, r := range rs {
		if code != "default" && !regexp.MustCompile(`^[1-5][0-9][0-9]$`).MatchString(code) {
			t.Errorf("%s: response key %q is not a status code", where, code)
			continue
		}
		// 101: a WebSocket upgrade; 303: a route whose answer is a redirect (a workspace preview).
		if code >= "200" && code < "300" || code == "101" || code == "303" {
			success = true
		}
		resp := resolve(t, doc, r)
		if s, _ := resp["description"].(string); s == "" {
			t.Errorf("%s: response %s has no description", where, code)
		}
		content, _ := resp["content"].(map[string]any)
		if code >= "400" || code == "default" {
			js, _ := content["application/json"].(map[string]any)
			if ref, _ := js["schema"].(map[string]any)["$ref"].(string); ref != "#/components/schemas/Error" {
				t.Errorf("%s: error response %s must use the Error schema", where, code)
			}
		}
		if code == "204" && content != nil {
			t.Errorf("%s: a 204 has no content", where)
		}
	}
	if !success {
		t.Errorf("%s: no 2xx response", where)
	}
}

func checkSecurity(t *testing.T, where string, raw any, schemes map[string]any) {
	t.Helper()
	reqs, ok := raw.([]any)
	if !ok {
		t.Errorf("%s: security must be a list, got %T", where, raw)
		return
	}
	for _, r := range reqs {
		m, _ := r.(map[string]any)
		for name := range m {
			if schemes[name] == nil {
				t.Errorf("%s: security names unknown scheme %q", where, name)
			}
		}
	}
}

// paramsIn returns the parameters of a list by "in:name", with $refs resolved.
func paramsIn(t *testing.T, doc map[string]any, raw any) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	list, _ := raw.([]any)
	for _, p := range list {
		prm := resolve(t, doc, p)
		in, _ := prm["in"].(string)
		name, _ := prm["name"].(string)
		if in == "" || name == "" {
			t.Errorf("parameter without in or name: %v", prm)
			continue
		}
		out[in+":"+name] = prm
	}
	return out
}

var pathParamRE = regexp.MustCompile(`\{([^}]+)\}`)

func pathParams(p string) []string {
	var out []string
	for _, m := range pathParamRE.FindAllStringSubmatch(p, -1) {
		out = append(out, m[1])
	}
	return out
}

// resolve follows a $ref (if v is one) and returns the object.
func resolve(t *testing.T, doc map[string]any, v any) map[string]any {
	t.Helper()
	m, _ := v.(map[string]any)
	for range 10 {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		target, err := lookupRef(doc, ref)
		if err != nil {
			t.Errorf("$ref %q: %v", ref, err)
			return nil
		}
		m, _ = target.(map[string]any)
	}
	t.Errorf("$ref chain too long at %v", m)
	return nil
}

// lookupRef resolves a local JSON pointer reference ("#/a/b~1c").
func lookupRef(doc map[string]any, ref string) (any, error) {
	frag, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("only local references (#/…) are allowed")
	}
	var cur any = doc
	for _, tok := range strings.Split(frag, "/") {
		tok, err := url.PathUnescape(tok)
		if err != nil {
			return nil, err
		}
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%q is not inside an object", tok)
		}
		if cur, ok = m[tok]; !ok {
			return nil, fmt.Errorf("no %q", tok)
		}
	}
	return cur, nil
}

func walkRefs(v any, at string, f func(at, ref string)) {
	switch v := v.(type) {
	case map[string]any:
		if ref, ok := v["$ref"]; ok {
			s, _ := ref.(string)
			f(at, s)
		}
		for k, c := range v {
			walkRefs(c, at+"/"+k, f)
		}
	case []any:
		for i, c := range v {
			walkRefs(c, fmt.Sprintf("%s/%d", at, i), f)
		}
	}
}

func schemaEnum(t *testing.T, doc map[string]any, name string) []string {
	t.Helper()
	s, err := lookupRef(doc, "#/components/schemas/"+name)
	if err != nil {
		t.Fatalf("schema %s: %v", name, err)
	}
	var out []string
	list, _ := s.(map[string]any)["enum"].([]any)
	for _, v := range list {
		str, _ := v.(string)
		out = append(out, str)
	}
	return out
}

// TestOpenAPIRefChecksCatchMistakes proves the $ref check is not vacuous.
func TestOpenAPIRefChecksCatchMistakes(t *testing.T) {
	doc := map[string]any{"components": map[string]any{"schemas": map[string]any{"A/B": map[string]any{}, "C": true}}}
	for ref, ok := range map[string]bool{
		"#/components/schemas/A~1B":  true,
		"#/components/schemas/C":     true,
		"#/components/schemas/Nope":  false,
		"#/components/schemas/C/x":   false,
		"other.yaml#/components/a":   false,
		"#/components/schemas/A%2FB": true, // URI fragments are percent-decoded
		"#/components/schemas/A%zz":  false,
	} {
		if _, err := lookupRef(doc, ref); (err == nil) != ok {
			t.Errorf("lookupRef(%q) error = %v, want ok=%v", ref, err, ok)
		}
	}
	var found []string
	walkRefs(map[string]any{"a": []any{map[string]any{"$ref": "#/x"}}, "b": map[string]any{"$ref": "#/y"}}, "#",
		func(_, ref string) { found = append(found, ref) })
	sort.Strings(found)
	if !slices.Equal(found, []string{"#/x", "#/y"}) {
		t.Errorf("walkRefs found %v", found)
	}
}

func TestYAMLToJSON(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"order and int keys", "b: 1\na: {200: x, default: y}\n", `{"b":1,"a":{"200":"x","default":"y"}}`},
		{"scalars", "s: 'x'\ni: 0x10\nf: 1.5\nt: true\nn: ~\nv: 3.0.3\nq: \"42\"\nd: 2024-01-02\ne: a<b&c\n",
			`{"s":"x","i":16,"f":1.5,"t":true,"n":null,"v":"3.0.3","q":"42","d":"2024-01-02","e":"a<b&c"}`},
		{"aliases", "x: &a [1, {k: v}]\ny: *a\n", `{"x":[1,{"k":"v"}],"y":[1,{"k":"v"}]}`},
		{"block text", "d: |\n  line one\n  line two\n", `{"d":"line one\nline two\n"}`},
		{"unicode", "s: 1–39 → ok\n", `{"s":"1–39 → ok"}`},
	} {
		got, err := yamlToJSON([]byte(tc.in))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
	for name, in := range map[string]string{
		"syntax":         "a: [1, 2\n",
		"tabs":           "a:\n\t- 1\n",
		"duplicate key":  "a: 1\nb: 2\na: 3\n",
		"merge key":      "x: &a {k: v}\ny:\n  <<: *a\n",
		"complex key":    "? [1, 2]\n: x\n",
		"infinity":       "a: .inf\n",
		"two documents":  "a: 1\n---\nb: 2\n",
		"empty":          "",
		"custom tag":     "a: !thing x\n",
		"recursive list": "a: &x [*x]\n",
	} {
		if got, err := yamlToJSON([]byte(in)); err == nil {
			t.Errorf("%s: want an error, got %s", name, got)
		}
	}
}

// TestOpenAPIRoute serves the document through the real server.
func TestOpenAPIRoute(t *testing.T) {
	f := newFixture(t, Deps{})
	w := f.do(http.MethodGet, "/api/v1/openapi.json", nil)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	want, _ := OpenAPIJSON()
	if !bytes.Equal(w.Body.Bytes(), want) {
		t.Error("served body differs from OpenAPIJSON()")
	}
	if w := f.do(http.MethodPost, "/api/v1/openapi.json", nil); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: status %d, want 405", w.Code)
	}
	found := false
	for _, r := range f.srv.Routes() {
		found = found || (r.Method == http.MethodGet && r.Path == "/api/v1/openapi.json")
	}
	if !found {
		t.Error("Routes() lacks GET /api/v1/openapi.json")
	}
}

// TestOpenAPIBrokenDocument: a document that does not convert answers a logged 500 envelope
// instead of panicking, and the rest of the server keeps working.
func TestOpenAPIBrokenDocument(t *testing.T) {
	f := newFixture(t, Deps{})
	f.srv.engine.GET("/broken-openapi.json", f.srv.jsonDocHandler(yamlToJSON([]byte("a: [\n"))))
	w := f.do(http.MethodGet, "/broken-openapi.json", nil)
	if w.Code != http.StatusInternalServerError || errorCode(t, w) != "internal" {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if !strings.Contains(f.logs.String(), "openapi.yaml does not convert") {
		t.Errorf("the failure is not logged: %s", f.logs)
	}
	if w := f.do(http.MethodGet, "/api/v1/openapi.json", nil); w.Code != http.StatusOK {
		t.Errorf("/api/v1/openapi.json: status %d", w.Code)
	}
}
