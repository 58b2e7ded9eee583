package org

import (
	"context"
	"errors"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/internal/human"
	nmail "github.com/nimbus-build/nimbus/backend/mail"
	"github.com/nimbus-build/nimbus/backend/store"
)

// InvitationTTL is how long an invitation stays open.
const InvitationTTL = 14 * 24 * time.Hour

// InvitationInfo is an invitation as the API shows it.
type InvitationInfo struct {
	ID        int64     `json:"id"`
	Org       string    `json:"org"`
	Username  string    `json:"username,omitempty"`
	Email     string    `json:"email,omitempty"`
	Role      Role      `json:"role"`
	InvitedBy string    `json:"invited_by"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// Mailed (only in the answer that creates it) says the invitee was emailed; when not (no
	// mail server, or the send failed) Link is what to hand them: the secret link of an email
	// invitation, the invitations page of an account's.
	Mailed *bool  `json:"mailed,omitempty"`
	Link   string `json:"link,omitempty"`
}

// Invite invites an account by username, or anyone by email, to join with role. Only owners
// invite owners. An email invitation is claimed with the secret the email carries.
func (s *Service) Invite(ctx context.Context, o *Org, actor *auth.User, actorRole Role, username, email string, role Role) (*InvitationInfo, error) {
	if !role.Valid() {
		return nil, fault.Invalid("role", "role must be one of owner, admin, billing, developer, reporter")
	}
	if role == Owner && actorRole != Owner {
		return nil, fault.Forbidden("only owners can invite owners")
	}
	username, email = strings.TrimSpace(username), strings.TrimSpace(email)
	if (username == "") == (email == "") {
		return nil, fault.Invalid("", "give exactly one of username or email")
	}
	inv := &Invitation{OrgID: o.ID, Role: role, InvitedBy: actor.ID, CreatedAt: s.clock.Now().UTC()}
	inv.ExpiresAt = inv.CreatedAt.Add(InvitationTTL)
	var invitee *auth.User
	var secret string
	if username != "" {
		u, err := s.users.UserByName(ctx, username)
		if err != nil {
			return nil, err
		}
		invitee = u
		id := u.ID
		inv.UserID = &id
	} else {
		if !strings.Contains(email, "@") || strings.ContainsAny(email, " \r\n") || len(email) > 254 {
			return nil, fault.Invalid("email", "email %q is not a valid address", email)
		}
		var err error
		if secret, err = auth.NewToken(""); err != nil {
			return nil, err
		}
		inv.Email, inv.TokenHash = email, auth.HashToken(secret)
	}
	err := store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		q := tx.Model(&Invitation{}).Where("org_id = ? AND expires_at > ?", o.ID, inv.CreatedAt)
		if invitee != nil {
			var n int64
			if err := tx.Model(&Member{}).Where("org_id = ? AND user_id = ?", o.ID, invitee.ID).Count(&n).Error; err != nil {
				return err
			}
			if n > 0 {
				return fault.Conflict("%s is already a member of %s", invitee.Username, o.Name)
			}
			q = q.Where("user_id = ?", invitee.ID)
		} else {
			q = q.Where("lower(email) = lower(?)", email)
		}
		var open int64
		if err := q.Count(&open).Error; err != nil {
			return err
		}
		if open > 0 {
			return fault.Conflict("an invitation for them is already open")
		}
		return tx.Create(inv).Error
	})
	if err != nil {
		return nil, err
	}
	msg := nmail.Message{Subject: "You are invited to " + o.Name + " on Nimbus"}
	intro := actor.Username + " invited you to join the team " + o.Name + " as " + string(role) + ".\n\n"
	if invitee != nil {
		msg.To = invitee.Email
		msg.Body = intro + "Sign in and accept it at " + s.baseURL + "/invitations\n"
	} else {
		msg.To = email
		msg.Body = intro + "Sign in (or sign up) and open this link within " + human.Duration(InvitationTTL) + " to accept:\n" +
			s.baseURL + "/invitations/accept?token=" + secret + "\n\nThe link is the invitation: do not forward it.\n"
	}
	mailed := nmail.Delivers(s.mail)
	if mailed {
		if err := s.mail.Send(ctx, msg); err != nil {
			s.log.WarnContext(ctx, "invitation email failed", "err", err)
			mailed = false
		}
	}
	var info InvitationInfo
	if err := s.invitationQuery(ctx).Where("i.id = ?", inv.ID).Scan(&info).Error; err != nil {
		return nil, err
	}
	info.Mailed = &mailed
	if !mailed {
		if invitee != nil {
			info.Link = s.baseURL + "/invitations"
		} else {
			info.Link = s.baseURL + "/invitations/accept?token=" + secret
		}
	}
	return &info, nil
}

func (s *Service) invitationQuery(ctx context.Context) *gorm.DB {
	return s.db.WithContext(ctx).Table("org_invitations AS i").
		Select("i.id, orgs.name AS org, COALESCE(u.username, '') AS username, i.email, i.role, inviter.username AS invited_by, i.created_at, i.expires_at").
		Joins("JOIN orgs ON orgs.id = i.org_id").
		Joins("LEFT JOIN users u ON u.id = i.user_id").
		Joins("JOIN users inviter ON inviter.id = i.invited_by")
}

// ListInvitations returns the org's open invitations.
func (s *Service) ListInvitations(ctx context.Context, orgID int64) ([]InvitationInfo, error) {
	var out []InvitationInfo
	err := s.invitationQuery(ctx).Where("i.org_id = ? AND i.expires_at > ?", orgID, s.clock.Now().UTC()).
		Order("i.id").Scan(&out).Error
	if out == nil {
		out = []InvitationInfo{}
	}
	return out, err
}

// InvitationByToken is the open invitation an emailed link's token claims, for the accept page
// to name the team and the role before anyone accepts.
func (s *Service) InvitationByToken(ctx context.Context, token string) (*InvitationInfo, error) {
	if token == "" {
		return nil, fault.Invalid("token", "token is required: the one in the invitation link")
	}
	var out []InvitationInfo
	err := s.invitationQuery(ctx).Where("i.token_hash = ? AND i.token_hash <> '' AND i.expires_at > ?", auth.HashToken(token), s.clock.Now().UTC()).
		Limit(1).Scan(&out).Error
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fault.NotFound("invitation not found or expired")
	}
	return &out[0], nil
}

// CancelInvitation withdraws an open invitation of the org.
func (s *Service) CancelInvitation(ctx context.Context, orgID, id int64) error {
	res := s.db.WithContext(ctx).Where("id = ? AND org_id = ?", id, orgID).Delete(&Invitation{})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return fault.NotFound("invitation not found")
	}
	return nil
}

// MyInvitations lists the open invitations addressed to the user's account (email invitations
// are reached through their link, see AcceptInvitationToken).
func (s *Service) MyInvitations(ctx context.Context, u *auth.User) ([]InvitationInfo, error) {
	var out []InvitationInfo
	err := s.invitationQuery(ctx).
		Where("i.user_id = ? AND i.expires_at > ?", u.ID, s.clock.Now().UTC()).
		Order("i.id").Scan(&out).Error
	if out == nil {
		out = []InvitationInfo{}
	}
	return out, err
}

// RespondInvitation accepts (joining with the invited role) or declines an invitation addressed
// to the user's account; any other invitation is a 404.
func (s *Service) RespondInvitation(ctx context.Context, u *auth.User, id int64, accept bool) error {
	return s.respond(ctx, u, accept, "id = ? AND user_id = ?", id, u.ID)
}

// AcceptInvitationToken joins the user to the team of the email invitation whose link carried
// token.
func (s *Service) AcceptInvitationToken(ctx context.Context, u *auth.User, token string) error {
	if token == "" {
		return fault.Invalid("token", "token is required")
	}
	return s.respond(ctx, u, true, "token_hash = ? AND token_hash <> ''", auth.HashToken(token))
}

func (s *Service) respond(ctx context.Context, u *auth.User, accept bool, where string, args ...any) error {
	return store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		var inv Invitation
		err := tx.Where(where, args...).Where("expires_at > ?", s.clock.Now().UTC()).Take(&inv).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return fault.NotFound("invitation not found or expired")
		}
		if err != nil {
			return err
		}
		if err := tx.Delete(&inv).Error; err != nil {
			return err
		}
		if !accept {
			return nil
		}
		var n int64
		if err := tx.Model(&Member{}).Where("org_id = ? AND user_id = ?", inv.OrgID, u.ID).Count(&n).Error; err != nil || n > 0 {
			return err // already a member (joined by another invitation): nothing to add
		}
		return tx.Create(&Member{OrgID: inv.OrgID, UserID: u.ID, Role: inv.Role, CreatedAt: s.clock.Now().UTC()}).Error
	})
}
