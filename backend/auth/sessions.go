package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/nimbus-build/nimbus/backend/fault"
)

// PublicSessionID derives the id the API shows for a session. Session.ID is the SHA-256 of the
// cookie, the key a cookie is looked up by; the public id is a hash of that again, shortened, so
// that the API never hands out the lookup key itself (it is not the cookie, but nothing outside
// the database needs it). 64 bits are plenty among one user's sessions.
func PublicSessionID(sessionID string) string {
	sum := sha256.Sum256([]byte("nimbus session id\x00" + sessionID))
	return hex.EncodeToString(sum[:8])
}

// ListSessions returns the user's unexpired browser sessions, most recently seen first.
func (s *Service) ListSessions(ctx context.Context, userID int64) ([]Session, error) {
	var out []Session
	err := s.db.WithContext(ctx).Where("user_id = ? AND expires_at > ?", userID, s.clock.Now().UTC()).
		Order("last_seen_at DESC, created_at DESC").Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("auth: list sessions: %w", err)
	}
	return out, nil
}

// RevokeSession ends one of the user's sessions, named by its public id (PublicSessionID). An
// unknown id, an expired session and another user's session are all a 404.
func (s *Service) RevokeSession(ctx context.Context, userID int64, publicID string) error {
	sessions, err := s.ListSessions(ctx, userID)
	if err != nil {
		return err
	}
	for _, sess := range sessions {
		if PublicSessionID(sess.ID) != publicID {
			continue
		}
		if err := s.db.WithContext(ctx).Where("id = ? AND user_id = ?", sess.ID, userID).Delete(&Session{}).Error; err != nil {
			return fmt.Errorf("auth: revoke session: %w", err)
		}
		return nil
	}
	return fault.NotFound("session not found")
}
