package artifacts

import "time"

// Package is a named series of versions in a repo ("bert-base", "tokenizer"). Rows appear with
// their first version and go with their last.
type Package struct {
	ID        int64     `gorm:"primaryKey"`
	RepoID    int64     `gorm:"not null"`
	Name      string    `gorm:"not null"`
	CreatedAt time.Time `gorm:"not null"`
	UpdatedAt time.Time `gorm:"not null"` // when its newest version appeared
}

// TableName implements gorm's Tabler.
func (Package) TableName() string { return "artifact_packages" }

// Version is one published version of a package and who produced it. PipelineID (with its
// build and commit) is set when a pipeline's job token pushed it; PushedBy is the person behind
// the push (for a pipeline, the user the build runs as), nil when there is none.
type Version struct {
	ID          int64  `gorm:"primaryKey"`
	PackageID   int64  `gorm:"not null"`
	Version     string `gorm:"not null"`
	PipelineID  *int64
	BuildID     *int64
	BuildNumber *int64
	CommitSHA   string `gorm:"not null"`
	PushedBy    *int64
	BuildScoped bool      `gorm:"not null"`
	CreatedAt   time.Time `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (Version) TableName() string { return "artifact_versions" }

// File is one file of a version: a name for a stored blob. Files never change; they can only
// be deleted.
type File struct {
	ID        int64     `gorm:"primaryKey"`
	VersionID int64     `gorm:"not null"`
	Name      string    `gorm:"not null"`
	Digest    string    `gorm:"not null"` // sha256:<hex>
	Size      int64     `gorm:"not null"`
	CreatedAt time.Time `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (File) TableName() string { return "artifact_files" }

// Models are the package's gorm models (backend/server's Models lists them).
func Models() []any { return []any{&Package{}, &Version{}, &File{}, &Release{}, &Use{}} }
