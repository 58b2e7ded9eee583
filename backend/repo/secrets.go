package repo

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/fault"
)

var secretNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// MaxSecretSize caps a secret's value.
const MaxSecretSize = 64 << 10

func secretContext(repoID int64, name string) string {
	return fmt.Sprintf("repo:%d:secret:%s", repoID, name)
}

// SecretInfo is what the API shows of a secret: never its value.
type SecretInfo struct {
	ID        int64     `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// PutSecret creates or replaces a secret. Names are environment variable names, since secrets
// reach jobs as variables.
func (s *Service) PutSecret(ctx context.Context, r *Repo, name, value string) error {
	if !secretNameRE.MatchString(name) || strings.HasPrefix(strings.ToUpper(name), "CNB_") {
		return fault.Invalid("name", "secret names are environment variable names ([A-Za-z_][A-Za-z0-9_]*, at most 128) and may not start with CNB_")
	}
	if value == "" || len(value) > MaxSecretSize {
		return fault.Invalid("value", "value must be 1 to %d bytes", MaxSecretSize)
	}
	sealed, err := s.box.Seal([]byte(value), secretContext(r.ID, name))
	if err != nil {
		return err
	}
	now := s.clock.Now().UTC()
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&Secret{}).Where("repo_id = ? AND name = ?", r.ID, name).Updates(map[string]any{"sealed": sealed, "updated_at": now})
		if res.Error != nil || res.RowsAffected > 0 {
			return res.Error
		}
		return tx.Create(&Secret{RepoID: r.ID, Name: name, Sealed: sealed, CreatedAt: now, UpdatedAt: now}).Error
	})
}

// ListSecrets returns the names of the repo's secrets.
func (s *Service) ListSecrets(ctx context.Context, repoID int64) ([]SecretInfo, error) {
	var out []SecretInfo
	err := s.db.WithContext(ctx).Model(&Secret{}).Select("id, name, created_at, updated_at").
		Where("repo_id = ?", repoID).Order("id").Scan(&out).Error
	if out == nil {
		out = []SecretInfo{}
	}
	return out, err
}

// DeleteSecret removes a secret.
func (s *Service) DeleteSecret(ctx context.Context, repoID int64, name string) error {
	res := s.db.WithContext(ctx).Where("repo_id = ? AND name = ?", repoID, name).Delete(&Secret{})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return fault.NotFound("secret %q not found", name)
	}
	return nil
}

// SecretValues decrypts every secret of a repo, for handing to a pipeline's jobs.
func (s *Service) SecretValues(ctx context.Context, repoID int64) (map[string]string, error) {
	var rows []Secret
	if err := s.db.WithContext(ctx).Where("repo_id = ?", repoID).Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		v, err := s.box.Open(r.Sealed, secretContext(repoID, r.Name))
		if err != nil {
			return nil, fmt.Errorf("secret %s: %w", r.Name, err)
		}
		out[r.Name] = string(v)
	}
	return out, nil
}

// DeployTokenInfo is a deploy token without its secret.
type DeployTokenInfo struct {
	ID         int64      `json:"id"`
	Name       string     `json:"name"`
	Prefix     string     `json:"prefix"`
	Scopes     []string   `json:"scopes"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
	CreatedAt  time.Time  `json:"created_at"`
	Token      string     `json:"token,omitempty"`
}

// DeployScopes are what every deploy token may do: read the repo and pull from its registry.
var DeployScopes = auth.Scopes{auth.ScopeRegistryRead, auth.ScopeRepoRead}

func deployInfo(t *DeployToken, secret string) DeployTokenInfo {
	return DeployTokenInfo{ID: t.ID, Name: t.Name, Prefix: t.Prefix, Scopes: DeployScopes, ExpiresAt: t.ExpiresAt,
		LastUsedAt: t.LastUsedAt, RevokedAt: t.RevokedAt, CreatedAt: t.CreatedAt, Token: secret}
}

// CreateDeployToken issues a read-only token for the repo; the secret is shown once.
func (s *Service) CreateDeployToken(ctx context.Context, r *Repo, creator int64, name string, expiresAt *time.Time) (DeployTokenInfo, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 100 {
		return DeployTokenInfo{}, fault.Invalid("name", "name must be 1–100 characters")
	}
	now := s.clock.Now().UTC()
	if expiresAt != nil && !expiresAt.After(now) {
		return DeployTokenInfo{}, fault.Invalid("expires_at", "expires_at must be in the future")
	}
	raw, err := auth.NewToken(auth.PrefixDeploy)
	if err != nil {
		return DeployTokenInfo{}, err
	}
	t := &DeployToken{RepoID: r.ID, Name: name, TokenHash: auth.HashToken(raw), Prefix: raw[:len(auth.PrefixDeploy)+6],
		CreatedBy: creator, ExpiresAt: expiresAt, CreatedAt: now}
	if err := s.db.WithContext(ctx).Create(t).Error; err != nil {
		return DeployTokenInfo{}, err
	}
	return deployInfo(t, raw), nil
}

// ListDeployTokens lists the repo's deploy tokens.
func (s *Service) ListDeployTokens(ctx context.Context, repoID int64) ([]DeployTokenInfo, error) {
	var ts []DeployToken
	if err := s.db.WithContext(ctx).Where("repo_id = ?", repoID).Order("id").Find(&ts).Error; err != nil {
		return nil, err
	}
	out := make([]DeployTokenInfo, 0, len(ts))
	for i := range ts {
		out = append(out, deployInfo(&ts[i], ""))
	}
	return out, nil
}

// RevokeDeployToken revokes one of the repo's deploy tokens.
func (s *Service) RevokeDeployToken(ctx context.Context, repoID, id int64) error {
	var t DeployToken
	err := s.db.WithContext(ctx).Where("id = ? AND repo_id = ?", id, repoID).Take(&t).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return fault.NotFound("deploy token not found")
	}
	if err != nil || t.RevokedAt != nil {
		return err // revoking twice is a no-op
	}
	return s.db.WithContext(ctx).Model(&t).Update("revoked_at", s.clock.Now().UTC()).Error
}

// ResolveDeployToken authenticates a deploy token; it is registered with auth for its prefix.
func (s *Service) ResolveDeployToken(ctx context.Context, token string) (*auth.Principal, error) {
	bad := fault.Unauthenticated("the token is invalid, expired or revoked")
	var t DeployToken
	err := s.db.WithContext(ctx).Where("token_hash = ?", auth.HashToken(token)).Take(&t).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, bad
	}
	if err != nil {
		return nil, err
	}
	now := s.clock.Now().UTC()
	if t.RevokedAt != nil || (t.ExpiresAt != nil && !now.Before(*t.ExpiresAt)) {
		return nil, bad
	}
	s.db.WithContext(ctx).Model(&DeployToken{}).
		Where("id = ? AND (last_used_at IS NULL OR last_used_at < ?)", t.ID, now.Add(-time.Minute)).Update("last_used_at", now)
	return &auth.Principal{Kind: auth.KindDeploy, Scopes: DeployScopes, TokenID: t.ID, RepoID: t.RepoID}, nil
}
