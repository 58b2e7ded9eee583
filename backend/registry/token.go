package registry

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// Actions of a token scope ("repository:acme/app:pull,push").
const (
	actionPull   = "pull"
	actionPush   = "push"
	actionDelete = "delete"
)

// levelOf is the repo level an action needs. Deleting manifests, tags and blobs is for repo
// admins: a pipeline (write) may overwrite a tag, never remove what inference services pull.
func levelOf(action string) repo.Level {
	switch action {
	case actionPush:
		return repo.Write
	case actionDelete:
		return repo.Admin
	default:
		return repo.Read
	}
}

// access is one scope a bearer token grants.
type access struct {
	Type    string   `json:"type"`
	Name    string   `json:"name"`
	Actions []string `json:"actions"`
}

// claims is the payload of a registry bearer token (an HS256 JWT). The token is the caller's
// identity, as the token endpoint authenticated it, plus the scopes it was granted; every
// request is still authorized against the repo as it is now.
type claims struct {
	Issuer    string   `json:"iss"`
	Subject   string   `json:"sub"`
	Audience  string   `json:"aud"`
	IssuedAt  int64    `json:"iat"`
	NotBefore int64    `json:"nbf"`
	Expires   int64    `json:"exp"`
	Kind      string   `json:"nimbus_kind"`
	UserID    int64    `json:"nimbus_uid,omitempty"`
	TokenID   int64    `json:"nimbus_tid,omitempty"`
	RepoID    int64    `json:"nimbus_rid,omitempty"`
	Pipeline  int64    `json:"nimbus_pid,omitempty"`
	Scopes    []string `json:"nimbus_scopes,omitempty"`
	Access    []access `json:"access"`
}

const tokenIssuer = "nimbus"

var errBadBearer = errors.New("registry: invalid bearer token")

// tokenKey derives the signing key from the server key, so a registry token can never be
// mistaken for anything else the key protects.
func tokenKey(serverKey []byte) []byte {
	m := hmac.New(sha256.New, serverKey)
	m.Write([]byte("nimbus registry bearer token v1"))
	return m.Sum(nil)
}

var jwtHeader = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))

func (h *Handler) sign(c claims) (string, error) {
	payload, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("registry: token: %w", err)
	}
	signed := jwtHeader + "." + base64.RawURLEncoding.EncodeToString(payload)
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte(signed))
	return signed + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil)), nil
}

// verify checks a bearer token's signature, audience and lifetime.
func (h *Handler) verify(token string) (*claims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] != jwtHeader {
		return nil, errBadBearer
	}
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte(parts[0] + "." + parts[1]))
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || !hmac.Equal(sig, m.Sum(nil)) {
		return nil, errBadBearer
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, errBadBearer
	}
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, errBadBearer
	}
	now := h.clock.Now().Unix()
	if c.Issuer != tokenIssuer || c.Audience != h.service || now >= c.Expires || now < c.NotBefore-60 {
		return nil, errBadBearer
	}
	return &c, nil
}

// principal rebuilds the caller the token was issued to.
func (c *claims) principal() *auth.Principal {
	p := &auth.Principal{Kind: auth.Kind(c.Kind), Scopes: c.Scopes, TokenID: c.TokenID, RepoID: c.RepoID, PipelineID: c.Pipeline}
	if c.UserID != 0 {
		p.User = &auth.User{ID: c.UserID, Username: c.Subject}
	}
	return p
}

// allows reports whether the token was granted action on the repository name.
func (c *claims) allows(name, action string) bool {
	for _, a := range c.Access {
		if a.Type == "repository" && a.Name == name && (slices.Contains(a.Actions, action) || slices.Contains(a.Actions, "*")) {
			return true
		}
	}
	return false
}

// tokenResponse is what Docker's token protocol answers.
type tokenResponse struct {
	Token       string `json:"token"`
	AccessToken string `json:"access_token"`
	ExpiresIn   int    `json:"expires_in"`
	IssuedAt    string `json:"issued_at"`
}

