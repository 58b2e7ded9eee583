package app

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nimbus-build/nimbus/backend/server"
)

// The OpenAPI document says, per JSON request body, whether unknown fields are refused
// (additionalProperties: false: the handler decodes with api.Bind) or ignored
// (additionalProperties: true: api.BindLenient, or a body that is not decoded into a struct at
// all). TestOpenAPIRequestBodiesSayWhetherTheyAreClosed makes every body say it, and the
// bad-input test (badinput_test.go) sends an unknown field to every JSON endpoint whose body is
// closed and expects the 400 that names it: the document and the decoding cannot drift apart.

// jsonRequestBodies returns, for every operation ("METHOD /api/v1/path") of an OpenAPI document
// with an application/json request body, that body's schema, a top-level $ref resolved.
func jsonRequestBodies(doc []byte) (map[string]map[string]any, error) {
	var d struct {
		Servers []struct {
			URL string `json:"url"`
		} `json:"servers"`
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, err
	}
	base := ""
	if len(d.Servers) > 0 {
		base = strings.TrimRight(d.Servers[0].URL, "/")
	}
	out := map[string]map[string]any{}
	for p, item := range d.Paths {
		for m, raw := range item {
			if m == "parameters" || strings.HasPrefix(m, "x-") {
				continue
			}
			var op struct {
				RequestBody *struct {
					Content map[string]struct {
						Schema map[string]any `json:"schema"`
					} `json:"content"`
				} `json:"requestBody"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				return nil, fmt.Errorf("%s %s: %w", m, p, err)
			}
			if op.RequestBody == nil {
				continue
			}
			media, ok := op.RequestBody.Content["application/json"]
			if !ok {
				continue
			}
			schema := media.Schema
			if ref, ok := schema["$ref"].(string); ok {
				name, found := strings.CutPrefix(ref, "#/components/schemas/")
				if schema = d.Components.Schemas[name]; !found || schema == nil {
					return nil, fmt.Errorf("%s %s: request body $ref %q resolves to nothing", m, p, ref)
				}
			}
			out[strings.ToUpper(m)+" "+base+p] = schema
		}
	}
	return out, nil
}

// servedJSONBodies is jsonRequestBodies of the document the server embeds and serves.
var servedJSONBodies = sync.OnceValues(func() (map[string]map[string]any, error) {
	doc, err := server.OpenAPIJSON()
	if err != nil {
		return nil, err
	}
	return jsonRequestBodies(doc)
})

// bodyClosed reports what a request body schema says about unknown fields: closed is true for
// additionalProperties: false; declared is false when the schema does not say (or says it with
// a schema instead of true or false).
func bodyClosed(schema map[string]any) (closed, declared bool) {
	b, ok := schema["additionalProperties"].(bool)
	return ok && !b, ok
}

// TestOpenAPIRequestBodiesSayWhetherTheyAreClosed: every JSON request body of the document is an
// object whose schema says additionalProperties: false (unknown fields are a 400, api.Bind) or
// true (they are ignored). JSON Schema's default would be true, silently; a new endpoint has to
// choose.
func TestOpenAPIRequestBodiesSayWhetherTheyAreClosed(t *testing.T) {
	bodies, err := servedJSONBodies()
	if err != nil {
		t.Fatal(err)
	}
	if len(bodies) < 10 {
		t.Fatalf("only %d JSON request bodies in the document; is it read right?", len(bodies))
	}
	ops := make([]string, 0, len(bodies))
	for op := range bodies {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	closed := 0
	for _, op := range ops {
		s := bodies[op]
		if typ, _ := s["type"].(string); typ != "object" {
			t.Errorf("%s: the JSON request body's schema is %q, want type: object (api.Bind only takes objects)", op, typ)
		}
		c, declared := bodyClosed(s)
		if !declared {
			t.Errorf("%s: the JSON request body's schema needs additionalProperties: false (unknown fields are a 400, api.Bind) or true (ignored, api.BindLenient)", op)
		}
		if c {
			closed++
		}
	}
	if closed == 0 {
		t.Error("no JSON request body is closed; the document is not read right")
	}
}

func TestJSONRequestBodies(t *testing.T) {
	doc := []byte(`{"servers":[{"url":"/api/v1"}],
		"components":{"schemas":{"Closed":{"type":"object","additionalProperties":false}}},
		"paths":{
		"/a":{"parameters":[],"post":{"requestBody":{"content":{"application/json":{"schema":{"$ref":"#/components/schemas/Closed"}}}}},
			"get":{}},
		"/b":{"put":{"requestBody":{"content":{"application/json":{"schema":{"type":"object","additionalProperties":true}}}}}},
		"/c":{"post":{"requestBody":{"content":{"application/json":{"schema":{"type":"object"}}}}}},
		"/d":{"post":{"requestBody":{"content":{"application/octet-stream":{"schema":{"type":"string"}}}}}}}}`)
	bodies, err := jsonRequestBodies(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 3 {
		t.Fatalf("bodies = %v, want POST /a, PUT /b and POST /c", bodies)
	}
	for op, want := range map[string][2]bool{"POST /api/v1/a": {true, true}, "PUT /api/v1/b": {false, true}, "POST /api/v1/c": {false, false}} {
		if c, d := bodyClosed(bodies[op]); c != want[0] || d != want[1] {
			t.Errorf("%s: closed %v declared %v, want %v", op, c, d, want)
		}
	}
	if _, err := jsonRequestBodies([]byte(`{"paths":{"/x":{"post":{"requestBody":{"content":{"application/json":{"schema":{"$ref":"#/components/schemas/Nope"}}}}}}}}`)); err == nil {
		t.Error("a dangling $ref was not reported")
	}
}

// mxBodyIsClosed reports whether the document closes the JSON request body of the route that
// serves method and path (a path of the bad-input table, {placeholders} and all).
func mxBodyIsClosed(t *testing.T, w *mxWorld, method, path string) bool {
	t.Helper()
	path, _, _ = strings.Cut(mxPlaceholder.ReplaceAllString(path, "1"), "?")
	rt := mxRouteOf(w, method, path)
	if rt == "" {
		t.Fatalf("%s %s matches no route", method, path)
	}
	bodies, err := servedJSONBodies()
	if err != nil {
		t.Fatal(err)
	}
	schema, ok := bodies[openAPIPath(rt)]
	if !ok {
		t.Fatalf("%s (%s %s) takes JSON but the OpenAPI document gives it no application/json request body", rt, method, path)
	}
	closed, _ := bodyClosed(schema)
	return closed
}
