// Package repo owns repositories: their rows, their bare git directories on disk, per-repo
// encrypted secrets and read-only deploy tokens, and the one decision every repo route and the
// git endpoint need — what may this principal do to this repo (Resolve).
package repo

import "time"

// Visibility of a repo.
const (
	Private = "private"
	Public  = "public"
)

// Repo is a git repository of an org. Its bare repository lives at <data>/repos/<id>.git, so a
// rename never moves files.
type Repo struct {
	ID            int64  `gorm:"primaryKey"`
	OrgID         int64  `gorm:"not null"`
	Name          string `gorm:"not null"`
	Description   string `gorm:"not null"`
	Visibility    string `gorm:"not null"`
	DefaultBranch string `gorm:"not null"`
	Archived      bool   `gorm:"not null"`
	// Secret marks a secret repository (secretfiles.go): no git content, only sealed files
	// that pipelines import.
	Secret bool `gorm:"not null"`
	// ForkOf is the repo this one was forked from (Fork); nil for the rest, and once the
	// source is deleted.
	ForkOf    *int64    `gorm:"column:fork_of"`
	CreatedAt time.Time `gorm:"not null"`
	UpdatedAt time.Time `gorm:"not null"`
}

// Secret is a repo secret, sealed with the server key (see package secrets). Its value is never
// returned by the API.
type Secret struct {
	ID        int64     `gorm:"primaryKey"`
	RepoID    int64     `gorm:"not null"`
	Name      string    `gorm:"not null"`
	Sealed    []byte    `gorm:"not null"`
	CreatedAt time.Time `gorm:"not null"`
	UpdatedAt time.Time `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (Secret) TableName() string { return "repo_secrets" }

// DeployToken is a read-only token of one repo, for inference services that pull its models and
// images.
type DeployToken struct {
	ID         int64  `gorm:"primaryKey"`
	RepoID     int64  `gorm:"not null"`
	Name       string `gorm:"not null"`
	TokenHash  string `gorm:"not null"`
	Prefix     string `gorm:"not null"`
	CreatedBy  int64  `gorm:"not null"`
	ExpiresAt  *time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
	CreatedAt  time.Time `gorm:"not null"`
}

// Level is what a principal may do to a repo.
type Level int

// Levels, weakest first.
const (
	None  Level = iota
	Read        // see, clone, pull artifacts
	Write       // push, trigger and cancel builds, push artifacts
	Admin       // settings, secrets, deploy tokens, delete
)

func (l Level) String() string {
	return [...]string{"none", "read", "write", "admin"}[l]
}
