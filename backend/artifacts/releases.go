package artifacts

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/paging"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/store"
	"github.com/nimbus-build/nimbus/internal/userpath"
)

// Releases. A release belongs to a tag of the repo and has a title, notes and files. Its files
// are artifact files of the repo's reserved package ReleasePackage, version = the tag: they are
// stored, deduplicated, counted in the team's storage, downloaded (deploy tokens included) and
// collected exactly like published files, and they follow the same rule that a version takes
// files from its producer only. A release is made or updated by people (developers) or by a
// pipeline's job token (the git:release task); `overlying` replaces an existing release: its
// files go and its provenance becomes the new producer's.

// ReleasePackage is the package that holds release files. Its leading "_" is not a valid
// package name, so no one publishes into it through the artifacts routes.
const ReleasePackage = "_releases"

// Release is a row of migration 00016.
type Release struct {
	ID          int64  `gorm:"primaryKey"`
	RepoID      int64  `gorm:"not null"`
	Tag         string `gorm:"not null"`
	Title       string `gorm:"not null"`
	Notes       string `gorm:"not null"`
	PreRelease  bool   `gorm:"not null"`
	Latest      bool   `gorm:"not null"`
	CommitSHA   string `gorm:"not null"`
	PipelineID  *int64
	BuildNumber *int64
	CreatedBy   *int64
	CreatedAt   time.Time `gorm:"not null"`
	UpdatedAt   time.Time `gorm:"not null"`
}

// ReleaseInput is what a create or an update sets.
type ReleaseInput struct {
	Tag        string
	Title      string // the tag when empty
	Notes      string
	PreRelease bool
	// Latest marks it the repo's latest release (the others lose the mark); nil means true for a
	// release and false for a pre-release, as CNB does.
	Latest *bool
	// Overlying replaces an existing release of the tag made by another producer; without it,
	// that is a 409. Its own producer (the same pipeline, or people) always updates it.
	Overlying bool
}

// maxNotes bounds a release's notes.
const maxNotes = 1 << 20

// PutRelease creates or updates the release of in.Tag, which must be a tag of the repo. It
// reports whether it created it.
func (s *Service) PutRelease(ctx context.Context, a *repo.Access, repoPath string, p *auth.Principal, in ReleaseInput) (*Release, bool, error) {
	if err := userpath.Name(in.Tag); err != nil {
		return nil, false, err
	}
	if !versionRE.MatchString(in.Tag) || strings.EqualFold(in.Tag, Latest) {
		return nil, false, fault.Invalid("tag", "a release's tag is 1–128 letters, digits, '.', '+', '-' or '_', starts with a letter or digit and is not %q", Latest)
	}
	if len(in.Title) > 500 {
		return nil, false, fault.Invalid("title", "a title is at most 500 characters")
	}
	if len(in.Notes) > maxNotes {
		return nil, false, fault.Invalid("notes", "notes are at most %d bytes", maxNotes)
	}
	commit, err := git.ResolveRef(ctx, repoPath, "refs/tags/"+in.Tag)
	if err != nil {
		return nil, false, fault.Invalid("tag", "%s is not a tag of %s/%s: push the tag first", in.Tag, a.Org.Name, a.Repo.Name)
	}
	pr, err := s.producerOf(ctx, p)
	if err != nil {
		return nil, false, err
	}
	if in.Title == "" {
		in.Title = in.Tag
	}
	latest := !in.PreRelease
	if in.Latest != nil {
		latest = *in.Latest
	}
	now := s.clock.Now().UTC()
	var out Release
	created := false
	err = store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		var cur Release
		err := tx.Where("repo_id = ? AND tag = ?", a.Repo.ID, in.Tag).Take(&cur).Error
		switch {
		case errors.Is(err, gorm.ErrRecordNotFound):
			created = true
			cur = Release{RepoID: a.Repo.ID, Tag: in.Tag, CreatedAt: now}
		case err != nil:
			return err
		case !sameReleaseProducer(&cur, pr) && !in.Overlying:
			return fault.Conflict("release %s exists, made by %s; overlying: true replaces it", in.Tag, releaseProducer(&cur))
		case !sameReleaseProducer(&cur, pr):
			// Replaced: the old producer's files go, so the new one's can be published.
			if err := s.dropReleaseFiles(tx, a.Repo.ID, in.Tag); err != nil {
				return err
			}
		}
		cur.Title, cur.Notes, cur.PreRelease, cur.Latest, cur.CommitSHA = in.Title, in.Notes, in.PreRelease, latest, commit
		cur.PipelineID, cur.BuildNumber, cur.CreatedBy, cur.UpdatedAt = pr.PipelineID, pr.BuildNumber, pr.UserID, now
		if pr.Commit != "" {
			cur.CommitSHA = pr.Commit
		}
		if latest {
			if err := tx.Model(&Release{}).Where("repo_id = ? AND tag <> ?", a.Repo.ID, in.Tag).Update("latest", false).Error; err != nil {
				return err
			}
		}
		if err := tx.Save(&cur).Error; err != nil {
			return err
		}
		out = cur
		return nil
	})
	return &out, created, err
}

