// Package apiclient is the Go client of Nimbus's HTTP API (/api/v1, documented in
// backend/server/openapi.yaml). The `nimbus` CLI and the end-to-end tests (e2e/) both talk to
// the server through it, so the API's paths, its authentication and its error envelope are
// written down once on the client side, and the response types the client reads are checked
// against the document by this package's tests (contract_test.go): a field the document does
// not declare fails CI, as a response the server sends that the document does not declare does
// (backend/server/openapitest, whose checking transport the e2e client is built on).
//
//	caller ──New(server, WithToken(t) | WithSession())──► Client ──Do / Raw / Send──► net/http ──► /api/v1/…
//	                                          ◄── JSON into the caller's type, or *Error (the envelope)
//
// It is hand-written, not generated: the document is the reference, and the few calls the
// CLI and tests make read better as Go than generated code would. Streaming transfers (model
// files with resume, logs) build their request with NewRequest and read the body themselves;
// tests of error answers read the status and body with Raw; everything else is Do.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
)

// Client talks to one server as one caller: authenticated by a bearer token (personal,
// deploy, job), or by a browser-like session (WithSession).
type Client struct {
	server  string // without a trailing slash
	token   string
	session bool   // WithSession: cookies in a jar, the CSRF token of Signup on every request
	csrf    string // the session's CSRF token, once Signup has answered it
	http    *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithToken authenticates every request with the token (Authorization: Bearer).
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient sends requests through h (a cookie jar, a transport that checks responses, a
// redirect policy, a timeout). The default is http.DefaultClient's behaviour.
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithSession makes the client a browser-like caller, as the dashboard is: the session cookie
// that Signup's answer sets is kept in a cookie jar (the http.Client's own, when it has one),
// and the session's CSRF token goes with every later request as X-CSRF-Token, without which
// the server refuses cookie-authenticated writes. Some routes (creating personal access
// tokens) take only a session, so a caller that starts from nothing but a password needs one.
func WithSession() Option { return func(c *Client) { c.session = true } }

// New returns a client of the server at the URL (scheme, host, and the path it is served
// under, if any).
func New(server string, opts ...Option) *Client {
	c := &Client{server: strings.TrimRight(server, "/"), http: &http.Client{}}
	for _, o := range opts {
		o(c)
	}
	if c.session && c.http.Jar == nil {
		// A copy, so that the caller's http.Client (maybe shared) does not start keeping this
		// session's cookies. cookiejar.New fails on nothing without options.
		h := *c.http
		h.Jar, _ = cookiejar.New(nil)
		c.http = &h
	}
	return c
}

// NewRequest is a request to path (under the server, e.g. "/api/v1/user") with the client's
// credentials; the caller sends it with Send and reads the answer.
func (c *Client) NewRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.server+path, body)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.csrf != "" {
		req.Header.Set("X-CSRF-Token", c.csrf)
	}
	return req, nil
}

// Send sends a request made by NewRequest.
func (c *Client) Send(req *http.Request) (*http.Response, error) { return c.http.Do(req) }

// Raw sends in (JSON, unless nil) and returns the status and the body whatever the status:
// for callers that look at error answers themselves (the end-to-end tests of refusals and
// limits). An error is a request that got no answer.
func (c *Client) Raw(ctx context.Context, method, path string, in any) (int, []byte, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := c.NewRequest(ctx, method, path, body)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Send(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, raw, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	return resp.StatusCode, raw, nil
}

// Do sends in (JSON, unless nil) and decodes a 2xx answer into out (unless nil). Any other
// answer is an *Error read from the API's envelope.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	status, raw, err := c.Raw(ctx, method, path, in)
	if err != nil {
		return err
	}
	if status < 200 || status > 299 {
		return errorOf(status, raw)
	}
	if out == nil || len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the JSON expected: %w", method, path, err)
	}
	return nil
}

// Error is an answer other than a 2xx: the status and the API's error envelope
// ({"error": {"code", "message", "details"}}), when the body is one.
type Error struct {
	Status  int
	Code    string
	Message string
	Details map[string]any
}

func (e *Error) Error() string {
	status := fmt.Sprintf("%d %s", e.Status, http.StatusText(e.Status))
	if e.Message == "" {
		return status
	}
	return fmt.Sprintf("%s: %s (%s)", status, e.Message, e.Code)
}

// ErrorOf reads the error envelope of a response that is not a 2xx (at most 64 KiB of it).
func ErrorOf(resp *http.Response) *Error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return errorOf(resp.StatusCode, raw)
}

func errorOf(status int, raw []byte) *Error {
	var env struct {
		Error struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	e := &Error{Status: status}
	if json.Unmarshal(raw, &env) == nil {
		e.Code, e.Message, e.Details = env.Error.Code, env.Error.Message, env.Error.Details
	}
	return e
}

// Path joins escaped segments under /api/v1: Path("repos", org, repo) is
// "/api/v1/repos/<org>/<repo>", whatever the names hold.
func Path(segments ...string) string {
	var b strings.Builder
	b.WriteString("/api/v1")
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}
