package auth

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/nimbus-build/nimbus/backend/fault"
	"gorm.io/gorm"
)

// CookieName is the session cookie.
const CookieName = "nimbus_session"

// HeaderCSRF must accompany every cookie-authenticated write.
const HeaderCSRF = "X-CSRF-Token"

var errBadToken = fault.Unauthenticated("the token is invalid, expired or revoked")

// CreateToken issues a personal access token; the secret is returned once and stored hashed.
func (s *Service) CreateToken(ctx context.Context, u *User, name string, scopes []string, expiresAt *time.Time) (string, *AccessToken, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 100 {
		return "", nil, fault.Invalid("name", "name must be 1–100 characters")
	}
	if len(scopes) == 0 {
		return "", nil, fault.Invalid("scopes", "at least one scope is required (known: %s)", strings.Join(AllScopes, ", "))
	}
	sc, err := ParseScopes(scopes)
	if err != nil {
		return "", nil, fault.Invalid("scopes", "%s", err.Error())
	}
	if sc.Has(ScopeAdmin) && !u.IsAdmin {
		return "", nil, fault.Forbidden("only platform admins may create tokens with the admin scope")
	}
	now := s.clock.Now().UTC()
	if expiresAt != nil && !expiresAt.After(now) {
		return "", nil, fault.Invalid("expires_at", "expires_at must be in the future")
	}
	raw, err := NewToken(PrefixPersonal)
	if err != nil {
		return "", nil, err
	}
	t := &AccessToken{UserID: u.ID, Name: name, TokenHash: HashToken(raw), Prefix: raw[:len(PrefixPersonal)+6],
		Scopes: sc.String(), ExpiresAt: expiresAt, CreatedAt: now}
	if err := s.db.WithContext(ctx).Create(t).Error; err != nil {
		return "", nil, err
	}
	return raw, t, nil
}

// ListTokens returns the user's tokens, oldest first, without secrets.
func (s *Service) ListTokens(ctx context.Context, userID int64) ([]AccessToken, error) {
	var ts []AccessToken
	err := s.db.WithContext(ctx).Where("user_id = ?", userID).Order("id").Find(&ts).Error
	return ts, err
}

// RevokeToken revokes one of the user's tokens. Another user's token id is a 404.
func (s *Service) RevokeToken(ctx context.Context, userID, id int64) error {
	var t AccessToken
	err := s.db.WithContext(ctx).Where("id = ? AND user_id = ?", id, userID).Take(&t).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return fault.NotFound("token not found")
	}
	if err != nil || t.RevokedAt != nil {
		return err // revoking twice is a no-op
	}
	return s.db.WithContext(ctx).Model(&t).Update("revoked_at", s.clock.Now().UTC()).Error
}

// Authenticate resolves a request's credentials: a bearer token, HTTP Basic with a token as the
// password, or the session cookie. No credentials is the anonymous principal; bad credentials
// are an error (a client with a revoked token must learn it, not silently become anonymous).
func (s *Service) Authenticate(ctx context.Context, r *http.Request) (*Principal, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, cred, _ := strings.Cut(h, " ")
		switch strings.ToLower(scheme) {
		case "bearer":
			return s.principalForToken(ctx, strings.TrimSpace(cred))
		case "basic":
			_, pass, ok := decodeBasic(cred)
			if !ok {
				return nil, fault.Unauthenticated("malformed Basic credentials")
			}
			return s.principalForToken(ctx, pass)
		default:
			return nil, fault.Unauthenticated("unsupported Authorization scheme %q (use Bearer)", scheme)
		}
	}
	if c, err := r.Cookie(CookieName); err == nil && c.Value != "" {
		p, err := s.principalForSession(ctx, c.Value)
		if err != nil {
			return nil, err
		}
		if p != nil {
			return p, nil
		}
	}
	a := anonymous
	return &a, nil
}

