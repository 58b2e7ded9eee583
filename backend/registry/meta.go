package registry

import (
	"context"
	"errors"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/store"
)

// meta is the registry's database: the only code that touches gorm.
type meta struct {
	db    *gorm.DB
	clock clock.Clock
}

// repository returns the registry repository name of repo repoID, creating it when create is
// set; nil (and no error) when it does not exist and create is not.
func (m *meta) repository(ctx context.Context, repoID int64, name string, create bool) (*Repository, error) {
	var r Repository
	err := m.db.WithContext(ctx).Where("repo_id = ? AND name = ?", repoID, name).Take(&r).Error
	if err == nil {
		return &r, nil
	}
	if !errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, err
	}
	if !create {
		return nil, nil
	}
	r = Repository{RepoID: repoID, Name: name, CreatedAt: m.clock.Now().UTC()}
	// Two first pushes may race: the loser reads the winner's row.
	err = m.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&r).Error
	if err != nil {
		return nil, err
	}
	var got Repository
	err = m.db.WithContext(ctx).Where("repo_id = ? AND name = ?", repoID, name).Take(&got).Error
	return &got, err
}

// linkBlob records blob d in the repository, through db (a transaction, or m.db with a context).
func (m *meta) linkBlob(db *gorm.DB, repositoryID int64, d string, size int64) error {
	return db.Clauses(clause.OnConflict{DoNothing: true}).
		Create(&Blob{RepositoryID: repositoryID, Digest: d, Size: size, CreatedAt: m.clock.Now().UTC()}).Error
}

// blob returns the link of d in the repository, or nil.
func (m *meta) blob(ctx context.Context, repositoryID int64, d string) (*Blob, error) {
	var b Blob
	err := m.db.WithContext(ctx).Where("repository_id = ? AND digest = ?", repositoryID, d).Take(&b).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	return &b, err
}

func (m *meta) unlinkBlob(ctx context.Context, repositoryID int64, d string) (bool, error) {
	res := m.db.WithContext(ctx).Where("repository_id = ? AND digest = ?", repositoryID, d).Delete(&Blob{})
	return res.RowsAffected > 0, res.Error
}

// candidate is a repository of a team that holds a blob.
type candidate struct {
	RepoName string // the Nimbus repo's name
	Name     string // the image below it, "" for the repo itself
}

// blobInOrg lists up to 20 repositories of the org that hold the blob: the candidates of a
// mount that names no source.
func (m *meta) blobInOrg(ctx context.Context, orgID int64, d string) ([]candidate, error) {
	var out []candidate
	err := m.db.WithContext(ctx).Table("registry_blobs AS b").
		Select("p.name AS repo_name, r.name").
		Joins("JOIN registry_repositories r ON r.id = b.repository_id").
		Joins("JOIN repos p ON p.id = r.repo_id").
		Where("b.digest = ? AND p.org_id = ?", d, orgID).
		Order("r.id").Limit(20).Scan(&out).Error
	return out, err
}

func (m *meta) createUpload(ctx context.Context, id string, repositoryID int64) error {
	return m.db.WithContext(ctx).Create(&Upload{ID: id, RepositoryID: repositoryID, CreatedAt: m.clock.Now().UTC()}).Error
}

// uploadOf reports whether upload id belongs to the repository.
func (m *meta) uploadOf(ctx context.Context, id string, repositoryID int64) (bool, error) {
	var n int64
	err := m.db.WithContext(ctx).Model(&Upload{}).Where("id = ? AND repository_id = ?", id, repositoryID).Count(&n).Error
	return n > 0, err
}

func (m *meta) deleteUpload(ctx context.Context, id string) error {
	return m.db.WithContext(ctx).Where("id = ?", id).Delete(&Upload{}).Error
}