// sameReleaseProducer reports whether pr made the release: its pipeline, or people for a
// release people made.
func sameReleaseProducer(r *Release, pr producer) bool {
	if r.PipelineID == nil || pr.PipelineID == nil {
		return r.PipelineID == nil && pr.PipelineID == nil
	}
	return *r.PipelineID == *pr.PipelineID
}

func releaseProducer(r *Release) string {
	if r.PipelineID != nil && r.BuildNumber != nil {
		return "build #" + strconv.FormatInt(*r.BuildNumber, 10)
	}
	return "a person"
}

// dropReleaseFiles removes the files of a release (their bytes stay until the collector).
func (s *Service) dropReleaseFiles(tx *gorm.DB, repoID int64, tag string) error {
	_, err := s.deleteVersion(tx, repoID, ReleasePackage, tag)
	return err
}

// PutReleaseFile publishes a file of an existing release, with the rules of Put (immutable,
// checksummed, within the quota, from the release's producer).
func (s *Service) PutReleaseFile(ctx context.Context, a *repo.Access, p *auth.Principal, up Upload) (*Entry, bool, error) {
	if err := checkNames("x", up.Version, up.File); err != nil {
		return nil, false, err
	}
	r, err := s.ReleaseOf(ctx, a.Repo.ID, up.Version)
	if err != nil {
		return nil, false, err
	}
	pr, err := s.producerOf(ctx, p)
	if err != nil {
		return nil, false, err
	}
	if !sameReleaseProducer(r, pr) {
		return nil, false, fault.Conflict("release %s was made by %s; only its producer adds files (overlying: true replaces it)", r.Tag, releaseProducer(r))
	}
	up.Package = ReleasePackage
	return s.put(ctx, a, pr, up)
}

// ReleaseOf returns a release, or a 404.
func (s *Service) ReleaseOf(ctx context.Context, repoID int64, tag string) (*Release, error) {
	var r Release
	err := s.db.WithContext(ctx).Where("repo_id = ? AND tag = ?", repoID, tag).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fault.NotFound("release %s not found", tag)
	}
	return &r, err
}

// Releases lists a repo's releases, newest first, a page at a time.
func (s *Service) Releases(ctx context.Context, repoID int64, page paging.Page) ([]Release, error) {
	q := s.db.WithContext(ctx).Where("repo_id = ?", repoID)
	if page.After > 0 {
		q = q.Where("id < ?", page.After)
	}
	var out []Release
	err := q.Order("id DESC").Limit(page.Limit + 1).Find(&out).Error
	return out, err
}

// ReleaseFiles lists a release's files.
func (s *Service) ReleaseFiles(ctx context.Context, repoID int64, tag string) ([]File, error) {
	var out []File
	err := s.db.WithContext(ctx).Table("artifact_files f").Select("f.*").
		Joins("JOIN artifact_versions v ON v.id = f.version_id").Joins("JOIN artifact_packages k ON k.id = v.package_id").
		Where("k.repo_id = ? AND k.name = ? AND v.version = ?", repoID, ReleasePackage, tag).Order("f.name").Scan(&out).Error
	return out, err
}

// DeleteRelease deletes a release and its files.
func (s *Service) DeleteRelease(ctx context.Context, repoID int64, tag string) error {
	return store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		res := tx.Where("repo_id = ? AND tag = ?", repoID, tag).Delete(&Release{})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return fault.NotFound("release %s not found", tag)
		}
		return s.dropReleaseFiles(tx, repoID, tag)
	})
}
