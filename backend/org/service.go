package org

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/fault"
	nmail "github.com/nimbus-build/nimbus/backend/mail"
	"github.com/nimbus-build/nimbus/backend/store"
)

// CreateHook runs inside the transaction that creates an org (billing opens its account there),
// so an org never exists without what must come with it.
type CreateHook func(tx *gorm.DB, o *Org) error

// DeleteCheck may veto deleting an org (repos still present, money left), with an API error.
type DeleteCheck func(ctx context.Context, tx *gorm.DB, o *Org) error

// Service holds the org logic.
type Service struct {
	db       *gorm.DB
	users    *auth.Service
	clock    clock.Clock
	mail     nmail.Sender
	baseURL  string
	log      *slog.Logger
	onCreate []CreateHook
	onDelete []DeleteCheck
}

// NewService returns the org service. publicURL goes into invitation emails.
func NewService(db *gorm.DB, users *auth.Service, clk clock.Clock, mailer nmail.Sender, publicURL string, log *slog.Logger) *Service {
	return &Service{db: db, users: users, clock: clk, mail: mailer, baseURL: publicURL, log: log}
}

// OnCreate registers a hook run in every org-creating transaction.
func (s *Service) OnCreate(h CreateHook) { s.onCreate = append(s.onCreate, h) }

// OnDelete registers a check run before an org is deleted, in the deleting transaction.
func (s *Service) OnDelete(c DeleteCheck) { s.onDelete = append(s.onDelete, c) }

