// Package client is the agent's HTTP client of the Nimbus agent API described in
// internal/protocol: one file per resource (register, poll, leases, logs) and one retry policy
// (retry.go) that every call goes through. It is intended for internal use of the agent only.
//
// A Client is safe for concurrent use. Every call takes a context; cancelling it ends the call
// and any backoff at once.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Client talks to one Nimbus server with one bearer token.
type Client struct {
	base      string // scheme://host[:port][/prefix], no trailing slash
	token     string
	http      *http.Client
	retry     Retry
	userAgent string
}

// Options tune a Client; the zero value is usable.
type Options struct {
	// HTTPClient sends the requests; nil means a client without an overall timeout, because a
	// long-poll legitimately stays open for the server's PollTimeout. Bound calls with contexts.
	HTTPClient *http.Client
	// Retry is the backoff policy; zero fields take DefaultRetry's values.
	Retry Retry
	// UserAgent is sent with every request ("nimbus-agent/<version>").
	UserAgent string
}

// New returns a client of the server at baseURL that authenticates with token (the agent token;
// "" before registration).
func New(baseURL, token string, opts Options) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: server URL %q must be http(s)://host[:port]", baseURL)
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	ua := opts.UserAgent
	if ua == "" {
		ua = "nimbus-agent"
	}
	return &Client{
		base:      strings.TrimRight(u.String(), "/"),
		token:     token,
		http:      hc,
		retry:     opts.Retry.withDefaults(),
		userAgent: ua,
	}, nil
}

// WithToken returns a copy of the client that authenticates with token; the original is
// unchanged, so goroutines holding it are unaffected.
func (c *Client) WithToken(token string) *Client {
	cp := *c
	cp.token = token
	return &cp
}

// request is one API call: what to send and where to put a JSON answer.
type request struct {
	method      string
	path        string // absolute path, with its query when it has one
	body        []byte
	contentType string
	token       string // overrides the client's token (registration)
	out         any    // decoded from a 200 answer when non-nil
}

// call sends r under the retry policy and returns the final status code.
func (c *Client) call(ctx context.Context, r request) (int, error) {
	var status int
	err := c.retry.do(ctx, func() error {
		var err error
		status, err = c.once(ctx, r)
		return err
	})
	return status, err
}

// once sends r a single time. A status other than 2xx becomes an *APIError.
func (c *Client) once(ctx context.Context, r request) (int, error) {
	req, err := http.NewRequestWithContext(ctx, r.method, c.base+r.path, bytes.NewReader(r.body))
	if err != nil {
		return 0, fmt.Errorf("client: build %s %s: %w", r.method, r.path, err)
	}
	token := c.token
	if r.token != "" {
		token = r.token
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("client: %s %s: %w", r.method, r.path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, newAPIError(r.method, r.path, resp)
	}
	if r.out == nil || resp.StatusCode == http.StatusNoContent {
		// Drain so the connection goes back to the pool.
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(r.out); err != nil {
		return resp.StatusCode, fmt.Errorf("client: %s %s: decode answer: %w", r.method, r.path, err)
	}
	return resp.StatusCode, nil
}

// postJSON is the common shape of the calls: a JSON body, maybe a JSON answer.
func (c *Client) postJSON(ctx context.Context, path string, in, out any) (int, error) {
	body, err := jsonBody(in)
	if err != nil {
		return 0, err
	}
	return c.call(ctx, request{method: http.MethodPost, path: path, body: body,
		contentType: "application/json", out: out})
}

func jsonBody(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("client: encode %T: %w", v, err)
	}
	return b, nil
}

// errorEnvelope is the server's one error shape: {"error":{"code":…,"message":…}}.
type errorEnvelope struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func newAPIError(method, path string, resp *http.Response) *APIError {
	e := &APIError{Method: method, Path: path, Status: resp.StatusCode,
		RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"))}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var env errorEnvelope
	if json.Unmarshal(b, &env) == nil && env.Error.Code != "" {
		e.Code, e.Message = env.Error.Code, env.Error.Message
	} else {
		e.Message = strings.TrimSpace(string(b))
	}
	return e
}

// leasePath is the path of a call on one lease: /api/v1/agent/leases/{id}/{rest}.
func leasePath(leaseID, rest string) (string, error) {
	if leaseID == "" {
		return "", errors.New("client: empty lease id")
	}
	return protocol.PathLeases + url.PathEscape(leaseID) + "/" + rest, nil
}
