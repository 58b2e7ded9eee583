package registry

import "time"

// Repository is a registry repository: a Nimbus repo ({org}/{repo}, Name "") or an image below
// it ({org}/{repo}/{name}). Rows appear on the first push.
type Repository struct {
	ID        int64     `gorm:"primaryKey"`
	RepoID    int64     `gorm:"not null"`
	Name      string    `gorm:"not null"`
	CreatedAt time.Time `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (Repository) TableName() string { return "registry_repositories" }

// Blob links a stored blob into a repository. Only linked blobs can be pulled from it.
type Blob struct {
	RepositoryID int64     `gorm:"primaryKey"`
	Digest       string    `gorm:"primaryKey"`
	Size         int64     `gorm:"not null"`
	CreatedAt    time.Time `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (Blob) TableName() string { return "registry_blobs" }

// Manifest is a pushed manifest, its exact bytes and what the referrers API needs of it.
type Manifest struct {
	ID           int64     `gorm:"primaryKey"`
	RepositoryID int64     `gorm:"not null"`
	Digest       string    `gorm:"not null"`
	MediaType    string    `gorm:"not null"`
	ArtifactType string    `gorm:"not null"`
	Subject      string    `gorm:"not null"` // digest of the subject, "" = none
	Annotations  string    `gorm:"not null"` // JSON object, "" = none
	Size         int64     `gorm:"not null"`
	Content      []byte    `gorm:"not null"`
	CreatedAt    time.Time `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (Manifest) TableName() string { return "registry_manifests" }

// ManifestRef is a digest a manifest references (config, layer, child manifest): what the
// garbage collector must keep while the manifest exists.
type ManifestRef struct {
	ManifestID int64  `gorm:"primaryKey"`
	Digest     string `gorm:"primaryKey"`
}

// TableName implements gorm's Tabler.
func (ManifestRef) TableName() string { return "registry_manifest_refs" }

// Tag names a manifest of a repository.
type Tag struct {
	RepositoryID int64     `gorm:"primaryKey"`
	Name         string    `gorm:"primaryKey"`
	Digest       string    `gorm:"not null"`
	UpdatedAt    time.Time `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (Tag) TableName() string { return "registry_tags" }

// Upload is an upload session of a repository; ID is the storage session's id.
type Upload struct {
	ID           string    `gorm:"primaryKey"`
	RepositoryID int64     `gorm:"not null"`
	CreatedAt    time.Time `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (Upload) TableName() string { return "registry_uploads" }