// putManifest stores a manifest (once per digest: a second push of the same bytes keeps the
// first row), records what it references, and points tags at it, all in one transaction.
func (m *meta) putManifest(ctx context.Context, man *Manifest, refs, tags []string) error {
	now := m.clock.Now().UTC()
	man.CreatedAt = now
	return store.Tx(ctx, m.db, func(tx *gorm.DB) error {
		if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(man).Error; err != nil {
			return err
		}
		var saved Manifest
		if err := tx.Select("id").Where("repository_id = ? AND digest = ?", man.RepositoryID, man.Digest).Take(&saved).Error; err != nil {
			return err
		}
		rows := make([]ManifestRef, 0, len(refs))
		seen := map[string]bool{}
		for _, d := range refs {
			if !seen[d] {
				seen[d] = true
				rows = append(rows, ManifestRef{ManifestID: saved.ID, Digest: d})
			}
		}
		if len(rows) > 0 {
			if err := tx.Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(rows, 500).Error; err != nil {
				return err
			}
		}
		for _, t := range tags {
			err := tx.Clauses(clause.OnConflict{
				Columns:   []clause.Column{{Name: "repository_id"}, {Name: "name"}},
				DoUpdates: clause.AssignmentColumns([]string{"digest", "updated_at"}),
			}).Create(&Tag{RepositoryID: man.RepositoryID, Name: t, Digest: man.Digest, UpdatedAt: now}).Error
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// manifest returns the manifest a tag or digest names in the repository, or nil.
func (m *meta) manifest(ctx context.Context, repositoryID int64, ref string) (*Manifest, error) {
	d := ref
	if !isDigestRef(ref) {
		var t Tag
		err := m.db.WithContext(ctx).Where("repository_id = ? AND name = ?", repositoryID, ref).Take(&t).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		d = t.Digest
	}
	var man Manifest
	err := m.db.WithContext(ctx).Where("repository_id = ? AND digest = ?", repositoryID, d).Take(&man).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	return &man, err
}

func (m *meta) deleteTag(ctx context.Context, repositoryID int64, tag string) (bool, error) {
	res := m.db.WithContext(ctx).Where("repository_id = ? AND name = ?", repositoryID, tag).Delete(&Tag{})
	return res.RowsAffected > 0, res.Error
}

// deleteManifest removes a manifest and every tag that points at it.
func (m *meta) deleteManifest(ctx context.Context, repositoryID int64, d string) (bool, error) {
	found := false
	err := store.Tx(ctx, m.db, func(tx *gorm.DB) error {
		var man Manifest
		err := tx.Select("id").Where("repository_id = ? AND digest = ?", repositoryID, d).Take(&man).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		if err := tx.Where("repository_id = ? AND digest = ?", repositoryID, d).Delete(&Tag{}).Error; err != nil {
			return err
		}
		if err := tx.Where("manifest_id = ?", man.ID).Delete(&ManifestRef{}).Error; err != nil {
			return err
		}
		return tx.Where("id = ?", man.ID).Delete(&Manifest{}).Error
	})
	return found, err
}

// tags returns up to n tag names after last, in byte order, and whether more follow.
func (m *meta) tags(ctx context.Context, repositoryID int64, last string, n int) ([]string, bool, error) {
	var names []string
	err := m.db.WithContext(ctx).Model(&Tag{}).Where("repository_id = ? AND name > ?", repositoryID, last).
		Order("name").Limit(n+1).Pluck("name", &names).Error
	if err != nil {
		return nil, false, err
	}
	if len(names) > n {
		return names[:n], true, nil
	}
	return names, false, nil
}

// referrers returns the manifests of the repository whose subject is d (without their bytes).
func (m *meta) referrers(ctx context.Context, repositoryID int64, d, artifactType string) ([]Manifest, error) {
	q := m.db.WithContext(ctx).Select("digest", "media_type", "artifact_type", "annotations", "size").
		Where("repository_id = ? AND subject = ?", repositoryID, d)
	if artifactType != "" {
		q = q.Where("artifact_type = ?", artifactType)
	}
	var out []Manifest
	err := q.Order("id").Limit(10000).Find(&out).Error
	return out, err
}
