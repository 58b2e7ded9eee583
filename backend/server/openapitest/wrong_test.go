package openapitest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestWrongResponsesAreReported: each kind of drift between a response and the document is
// caught, with the reason in the message.
func TestWrongResponsesAreReported(t *testing.T) {
	v := newTestValidator(t)
	for _, c := range []struct {
		name, path string
		status     int
		body, want string
	}{
		{"undeclared status", "/api/v1/things/7", 400, `{"error":{"code":"bad_request"}}`, "status 400 is not declared"},
		{"undeclared 2xx", "/api/v1/things/7", 201, `{"id":7,"name":"a"}`, "status 201 is not declared"},
		{"wrong type", "/api/v1/things/7", 200, `{"id":"7","name":"a"}`, `"id"`},
		{"null for an object", "/api/v1/things/7", 200, `{"id":7,"name":"a","labels":null}`, `"labels"`},
		{"extra field", "/api/v1/things/7", 200, `{"id":7,"name":"a","owner":"x"}`, `"owner"`},
		{"extra field in a nested object", "/api/v1/things/7", 404, `{"error":{"code":"x","why":"y"}}`, `"why"`},
		{"extra field beside an allOf", "/api/v1/things/7/secret", 200, `{"id":7,"name":"a","content":"x","more":1}`, `"more"`},
		{"missing required", "/api/v1/things/7", 200, `{"id":7}`, `"name"`},
		{"missing required of an allOf member", "/api/v1/things/7/secret", 200, `{"id":7,"name":"a"}`, `"content"`},
		{"not JSON", "/api/v1/things/7", 200, `{"id":7,`, "decode"},
	} {
		err := check(v, "GET", c.path, c.status, "application/json", c.body)
		if err == nil {
			t.Errorf("%s: %s passed", c.name, c.body)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error does not mention %s:\n%v", c.name, c.want, err)
		}
	}
	if err := check(v, "GET", "/api/v1/things/7", 200, "text/plain", "hello"); err == nil {
		t.Error("an undeclared content type passed")
	}
}

// TestWrappersReport: the Handler and the Transport hand every wrong response to report and
// pass the response itself through unchanged.
func TestWrappersReport(t *testing.T) {
	v := newTestValidator(t)
	const extra = `{"id":7,"name":"a","owner":"x"}`
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/7") {
			io.WriteString(w, `{"id":7,"name":"a"}`)
			return
		}
		io.WriteString(w, extra)
	})

	var fromHandler []error
	srv := httptest.NewServer(v.Handler(app, func(err error) { fromHandler = append(fromHandler, err) }))
	defer srv.Close()
	var fromTransport []error
	client := &http.Client{Transport: v.Transport(nil, func(err error) { fromTransport = append(fromTransport, err) })}

	for _, id := range []string{"7", "8"} {
		res, err := client.Get(srv.URL + "/api/v1/things/" + id)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if id == "8" && string(body) != extra {
			t.Errorf("the client read %q through the wrappers, want %q", body, extra)
		}
	}
	if len(fromHandler) != 1 || !strings.Contains(fromHandler[0].Error(), `"owner"`) {
		t.Errorf("Handler reported %v, want one error about the extra field", fromHandler)
	}
	if len(fromTransport) != 1 || !strings.Contains(fromTransport[0].Error(), `"owner"`) {
		t.Errorf("Transport reported %v, want one error about the extra field", fromTransport)
	}
}

// TestWrongServerResponsesAreReported: the same drift is caught against the server's own
// document, for an operation every principal may call.
func TestWrongServerResponsesAreReported(t *testing.T) {
	v, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := check(v, "GET", "/api/v1/version", 200, "application/json", `{"version":"1.2.3"}`); err != nil {
		t.Fatalf("the right answer was refused: %v", err)
	}
	for _, c := range []struct {
		name   string
		status int
		body   string
	}{
		{"undeclared status", 402, `{"error":{"code":"internal","message":"x"}}`},
		{"wrong type", 200, `{"version":1}`},
		{"extra field", 200, `{"version":"1.2.3","commit":"abc"}`},
		{"missing required", 200, `{}`},
		{"error envelope with an unknown code", 500, `{"error":{"code":"oops","message":"x"}}`},
	} {
		if err := check(v, "GET", "/api/v1/version", c.status, "application/json", c.body); err == nil {
			t.Errorf("%s: %d %s passed", c.name, c.status, c.body)
		}
	}
}
