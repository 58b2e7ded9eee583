package registry

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// caller is who sent a request: the principal, and the registry token it came with (nil for
// HTTP Basic, a Nimbus token sent as a bearer, or nobody).
type caller struct {
	p      *auth.Principal
	bearer *claims
}

// challenge is the WWW-Authenticate value of a 401: Docker's token scheme, which sends clients
// to the token endpoint with the scope they need.
func (h *Handler) challenge(scope string) string {
	v := fmt.Sprintf(`Bearer realm="%s",service="%s"`, h.realm, h.service)
	if scope != "" {
		v += fmt.Sprintf(`,scope="%s"`, scope)
	}
	return v
}

func scopeFor(name, action string) string {
	actions := action
	if action == actionPush {
		actions = "pull,push" // a push reads too (HEAD of blobs that may exist)
	}
	return "repository:" + name + ":" + actions
}

func unauthorized(scope, format string, args ...any) *Error {
	e := ociError(http.StatusUnauthorized, CodeUnauthorized, format, args...)
	e.challenge = scope
	return e
}

// authenticate reads the Authorization header: a registry bearer token, a Nimbus token (as a
// bearer or as the password of HTTP Basic), or nothing (anonymous). Account passwords are taken
// only by the token endpoint, which rate-limits them; cookies count for nothing here, so no
// browser session can be ridden into a push. Bad credentials are a 401, never anonymous.
func (h *Handler) authenticate(r *http.Request, scope string) (caller, error) {
	hdr := r.Header.Get("Authorization")
	if hdr == "" {
		return caller{p: &auth.Principal{Kind: auth.KindAnonymous}}, nil
	}
	scheme, cred, _ := strings.Cut(hdr, " ")
	cred = strings.TrimSpace(cred)
	if strings.EqualFold(scheme, "bearer") && !strings.HasPrefix(cred, "nb") {
		c, err := h.verify(cred)
		if err != nil {
			return caller{}, unauthorized(scope, "the bearer token is invalid or expired")
		}
		return caller{p: c.principal(), bearer: c}, nil
	}
	if !strings.EqualFold(scheme, "bearer") && !strings.EqualFold(scheme, "basic") {
		return caller{}, unauthorized(scope, "unsupported Authorization scheme %q", scheme)
	}
	// auth.Authenticate takes Bearer and Basic with a Nimbus token, and only that.
	req := &http.Request{Header: http.Header{"Authorization": {hdr}}}
	p, err := h.users.Authenticate(r.Context(), req)
	if err != nil {
		var ae *fault.Error
		if errors.As(err, &ae) {
			return caller{}, unauthorized(scope, "invalid credentials: send a Nimbus token, or log in through the token endpoint")
		}
		return caller{}, err
	}
	return caller{p: p}, nil
}

// authorize decides whether the caller may do action on the repository of rt, and returns the
// repo. Answers, as Docker clients expect them:
//
//   - anonymous and not allowed (including: no such repo, another team's private repo): 401
//     with a challenge, so the client logs in and asks again;
//   - authenticated, but cannot see the repo (or it does not exist): 404 NAME_UNKNOWN, never a
//     hint that a private repo exists;
//   - sees the repo but may not do this (a reader pushing, a deploy token pushing, a job token
//     of another repo, a token without registry:write, an archived repo): 403 DENIED;
//   - a registry token that was not granted this action, for a caller who may do it: 401 with
//     the needed scope (insufficient_scope), so the client fetches a wider token.
func (h *Handler) authorize(r *http.Request, c caller, rt route, action string) (*repo.Access, error) {
	scope := scopeFor(rt.name, action)
	if rt.org == "" {
		if !c.p.Authenticated() {
			return nil, unauthorized(scope, "authentication required")
		}
		return nil, errNameUnknown(rt.name)
	}
	a, err := h.repos.ResolveRegistry(r.Context(), c.p, rt.org, rt.repo, levelOf(action))
	if err != nil {
		var ae *fault.Error
		if !errors.As(err, &ae) {
			return nil, err
		}
		switch {
		case !c.p.Authenticated():
			return nil, unauthorized(scope, "authentication required")
		case ae.Code == fault.CodeForbidden:
			return nil, ociError(http.StatusForbidden, CodeDenied, "%s", ae.Message)
		default:
			return nil, errNameUnknown(rt.name)
		}
	}
	if c.bearer != nil && !c.bearer.allows(rt.name, action) {
		return nil, unauthorized(scope, "the token does not grant %s on %s", action, rt.name)
	}
	if action != actionPull && a.Repo.Archived {
		return nil, ociError(http.StatusForbidden, CodeDenied, "repo %s/%s is archived", a.Org.Name, a.Repo.Name)
	}
	return a, nil
}

// mayRead reports whether the caller may pull from the repository of rt, without answering:
// the source of a cross-repository mount, which falls back to an upload when it is not readable.
func (h *Handler) mayRead(r *http.Request, c caller, rt route) (*repo.Access, bool) {
	a, err := h.repos.ResolveRegistry(r.Context(), c.p, rt.org, rt.repo, repo.Read)
	return a, err == nil
}
