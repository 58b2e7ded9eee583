package build

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// What other packages read of build's tables. They ask here instead of writing SQL against
// builds and pipelines themselves, so that a renamed column breaks this package alone, at
// compile time; the layering test (layering_test.go) holds every other package to it.

// WorkspaceRun is a cloud-IDE pipeline (a `vscode` event's) with its build, repo and team:
// what package workspace shows and authorizes.
type WorkspaceRun struct {
	ID          int64
	BuildID     int64
	Name        string
	Status      string
	Reason      string
	RunnerTag   string
	CPUs        int
	Plan        string
	OrgID       int64
	RepoID      int64
	AgentID     string
	LeaseID     string
	CreatedAt   time.Time
	StartedAt   *time.Time
	ReadyAt     *time.Time
	FinishedAt  *time.Time
	BuildNumber int64
	Branch      string
	RepoName    string
	OrgName     string
}

// Workspace returns workspace pipeline id; gorm.ErrRecordNotFound when there is none (or the
// pipeline is no workspace).
func (s *Service) Workspace(ctx context.Context, id int64) (*WorkspaceRun, error) {
	var r WorkspaceRun
	if err := s.workspaces(ctx).Where("pipelines.id = ?", id).Take(&r).Error; err != nil {
		return nil, err
	}
	return &r, nil
}

// Workspaces returns a team's newest 200 workspace pipelines, newest first; with active, only
// those queued or running.
func (s *Service) Workspaces(ctx context.Context, orgID int64, active bool) ([]WorkspaceRun, error) {
	q := s.workspaces(ctx).Where("pipelines.org_id = ?", orgID).Order("pipelines.id DESC").Limit(200)
	if active {
		q = q.Where("pipelines.status IN ?", []string{StatusQueued, StatusRunning})
	}
	var rs []WorkspaceRun
	err := q.Find(&rs).Error
	return rs, err
}

func (s *Service) workspaces(ctx context.Context) *gorm.DB {
	return s.db.WithContext(ctx).Table("pipelines").
		Select("pipelines.id, pipelines.build_id, pipelines.name, pipelines.status, pipelines.reason, "+
			"pipelines.runner_tag, pipelines.cpus, pipelines.plan, pipelines.org_id, pipelines.repo_id, pipelines.agent_id, "+
			"pipelines.lease_id, pipelines.created_at, pipelines.started_at, pipelines.ready_at, pipelines.finished_at, "+
			"builds.number AS build_number, builds.branch, repos.name AS repo_name, orgs.name AS org_name").
		Joins("JOIN builds ON builds.id = pipelines.build_id").
		Joins("JOIN repos ON repos.id = pipelines.repo_id").
		Joins("JOIN orgs ON orgs.id = repos.org_id").
		Where("pipelines.workspace = ?", true)
}

// RepoOfPipeline returns the repo pipeline id belongs to; found is false when there is no such
// pipeline.
func (s *Service) RepoOfPipeline(ctx context.Context, id int64) (repoID int64, found bool, err error) {
	var ids []int64
	if err := s.db.WithContext(ctx).Model(&Pipeline{}).Where("id = ?", id).Pluck("repo_id", &ids).Error; err != nil {
		return 0, false, fmt.Errorf("build: repo of pipeline %d: %w", id, err)
	}
	if len(ids) != 1 {
		return 0, false, nil
	}
	return ids[0], true, nil
}

// PipelinesEndedAt returns when each of the pipelines ids that has ended ended; a pipeline
// still running, or unknown, is not in the map. Billing settles by it.
func (s *Service) PipelinesEndedAt(ctx context.Context, ids []int64) (map[int64]time.Time, error) {
	var rows []struct {
		ID         int64
		FinishedAt *time.Time
	}
	if len(ids) > 0 {
		if err := s.db.WithContext(ctx).Model(&Pipeline{}).Select("id, finished_at").
			Where("id IN ? AND finished_at IS NOT NULL", ids).Scan(&rows).Error; err != nil {
			return nil, fmt.Errorf("build: pipelines ended: %w", err)
		}
	}
	out := make(map[int64]time.Time, len(rows))
	for _, r := range rows {
		if r.FinishedAt != nil {
			out[r.ID] = *r.FinishedAt
		}
	}
	return out, nil
}

// BuildsEndedBefore returns those of the builds ids that ended before cutoff or no longer
// exist: the builds whose hand-off artifacts have outlived their retention.
func (s *Service) BuildsEndedBefore(ctx context.Context, ids []int64, cutoff time.Time) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var live []int64
	if err := s.db.WithContext(ctx).Model(&Build{}).
		Where("id IN ? AND (finished_at IS NULL OR finished_at >= ?)", ids, cutoff).Pluck("id", &live).Error; err != nil {
		return nil, fmt.Errorf("build: builds ended: %w", err)
	}
	keep := make(map[int64]bool, len(live))
	for _, id := range live {
		keep[id] = true
	}
	var out []int64
	for _, id := range ids {
		if !keep[id] {
			out = append(out, id)
		}
	}
	return out, nil
}

// PipelineBuild names the build page of a pipeline: its repo's team and name, and its build's
// number (/{org}/{repo}/builds/{number}?pipeline={id}).
type PipelineBuild struct {
	ID          int64
	OrgName     string
	RepoName    string
	BuildNumber int64
}

// PipelineBuilds returns the build page of each of the pipelines ids, in one query; a pipeline
// that is unknown, or whose repo was deleted (its builds go with it), is not in the map. The
// billing ledger links its entries by it.
func (s *Service) PipelineBuilds(ctx context.Context, ids []int64) (map[int64]PipelineBuild, error) {
	out := map[int64]PipelineBuild{}
	if len(ids) == 0 {
		return out, nil
	}
	var rows []PipelineBuild
	if err := s.db.WithContext(ctx).Table("pipelines").
		Select("pipelines.id, orgs.name AS org_name, repos.name AS repo_name, builds.number AS build_number").
		Joins("JOIN builds ON builds.id = pipelines.build_id").
		Joins("JOIN repos ON repos.id = builds.repo_id").
		Joins("JOIN orgs ON orgs.id = repos.org_id").
		Where("pipelines.id IN ?", ids).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("build: builds of pipelines: %w", err)
	}
	for _, r := range rows {
		out[r.ID] = r
	}
	return out, nil
}