var nameRE = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?$`)

// Org names share the root of the URL space with the server's own paths (git lives at
// /{org}/{repo}.git), so these are never org names.
var reserved = map[string]bool{
	"api": true, "v2": true, "assets": true, "healthz": true, "readyz": true, "metrics": true,
	"static": true, "login": true, "logout": true, "signup": true, "admin": true, "settings": true,
	"new": true, "user": true, "users": true, "orgs": true, "repos": true, "explore": true,
	"reset-password": true, "favicon.ico": true, "robots.txt": true, "nimbus": true, "help": true,
	"account": true,
}

// ValidateName checks an org name.
func ValidateName(name string) error {
	if !nameRE.MatchString(name) {
		return fault.Invalid("name", "org name must be 1–39 letters, digits or '-', starting and ending with a letter or digit")
	}
	if reserved[strings.ToLower(name)] {
		return fault.Invalid("name", "%q is reserved; choose another org name", name)
	}
	return nil
}

// Create makes an org with the user as its owner.
func (s *Service) Create(ctx context.Context, u *auth.User, name string) (*Org, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	now := s.clock.Now().UTC()
	o := &Org{Name: name, CreatedAt: now, UpdatedAt: now}
	err := store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		if err := tx.Create(o).Error; err != nil {
			return err
		}
		if err := tx.Create(&Member{OrgID: o.ID, UserID: u.ID, Role: Owner, CreatedAt: now}).Error; err != nil {
			return err
		}
		for _, h := range s.onCreate {
			if err := h(tx, o); err != nil {
				return err
			}
		}
		return nil
	})
	if store.IsUniqueViolation(err) {
		return nil, fault.Conflict("org name %q is taken", name)
	}
	if err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "org created", "org", o.Name, "owner", u.Username)
	return o, nil
}

// NotFound is the answer about a team the caller may not see, and about a name no team has:
// the same, byte for byte, so that no answer tells them apart (README.md, "Who sees a team").
func NotFound(name string) *fault.Error { return fault.NotFound("org %q not found", name) }

// ByName finds an org without any authorization; callers authorize with RoleOf.
func (s *Service) ByName(ctx context.Context, name string) (*Org, error) {
	var o Org
	err := s.db.WithContext(ctx).Where("lower(name) = lower(?)", name).Take(&o).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, NotFound(name)
	}
	return &o, err
}

// ByID finds an org by id.
func (s *Service) ByID(ctx context.Context, id int64) (*Org, error) {
	var o Org
	err := s.db.WithContext(ctx).Take(&o, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fault.NotFound("org not found")
	}
	return &o, err
}

// RoleOf returns the user's role in the org, or "" for a non-member.
func (s *Service) RoleOf(ctx context.Context, orgID, userID int64) (Role, error) {
	if userID == 0 {
		return "", nil
	}
	var m Member
	err := s.db.WithContext(ctx).Where("org_id = ? AND user_id = ?", orgID, userID).Take(&m).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", nil
	}
	return m.Role, err
}

// Access loads an org for a caller and returns their role. Non-members (and credentials not tied
// to a person) get a 404, so an org's existence and contents never leak through its pages.
func (s *Service) Access(ctx context.Context, p *auth.Principal, name string) (*Org, Role, error) {
	o, err := s.ByName(ctx, name)
	if err != nil {
		return nil, "", err
	}
	if p.User == nil || (p.Kind != auth.KindSession && p.Kind != auth.KindToken) {
		return nil, "", NotFound(name)
	}
	role, err := s.RoleOf(ctx, o.ID, p.User.ID)
	if err != nil {
		return nil, "", err
	}
	if role == "" {
		return nil, "", NotFound(name)
	}
	return o, role, nil
}

// Membership is an org as listed for one user.
type Membership struct {
	Org  Org
	Role Role
}

// ListForUser returns the orgs the user belongs to, by name.
func (s *Service) ListForUser(ctx context.Context, userID int64) ([]Membership, error) {
	var rows []struct {
		Org
		Role Role
	}
	err := s.db.WithContext(ctx).Table("orgs").Select("orgs.*, org_members.role").
		Joins("JOIN org_members ON org_members.org_id = orgs.id").
		Where("org_members.user_id = ?", userID).Order("orgs.id").Scan(&rows).Error
	out := make([]Membership, 0, len(rows))
	for _, r := range rows {
		out = append(out, Membership{Org: r.Org, Role: r.Role})
	}
	return out, err
}

// OrgCount is an org with its number of members.
type OrgCount struct {
	Org
	Members int
}

// Page lists every org with an id above after, by id, at most limit: the platform admins' list.
func (s *Service) Page(ctx context.Context, after int64, limit int) ([]OrgCount, error) {
	var rows []OrgCount
	err := s.db.WithContext(ctx).Table("orgs").
		Select("orgs.*, (SELECT COUNT(*) FROM org_members WHERE org_members.org_id = orgs.id) AS members").
		Where("orgs.id > ?", after).Order("orgs.id").Limit(limit).Scan(&rows).Error
	return rows, err
}

// Rename changes the org's name.
func (s *Service) Rename(ctx context.Context, o *Org, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	err := s.db.WithContext(ctx).Model(o).Updates(map[string]any{"name": name, "updated_at": s.clock.Now().UTC()}).Error
	if store.IsUniqueViolation(err) {
		return fault.Conflict("org name %q is taken", name)
	}
	if err == nil {
		o.Name = name
	}
	return err
}

// Delete removes the org, its members and invitations once every delete check agrees.
func (s *Service) Delete(ctx context.Context, o *Org) error {
	return store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		for _, c := range s.onDelete {
			if err := c(ctx, tx, o); err != nil {
				return err
			}
		}
		if err := tx.Where("org_id = ?", o.ID).Delete(&Invitation{}).Error; err != nil {
			return err
		}
		if err := tx.Where("org_id = ?", o.ID).Delete(&Member{}).Error; err != nil {
			return err
		}
		return tx.Delete(o).Error
	})
}

// MemberInfo is a member with their user's name.
type MemberInfo struct {
	UserID    int64     `json:"user_id"`
	Username  string    `json:"username"`
	Role      Role      `json:"role"`
	CreatedAt time.Time `json:"joined_at"`
}

// Members lists the org's members by username.
func (s *Service) Members(ctx context.Context, orgID int64) ([]MemberInfo, error) {
	var out []MemberInfo
	err := s.db.WithContext(ctx).Table("org_members").
		Select("org_members.user_id, users.username, org_members.role, org_members.created_at").
		Joins("JOIN users ON users.id = org_members.user_id").
		Where("org_members.org_id = ?", orgID).Order("org_members.user_id").Scan(&out).Error
	if out == nil {
		out = []MemberInfo{}
	}
	return out, err
}

// SetRole changes a member's role. Admins manage non-owner roles of non-owners; only owners touch
// owners; the last owner cannot be demoted.
func (s *Service) SetRole(ctx context.Context, o *Org, actorRole Role, username string, role Role) error {
	if !role.Valid() {
		return fault.Invalid("role", "role must be one of owner, admin, billing, developer, reporter")
	}
	u, err := s.users.UserByName(ctx, username)
	if err != nil {
		return err
	}
	return store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		m, err := lockedMember(tx, o, u)
		if err != nil {
			return err
		}
		if (m.Role == Owner || role == Owner) && actorRole != Owner {
			return fault.Forbidden("only owners can grant or change the owner role")
		}
		if m.Role == Owner && role != Owner {
			if err := lastOwnerGuard(tx, o.ID); err != nil {
				return err
			}
		}
		return tx.Model(&Member{}).Where("org_id = ? AND user_id = ?", o.ID, u.ID).Update("role", role).Error
	})
}

// RemoveMember removes a member (or lets a member leave). The last owner always remains.
func (s *Service) RemoveMember(ctx context.Context, o *Org, actor *auth.User, actorRole Role, username string) error {
	u, err := s.users.UserByName(ctx, username)
	if err != nil {
		return err
	}
	self := u.ID == actor.ID
	if !self && !actorRole.CanAdmin() {
		return fault.Forbidden("only admins and owners can remove members")
	}
	return store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		m, err := lockedMember(tx, o, u)
		if err != nil {
			return err
		}
		if m.Role == Owner {
			if !self && actorRole != Owner {
				return fault.Forbidden("only owners can remove an owner")
			}
			if err := lastOwnerGuard(tx, o.ID); err != nil {
				return err
			}
		}
		return tx.Where("org_id = ? AND user_id = ?", o.ID, u.ID).Delete(&Member{}).Error
	})
}

// lockedMember takes the org's owner lock (so owner changes serialise) and loads u's membership.
func lockedMember(tx *gorm.DB, o *Org, u *auth.User) (*Member, error) {
	if err := store.Lock(tx, fmt.Sprintf("org:owners:%d", o.ID)); err != nil {
		return nil, err
	}
	var m Member
	err := tx.Where("org_id = ? AND user_id = ?", o.ID, u.ID).Take(&m).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fault.NotFound("%s is not a member of %s", u.Username, o.Name)
	}
	return &m, err
}

func lastOwnerGuard(tx *gorm.DB, orgID int64) error {
	var owners int64
	if err := tx.Model(&Member{}).Where("org_id = ? AND role = ?", orgID, Owner).Count(&owners).Error; err != nil {
		return err
	}
	if owners <= 1 {
		return fault.Conflict("an org must keep at least one owner; make someone else owner first")
	}
	return nil
}
