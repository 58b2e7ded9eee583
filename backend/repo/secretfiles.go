package repo

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/paging"
	"github.com/nimbus-build/nimbus/internal/envfile"
	"github.com/nimbus-build/nimbus/internal/userpath"
)

// Secret repositories (CNB's 密钥仓库, cnb-reference §5.3) hold credentials that pipelines import
// as env (`imports:`) or read as plugin settings and task options (`settingsFrom`,
// `optionsFrom`). Unlike CNB's, Nimbus's keep no git history: a secret repository's files live
// in secret_files, sealed with the server key like repo secrets, one version each, and are
// edited through the API and the dashboard by the repo's admins only. Git never reaches them
// (GitResolver refuses to clone or push a secret repository), so nothing unsealed ever lands on
// disk. A file URL's {ref} must therefore be the default branch (or HEAD): another ref is a
// clear 404 rather than a silent read of the only version. Who may import a file is decided
// in imports.go; every read is audited in secret_file_reads.

// MaxSecretFileSize caps one file of a secret repository.
const MaxSecretFileSize = 256 << 10

// SecretFile is one sealed file of a secret repository.
type SecretFile struct {
	ID        int64     `gorm:"primaryKey"`
	RepoID    int64     `gorm:"not null"`
	Path      string    `gorm:"not null"`
	Sealed    []byte    `gorm:"not null"`
	Size      int64     `gorm:"not null"`
	UpdatedBy int64     `gorm:"not null"`
	CreatedAt time.Time `gorm:"not null"`
	UpdatedAt time.Time `gorm:"not null"`
}

// SecretFileRead is one audited read of a secret repository's file by a pipeline.
type SecretFileRead struct {
	ID          int64     `gorm:"primaryKey"`
	RepoID      int64     `gorm:"not null"`
	Path        string    `gorm:"not null"`
	Kind        string    `gorm:"not null"` // imports, settingsFrom, optionsFrom
	Reader      string    `gorm:"not null"` // the reading pipeline's org/repo
	PipelineID  int64     `gorm:"not null"`
	BuildNumber int64     `gorm:"not null"`
	UserID      int64     `gorm:"not null"` // who triggered it (0: nobody)
	Allowed     bool      `gorm:"not null"`
	Reason      string    `gorm:"not null"` // the rule that allowed or refused it
	ReadAt      time.Time `gorm:"not null"`
}

// SecretFileInfo is a file as the listing shows it (no content).
type SecretFileInfo struct {
	Path      string    `json:"path"`
	Size      int64     `json:"size"`
	UpdatedBy int64     `json:"updated_by"`
	UpdatedAt time.Time `json:"updated_at"`
}

// SecretFileJSON is one file with its content (admins only).
type SecretFileJSON struct {
	SecretFileInfo
	Content string `json:"content"`
}

// SecretFileReadJSON is an audit row.
type SecretFileReadJSON struct {
	ID          int64     `json:"id"`
	Path        string    `json:"path"`
	Kind        string    `json:"kind"`
	Reader      string    `json:"reader"`
	PipelineID  int64     `json:"pipeline_id"`
	BuildNumber int64     `json:"build_number"`
	UserID      int64     `json:"user_id"`
	Allowed     bool      `json:"allowed"`
	Reason      string    `json:"reason"`
	ReadAt      time.Time `json:"read_at"`
}

func secretFileContext(repoID int64, p string) string {
	return fmt.Sprintf("repo:%d:secret-file:%s", repoID, p)
}

func needSecretRepo(r *Repo) error {
	if !r.Secret {
		return fault.NotFound("repo has no secret files: it is not a secret repository")
	}
	return nil
}

