package artifacts

import (
	"context"
	"time"

	"gorm.io/gorm/clause"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// Every model file a pipeline pushes or pulls with its job token is written down with its
// digest: the inputs and outputs of the pipeline's reproducibility record (issue 17), as the
// server saw them, not as the job says. A push of bytes already there counts (the pipeline
// produced them too); a HEAD does not count as a pull.

// Directions of a Use.
const (
	UsePush = "push"
	UsePull = "pull"
)

// Use is one file a pipeline moved (migration 00020).
type Use struct {
	ID         int64     `gorm:"primaryKey"`
	PipelineID int64     `gorm:"not null"`
	Direction  string    `gorm:"not null"`
	RepoID     int64     `gorm:"not null"`
	Package    string    `gorm:"not null"`
	Version    string    `gorm:"not null"`
	File       string    `gorm:"not null"`
	Digest     string    `gorm:"not null"`
	Size       int64     `gorm:"not null"`
	At         time.Time `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (Use) TableName() string { return "artifact_uses" }

// used writes a use down once; a failure is logged, never the transfer's.
func (s *Service) used(ctx context.Context, pipelineID int64, direction string, repoID int64, e *Entry) {
	u := Use{PipelineID: pipelineID, Direction: direction, RepoID: repoID, Package: e.Package.Name,
		Version: e.Version.Version, File: e.File.Name, Digest: e.File.Digest, Size: e.File.Size, At: s.clock.Now().UTC()}
	if err := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&u).Error; err != nil {
		s.log.WarnContext(ctx, "artifact use not recorded", "pipeline", pipelineID, "file", e.File.Name, "err", err)
	}
}

// Uses returns what a pipeline pushed and pulled, oldest first.
func (s *Service) Uses(ctx context.Context, pipelineID int64) ([]Use, error) {
	var out []Use
	err := s.db.WithContext(ctx).Where("pipeline_id = ?", pipelineID).Order("id").Find(&out).Error
	return out, err
}

// UseJSON is a file a pipeline moved.
type UseJSON struct {
	Repo    string `json:"repo"` // org/name
	RepoID  int64  `json:"-"`
	Package string `json:"package"`
	Version string `json:"version"`
	// BuildScoped versions are a build's hand-off ($CNB_BUILD_ID): another build has its own.
	BuildScoped bool      `json:"build_scoped"`
	File        string    `json:"file"`
	Digest      string    `json:"digest"`
	Size        int64     `json:"size"`
	At          time.Time `json:"at"`
}

// UsesJSON is GET …/pipelines/{id}/artifacts.
type UsesJSON struct {
	Pushed []UseJSON `json:"pushed"`
	Pulled []UseJSON `json:"pulled"`
}

// VisibleUses is what pipeline id of the repo a gives pushed and pulled, as principal p may see
// it: files of other repos show only when p may read them. A pipeline of another repo is not
// found.
func (s *Service) VisibleUses(ctx context.Context, repos *repo.Service, p *auth.Principal, a *repo.Access, id int64) (*UsesJSON, error) {
	owner, found, err := s.builds.RepoOfPipeline(ctx, id)
	if err != nil {
		return nil, err
	}
	if !found || owner != a.Repo.ID {
		return nil, fault.NotFound("pipeline %d not found", id)
	}
	uses, err := s.Uses(ctx, id)
	if err != nil {
		return nil, err
	}
	slugs := map[int64]string{a.Repo.ID: a.Org.Name + "/" + a.Repo.Name}
	out := UsesJSON{Pushed: []UseJSON{}, Pulled: []UseJSON{}}
	for _, u := range uses {
		slug, ok := slugs[u.RepoID]
		if !ok {
			if r, o, err := repos.ByID(ctx, u.RepoID); err == nil {
				if _, err := repos.Resolve(ctx, p, o.Name, r.Name, repo.Read); err == nil {
					slug = o.Name + "/" + r.Name
				}
			}
			slugs[u.RepoID] = slug
		}
		if slug == "" {
			continue // a repo the caller cannot read, or gone
		}
		_, scoped := build.ParseBuildID(u.Version)
		j := UseJSON{Repo: slug, RepoID: u.RepoID, Package: u.Package, Version: u.Version, BuildScoped: scoped,
			File: u.File, Digest: u.Digest, Size: u.Size, At: u.At}
		if u.Direction == UsePush {
			out.Pushed = append(out.Pushed, j)
		} else {
			out.Pulled = append(out.Pulled, j)
		}
	}
	return &out, nil
}

// Available says whether the repo still holds file of package and version with this digest:
// what an exact re-run that pulls it needs.
func (s *Service) Available(ctx context.Context, repoID int64, pkg, version, file, digest string) (bool, error) {
	e, err := s.find(ctx, s.db, repoID, pkg, version, file)
	if err != nil || e == nil {
		return false, err
	}
	return e.File.Digest == digest, nil
}
