package auth

import (
	"github.com/nimbus-build/nimbus/backend/fault"
)

// Kind says how a request authenticated.
type Kind string

// Kinds of principals.
const (
	KindAnonymous Kind = "anonymous"
	KindSession   Kind = "session" // browser cookie
	KindToken     Kind = "token"   // personal access token
	KindDeploy    Kind = "deploy"  // read-only deploy token of one repo
	KindJob       Kind = "job"     // CNB_TOKEN of one running pipeline
)

// Principal is who is calling. Every handler asks it, never the raw request.
type Principal struct {
	Kind Kind
	// User is set for sessions and personal access tokens (and for job tokens: the user the
	// build runs as).
	User *User
	// Scopes bound what the credential may do; a session holds every scope.
	Scopes Scopes
	// TokenID is the access token's id; SessionID the session's.
	TokenID   int64
	SessionID string
	CSRFToken string
	// RepoID limits deploy and job tokens to one repository.
	RepoID int64
	// PipelineID is set for job tokens.
	PipelineID int64
}

// Anonymous is the principal of a request without credentials.
var anonymous = Principal{Kind: KindAnonymous}

// Authenticated reports whether the request carried valid credentials.
func (p *Principal) Authenticated() bool { return p.Kind != KindAnonymous }

// UserID is the user's id, or 0.
func (p *Principal) UserID() int64 {
	if p.User == nil {
		return 0
	}
	return p.User.ID
}

// Has reports whether the credential grants scope. The admin scope also needs a platform admin.
func (p *Principal) Has(scope string) bool {
	if scope == ScopeAdmin && (p.User == nil || !p.User.IsAdmin) {
		return false
	}
	if p.Kind == KindSession {
		return true
	}
	return p.Scopes.Has(scope)
}

// Need is nil when the credential grants scope, else the 403 every route answers for a token
// without it.
func (p *Principal) Need(scope string) error {
	if !p.Has(scope) {
		if p.Kind == KindDeploy {
			// A deploy token has no scopes to add: saying "lacks repo:write" sent people
			// looking for a setting that does not exist.
			return fault.Forbidden("a deploy token is read-only: it clones and pulls, never %s; use a personal access token with %s", scopeVerb(scope), scope)
		}
		return fault.Forbidden("the token lacks the %s scope", scope)
	}
	return nil
}

// scopeVerb says what a scope lets one do, for a deploy token's refusal.
func scopeVerb(scope string) string {
	switch scope {
	case ScopeRepoWrite:
		return "pushes or changes the repository"
	case ScopeRegistryWrite:
		return "pushes to the registry"
	}
	return "does what " + scope + " allows"
}

// IsPlatformAdmin reports whether the caller is a platform admin using a credential that may
// act as one.
func (p *Principal) IsPlatformAdmin() bool { return p.Has(ScopeAdmin) }