// serveToken is GET /v2/token: Docker's token protocol. The caller authenticates with HTTP
// Basic (username + password, or any Nimbus token as the password), a Nimbus token as a bearer,
// or not at all (public pulls); each requested scope is granted the actions the caller may do now, possibly none —
// the token endpoint narrows, it does not refuse.
func (h *Handler) serveToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		h.fail(w, r, ociError(http.StatusMethodNotAllowed, CodeUnsupported, "the token endpoint takes GET"))
		return
	}
	p := &auth.Principal{Kind: auth.KindAnonymous}
	if user, pass, ok := r.BasicAuth(); ok {
		ip, _, _ := net.SplitHostPort(r.RemoteAddr)
		var err error
		if p, err = h.users.AuthenticateBasic(r.Context(), user, pass, ip); err != nil {
			var ae *fault.Error
			if errors.As(err, &ae) && ae.Code == fault.CodeRateLimited {
				if secs, ok := ae.Details["retry_after_seconds"].(int); ok {
					w.Header().Set("Retry-After", strconv.Itoa(secs))
				}
				h.fail(w, r, ociError(http.StatusTooManyRequests, CodeTooManyRequests, "%s", ae.Message))
				return
			}
			if !errors.As(err, &ae) {
				h.fail(w, r, err)
				return
			}
			w.Header().Set("WWW-Authenticate", `Basic realm="Nimbus"`)
			writeJSON(w, r, http.StatusUnauthorized, errorBody{Errors: []errorEntry{{Code: CodeUnauthorized, Message: "invalid username, password or token"}}})
			return
		}
	} else if r.Header.Get("Authorization") != "" {
		// A Nimbus token as a bearer (an identity token, in Docker's words).
		c, err := h.authenticate(r, "")
		if err != nil || c.bearer != nil {
			h.fail(w, r, unauthorized("", "send HTTP Basic credentials or a Nimbus token"))
			return
		}
		p = c.p
	}
	var granted []access
	for _, param := range r.URL.Query()["scope"] {
		for _, scope := range strings.Fields(param) {
			a, ok := h.grant(r, p, scope)
			if ok {
				granted = append(granted, a)
			}
		}
	}
	now := h.clock.Now()
	c := claims{Issuer: tokenIssuer, Audience: h.service, IssuedAt: now.Unix(), NotBefore: now.Unix(),
		Expires: now.Add(h.tokenTTL).Unix(), Kind: string(p.Kind), TokenID: p.TokenID, RepoID: p.RepoID,
		Pipeline: p.PipelineID, Scopes: p.Scopes, Access: granted}
	if p.User != nil {
		c.UserID, c.Subject = p.User.ID, p.User.Username
	}
	if granted == nil {
		c.Access = []access{}
	}
	tok, err := h.sign(c)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, tokenResponse{Token: tok, AccessToken: tok, ExpiresIn: int(h.tokenTTL / time.Second),
		IssuedAt: now.UTC().Format(time.RFC3339)})
}

// grant returns the actions of one "repository:<name>:<actions>" scope that p may do.
func (h *Handler) grant(r *http.Request, p *auth.Principal, scope string) (access, bool) {
	typ, rest, _ := strings.Cut(scope, ":")
	i := strings.LastIndex(rest, ":")
	if typ != "repository" || i < 0 {
		return access{}, false // registry:catalog:* and the like: nothing to grant
	}
	name, actions := rest[:i], strings.Split(rest[i+1:], ",")
	rt, ok := parseName(name)
	if !ok {
		return access{}, false
	}
	a := access{Type: "repository", Name: name, Actions: []string{}}
	for _, act := range []string{actionPull, actionPush, actionDelete} {
		if !slices.Contains(actions, act) && !slices.Contains(actions, "*") {
			continue
		}
		if _, err := h.repos.ResolveRegistry(r.Context(), p, rt.org, rt.repo, levelOf(act)); err == nil {
			a.Actions = append(a.Actions, act)
		}
	}
	return a, true
}

func writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(b)
	}
}