// PutSecretFile creates or replaces the file at path p, which must follow the path rule
// (internal/userpath) as it is: it is stored as written, never repaired. Its content must parse as
// the env file its name says (internal/envfile): a file pipelines could not import is refused here,
// with its line, and the stored version stays as it was.
func (s *Service) PutSecretFile(ctx context.Context, r *Repo, userID int64, p, content string) (SecretFileInfo, error) {
	if err := needSecretRepo(r); err != nil {
		return SecretFileInfo{}, err
	}
	if err := userpath.Check(p); err != nil {
		return SecretFileInfo{}, err
	}
	if len(content) > MaxSecretFileSize {
		return SecretFileInfo{}, fault.TooLarge("a secret file holds at most %d KiB", MaxSecretFileSize>>10)
	}
	if _, err := envfile.Object(path.Base(p), []byte(content)); err != nil {
		return SecretFileInfo{}, fault.Invalid("content", "%v", err)
	}
	sealed, err := s.box.Seal([]byte(content), secretFileContext(r.ID, p))
	if err != nil {
		return SecretFileInfo{}, err
	}
	now := s.clock.Now().UTC()
	info := SecretFileInfo{Path: p, Size: int64(len(content)), UpdatedBy: userID, UpdatedAt: now}
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&SecretFile{}).Where("repo_id = ? AND path = ?", r.ID, p).
			Updates(map[string]any{"sealed": sealed, "size": info.Size, "updated_by": userID, "updated_at": now})
		if res.Error != nil || res.RowsAffected > 0 {
			return res.Error
		}
		return tx.Create(&SecretFile{RepoID: r.ID, Path: p, Sealed: sealed, Size: info.Size, UpdatedBy: userID, CreatedAt: now, UpdatedAt: now}).Error
	})
	return info, err
}

// ListSecretFiles lists a secret repository's files, by path.
func (s *Service) ListSecretFiles(ctx context.Context, r *Repo) ([]SecretFileInfo, error) {
	if err := needSecretRepo(r); err != nil {
		return nil, err
	}
	out := []SecretFileInfo{}
	err := s.db.WithContext(ctx).Model(&SecretFile{}).Select("path, size, updated_by, updated_at").
		Where("repo_id = ?", r.ID).Order("path").Scan(&out).Error
	return out, err
}

// SecretFileContent returns the file at path p, unsealed. Reads and deletes look p up as it is,
// without the path rule: a path the rule refuses names no file (and a file stored before the
// rule existed stays reachable).
func (s *Service) SecretFileContent(ctx context.Context, r *Repo, p string) (SecretFileJSON, error) {
	if err := needSecretRepo(r); err != nil {
		return SecretFileJSON{}, err
	}
	var f SecretFile
	err := s.db.WithContext(ctx).Where("repo_id = ? AND path = ?", r.ID, p).Take(&f).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return SecretFileJSON{}, fault.NotFound("file %q not found", p)
	}
	if err != nil {
		return SecretFileJSON{}, err
	}
	plain, err := s.box.Open(f.Sealed, secretFileContext(r.ID, f.Path))
	if err != nil {
		return SecretFileJSON{}, fmt.Errorf("secret file %s: %w", f.Path, err)
	}
	return SecretFileJSON{SecretFileInfo: SecretFileInfo{Path: f.Path, Size: f.Size, UpdatedBy: f.UpdatedBy, UpdatedAt: f.UpdatedAt},
		Content: string(plain)}, nil
}

// DeleteSecretFile removes a file.
func (s *Service) DeleteSecretFile(ctx context.Context, r *Repo, p string) error {
	if err := needSecretRepo(r); err != nil {
		return err
	}
	res := s.db.WithContext(ctx).Where("repo_id = ? AND path = ?", r.ID, p).Delete(&SecretFile{})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return fault.NotFound("file %q not found", p)
	}
	return nil
}

// SecretFileReads returns the audit of a secret repository, newest first, a page at a time.
func (s *Service) SecretFileReads(ctx context.Context, r *Repo, page paging.Page) ([]SecretFileReadJSON, error) {
	if err := needSecretRepo(r); err != nil {
		return nil, err
	}
	q := s.db.WithContext(ctx).Model(&SecretFileRead{}).Where("repo_id = ?", r.ID)
	if page.After > 0 {
		q = q.Where("id < ?", page.After)
	}
	out := []SecretFileReadJSON{}
	err := q.Order("id DESC").Limit(page.Limit + 1).Scan(&out).Error
	return out, err
}
