package openapitest

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// testDocument is a small document with the shapes the server's document uses: an object
// schema, an allOf of two objects, an explicit 4xx and a default response.
const testDocument = `
openapi: 3.0.3
info: {title: t, version: "1"}
servers: [{url: /api/v1}]
paths:
  /things/{id}:
    get:
      operationId: getThing
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Thing"}
        "404":
          description: missing
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Error"}
        default:
          description: any other error
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Error"}
  /things/{id}/secret:
    get:
      operationId: getSecret
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema:
                allOf:
                  - {$ref: "#/components/schemas/Thing"}
                  - type: object
                    required: [content]
                    properties: {content: {type: string}}
  /files/{path}:
    get:
      operationId: getFile
      parameters: [{name: path, in: path, required: true, schema: {type: string}}]
      responses:
        "303": {description: elsewhere}
        "204": {description: empty}
components:
  schemas:
    Thing:
      type: object
      required: [id, name]
      properties:
        id: {type: integer}
        name: {type: string}
        labels: {type: object, additionalProperties: {type: string}}
    Error:
      type: object
      required: [error]
      properties:
        error: {type: object, required: [code], properties: {code: {type: string}}}
`

func newTestValidator(t *testing.T) *Validator {
	t.Helper()
	v, err := New([]byte(testDocument))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func check(v *Validator, method, path string, status int, ct, body string) error {
	h := http.Header{}
	if ct != "" {
		h.Set("Content-Type", ct)
	}
	return v.Check(httptest.NewRequest(method, path, nil), status, h, []byte(body))
}

// TestServerDocumentLoads: the server's own document loads and passes kin-openapi's validation
// (it once had descriptions with a comma inside a flow mapping, which YAML reads as a second key).
func TestServerDocumentLoads(t *testing.T) {
	v, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(v.ops) < 100 || v.prefix != "/api/v1" {
		t.Fatalf("%d operations under %q; is this the server's document?", len(v.ops), v.prefix)
	}
}

func TestMatchingResponsesPass(t *testing.T) {
	v := newTestValidator(t)
	for _, c := range []struct {
		name, path string
		status     int
		ct, body   string
	}{
		{"declared 200", "/api/v1/things/7", 200, "application/json; charset=utf-8", `{"id":7,"name":"a","labels":{"k":"v"}}`},
		{"declared 404", "/api/v1/things/7", 404, "application/json", `{"error":{"code":"not_found"}}`},
		{"5xx through default", "/api/v1/things/7", 503, "application/json", `{"error":{"code":"unavailable"}}`},
		{"allOf of two objects", "/api/v1/things/7/secret", 200, "application/json", `{"id":7,"name":"a","content":"x"}`},
		{"a last parameter holding slashes", "/api/v1/files/a/b/c.txt", 204, "", ""},
		{"a redirect's HTML body", "/api/v1/files/a", 303, "text/html; charset=utf-8", `<a href="/x">See Other</a>.`},
		{"outside the API", "/acme/repo.git/info/refs", 200, "text/plain", "anything"},
		{"outside the document", "/api/v1/nothing", 418, "text/plain", "anything"},
	} {
		if err := check(v, "GET", c.path, c.status, c.ct, c.body); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// Shared loads the document once per process: two calls give the same Validator, and it checks.
func TestSharedIsLoadedOnce(t *testing.T) {
	a, err := Shared()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Shared()
	if err != nil {
		t.Fatal(err)
	}
	if a != b || len(a.ops) == 0 {
		t.Fatalf("Shared gave %p and %p (%d operations)", a, b, len(a.ops))
	}
}
