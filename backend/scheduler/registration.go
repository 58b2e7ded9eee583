package scheduler

import (
	"context"
	"errors"
	"strings"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/fault"
)

// Platform registration tokens are how a platform admin attaches an agent from the dashboard,
// as GitHub's "New self-hosted runner" page does: the Agents page makes one, shows it once
// inside the exact nimbus-agent commands for a CPU, a GPU and a simulated-GPU host, and keeps
// only its hash. Rotating is making a new one and deleting the old: a deleted token registers
// nothing more, and the agents it registered keep their own tokens. The installation's
// configured token (NIMBUS_AGENT_REGISTRATION_TOKEN, or agent-registration.token in the data
// dir; the built-in agent uses it) works beside them and changes with the configuration.

// RegistrationTokenInfo is a platform registration token as platform admins see it; Token is
// set only in the answer that creates it.
type RegistrationTokenInfo = RunnerTokenInfo

// registrationToken finds a platform registration token.
func (s *Service) registrationToken(ctx context.Context, token string) (*RegistrationToken, error) {
	var t RegistrationToken
	err := s.db.WithContext(ctx).Where("token_hash = ?", auth.HashToken(token)).Take(&t).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fault.Unauthenticated("invalid registration token (a deleted registration token no longer registers agents)")
	}
	return &t, err
}

// CreateRegistrationToken makes a platform registration token; the token is in the answer only.
func (s *Service) CreateRegistrationToken(ctx context.Context, userID int64, name string) (RegistrationTokenInfo, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 100 {
		return RegistrationTokenInfo{}, fault.Invalid("name", "a registration token needs a name of 1–100 characters")
	}
	token, err := auth.NewToken(auth.PrefixRegister)
	if err != nil {
		return RegistrationTokenInfo{}, err
	}
	t := RegistrationToken{Name: name, TokenHash: auth.HashToken(token), CreatedBy: userID, CreatedAt: s.clock.Now().UTC()}
	if err := s.db.WithContext(ctx).Create(&t).Error; err != nil {
		return RegistrationTokenInfo{}, err
	}
	s.log.InfoContext(ctx, "registration token created", "token_id", t.ID, "name", name, "by", userID)
	return RegistrationTokenInfo{ID: t.ID, Name: t.Name, Token: token, CreatedAt: t.CreatedAt}, nil
}

// RegistrationTokens lists the platform registration tokens, oldest first.
func (s *Service) RegistrationTokens(ctx context.Context) ([]RegistrationTokenInfo, error) {
	var ts []RegistrationToken
	if err := s.db.WithContext(ctx).Order("id").Find(&ts).Error; err != nil {
		return nil, err
	}
	out := make([]RegistrationTokenInfo, len(ts))
	for i, t := range ts {
		out[i] = RegistrationTokenInfo{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt, LastUsedAt: t.LastUsedAt}
	}
	return out, nil
}

// DeleteRegistrationToken deletes a platform registration token: it registers nothing from now
// on; the agents it registered keep their own tokens.
func (s *Service) DeleteRegistrationToken(ctx context.Context, id int64) error {
	res := s.db.WithContext(ctx).Where("id = ?", id).Delete(&RegistrationToken{})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return fault.NotFound("registration token %d not found", id)
	}
	s.log.InfoContext(ctx, "registration token deleted", "token_id", id)
	return nil
}
