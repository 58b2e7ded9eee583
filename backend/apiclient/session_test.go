package apiclient

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A session client keeps the cookie and the CSRF token of its signup and sends both with its
// later requests, as the dashboard does; the caller's http.Client is left without a jar.
func TestSessionKeepsCookieAndCSRF(t *testing.T) {
	var gotCookie, gotCSRF string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/auth/signup":
			http.SetCookie(w, &http.Cookie{Name: "nimbus_session", Value: "s3cret", Path: "/"})
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"csrf_token": "c5rf", "user": {}}`)
		case "/api/v1/user/tokens":
			if c, err := r.Cookie("nimbus_session"); err == nil {
				gotCookie = c.Value
			}
			gotCSRF = r.Header.Get("X-CSRF-Token")
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"id": 1, "name": "ci", "token": "nbp_x", "scopes": ["repo:write"]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	shared := &http.Client{}
	c := New(srv.URL, WithHTTPClient(shared), WithSession())
	ctx := context.Background()
	if _, err := c.Signup(ctx, "a@example.com", "alice", "a long enough passphrase"); err != nil {
		t.Fatal(err)
	}
	tok, err := c.CreateToken(ctx, "ci", "repo:write")
	if err != nil {
		t.Fatal(err)
	}
	if tok.Token != "nbp_x" || gotCookie != "s3cret" || gotCSRF != "c5rf" {
		t.Fatalf("token %q, cookie %q, CSRF %q", tok.Token, gotCookie, gotCSRF)
	}
	if shared.Jar != nil {
		t.Fatal("the caller's http.Client got the session's jar")
	}
}
