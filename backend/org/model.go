// Package org owns teams (organizations), their members with roles, and invitations. Repos,
// builds and the billing account all belong to an organization, so every authorization decision
// about them starts with the caller's Role here.
//
// Roles and what they allow:
//
//	reporter   read repos, builds and logs; clone
//	billing    what reporter may, plus the billing account (balance, usage, top-ups)
//	developer  what reporter may, plus push, create repos, trigger and cancel builds
//	admin      what developer may and billing may, plus repo settings, secrets, deploy tokens,
//	           members and invitations (but never owners), renaming the org
//	owner      everything, including owners and deleting the org; an org always keeps one
//
// Non-members see nothing of an org but its public repos: its pages answer 404, not 403.
package org

import "time"

// Role of a member.
type Role string

// Roles.
const (
	Owner     Role = "owner"
	Admin     Role = "admin"
	Billing   Role = "billing"
	Developer Role = "developer"
	Reporter  Role = "reporter"
)

// Roles lists every role, strongest first.
var Roles = []Role{Owner, Admin, Billing, Developer, Reporter}

// Valid reports whether r is a known role.
func (r Role) Valid() bool {
	switch r {
	case Owner, Admin, Billing, Developer, Reporter:
		return true
	}
	return false
}

// IsMember reports whether r is any role at all.
func (r Role) IsMember() bool { return r.Valid() }

// CanWrite: push, create repos, trigger and cancel builds.
func (r Role) CanWrite() bool { return r == Developer || r == Admin || r == Owner }

// CanAdmin: repo settings, members, invitations, renaming the org.
func (r Role) CanAdmin() bool { return r == Admin || r == Owner }

// CanBilling: see and manage the billing account.
func (r Role) CanBilling() bool { return r == Billing || r == Admin || r == Owner }

// Org is a team.
type Org struct {
	ID        int64     `gorm:"primaryKey"`
	Name      string    `gorm:"not null"`
	CreatedAt time.Time `gorm:"not null"`
	UpdatedAt time.Time `gorm:"not null"`
}

// Member is a user's membership in an org.
type Member struct {
	OrgID     int64     `gorm:"primaryKey;autoIncrement:false"`
	UserID    int64     `gorm:"primaryKey;autoIncrement:false"`
	Role      Role      `gorm:"not null"`
	CreatedAt time.Time `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (Member) TableName() string { return "org_members" }

// Invitation asks someone to join with a role: an account named by username (UserID), or
// whoever reads an email address (Email), who claims it with the secret sent there (TokenHash).
// Email addresses are not verified, so an email invitation is never matched to an account by
// its address.
type Invitation struct {
	ID        int64     `gorm:"primaryKey"`
	OrgID     int64     `gorm:"not null"`
	UserID    *int64    // set when invited by username
	Email     string    `gorm:"not null"` // set when invited by email
	TokenHash string    `gorm:"not null"` // email invitations: the hash of the secret in the email
	Role      Role      `gorm:"not null"`
	InvitedBy int64     `gorm:"not null"`
	CreatedAt time.Time `gorm:"not null"`
	ExpiresAt time.Time `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (Invitation) TableName() string { return "org_invitations" }