// PrincipalForToken resolves a bearer token that did not come in a request's header (the token
// of a cnb:trigger task).
func (s *Service) PrincipalForToken(ctx context.Context, token string) (*Principal, error) {
	return s.principalForToken(ctx, token)
}

// AuthenticateBasic resolves HTTP Basic credentials for git and the registry: the password may
// be the account's password (subject to the login rate limit) or any token.
func (s *Service) AuthenticateBasic(ctx context.Context, username, password, ip string) (*Principal, error) {
	if p, err := s.principalForToken(ctx, password); err == nil {
		return p, nil
	} else if s.isToken(password) {
		return nil, err
	}
	u, err := s.Login(ctx, username, password, ip)
	if err != nil {
		return nil, err
	}
	// A password proves the whole account, like a session; CSRF does not apply to Basic auth.
	return &Principal{Kind: KindToken, User: u, Scopes: Scopes(AllScopes)}, nil
}

func (s *Service) isToken(v string) bool {
	if strings.HasPrefix(v, PrefixPersonal) {
		return true
	}
	for prefix := range s.resolvers {
		if strings.HasPrefix(v, prefix) {
			return true
		}
	}
	return false
}

func decodeBasic(cred string) (user, pass string, ok bool) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return "", "", false
	}
	return strings.Cut(string(b), ":")
}

func (s *Service) principalForToken(ctx context.Context, token string) (*Principal, error) {
	if !strings.HasPrefix(token, PrefixPersonal) {
		for prefix, resolve := range s.resolvers {
			if strings.HasPrefix(token, prefix) {
				return resolve(ctx, token)
			}
		}
		return nil, errBadToken
	}
	var t AccessToken
	err := s.db.WithContext(ctx).Where("token_hash = ?", HashToken(token)).Take(&t).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, errBadToken
	}
	if err != nil {
		return nil, err
	}
	now := s.clock.Now().UTC()
	if t.RevokedAt != nil || (t.ExpiresAt != nil && !now.Before(*t.ExpiresAt)) {
		return nil, errBadToken
	}
	var u User
	if err := s.db.WithContext(ctx).Take(&u, t.UserID).Error; err != nil {
		return nil, errBadToken
	}
	// last_used_at is written at most once a minute: a busy CI script must not turn every read
	// into a write.
	s.db.WithContext(ctx).Model(&AccessToken{}).
		Where("id = ? AND (last_used_at IS NULL OR last_used_at < ?)", t.ID, now.Add(-time.Minute)).
		Update("last_used_at", now)
	return &Principal{Kind: KindToken, User: &u, Scopes: splitScopes(t.Scopes), TokenID: t.ID}, nil
}

// principalForSession returns nil, nil for an unknown or expired session: a stale cookie makes
// the request anonymous rather than failing it.
func (s *Service) principalForSession(ctx context.Context, raw string) (*Principal, error) {
	var sess Session
	err := s.db.WithContext(ctx).Where("id = ?", HashToken(raw)).Take(&sess).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	now := s.clock.Now().UTC()
	if !now.Before(sess.ExpiresAt) {
		s.db.WithContext(ctx).Delete(&sess)
		return nil, nil
	}
	var u User
	if err := s.db.WithContext(ctx).Take(&u, sess.UserID).Error; err != nil {
		return nil, nil
	}
	if now.Sub(sess.LastSeenAt) > time.Minute {
		s.db.WithContext(ctx).Model(&Session{}).Where("id = ?", sess.ID).Update("last_seen_at", now)
	}
	return &Principal{Kind: KindSession, User: &u, SessionID: sess.ID, CSRFToken: sess.CSRFToken}, nil
}

// checkCSRF enforces the CSRF header on cookie-authenticated writes.
func checkCSRF(r *http.Request, p *Principal) error {
	if p.Kind != KindSession {
		return nil
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	got := r.Header.Get(HeaderCSRF)
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(p.CSRFToken)) != 1 {
		return fault.Forbidden("missing or wrong %s header (the login response and GET /api/v1/user return it as csrf_token)", HeaderCSRF)
	}
	return nil
}
