package build

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Recorded is what the backend kept of one pipeline's run, the raw material of its
// reproducibility record (package record): the build and its commit, the resolved plan as it
// was leased, the agent and host at the lease, every stage and job with its timings, exit code
// and image by digest. None of it comes from what a job says about itself.
type Recorded struct {
	Build    Build
	Pipeline Pipeline
	Plan     protocol.Plan
	Stages   []Stage
	Jobs     []Job
	// TriggeredBy is the username of who triggered the build ("" for nobody).
	TriggeredBy string
}

// Recorded returns pipeline id of the repo with its build, plan, stages and jobs; a pipeline of
// another repo is not found.
func (s *Service) Recorded(ctx context.Context, repoID, pipelineID int64) (*Recorded, error) {
	db := s.db.WithContext(ctx)
	var r Recorded
	err := db.Where("id = ? AND repo_id = ?", pipelineID, repoID).Take(&r.Pipeline).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fault.NotFound("pipeline %d not found", pipelineID)
	}
	if err != nil {
		return nil, err
	}
	if err := db.Where("id = ?", r.Pipeline.BuildID).Take(&r.Build).Error; err != nil {
		return nil, err
	}
	if r.Pipeline.Plan != "" {
		if err := json.Unmarshal([]byte(r.Pipeline.Plan), &r.Plan); err != nil {
			return nil, fmt.Errorf("build: plan of pipeline %d: %w", pipelineID, err)
		}
	}
	if err := db.Where("pipeline_id = ?", pipelineID).Order("position").Find(&r.Stages).Error; err != nil {
		return nil, err
	}
	if err := db.Where("pipeline_id = ?", pipelineID).Order("stage_id, position").Find(&r.Jobs).Error; err != nil {
		return nil, err
	}
	if r.Build.TriggeredBy != nil {
		names, err := s.users.Usernames(ctx, []int64{*r.Build.TriggeredBy})
		if err != nil {
			return nil, err
		}
		r.TriggeredBy = names[*r.Build.TriggeredBy]
	}
	return &r, nil
}

// PipelinesOf returns the ids of a build's pipelines in their order.
func (s *Service) PipelinesOf(ctx context.Context, buildID int64) ([]int64, error) {
	var ids []int64
	err := s.db.WithContext(ctx).Model(&Pipeline{}).Where("build_id = ?", buildID).Order("position").Pluck("id", &ids).Error
	return ids, err
}

// Pin is the image one job of a pipeline must run in an exact re-run: its recorded digest.
type Pin struct {
	Stage, Job int // positions, as in protocol.JobRef
	Image      string
}

// RerunExact starts a new build of the original's commit, event and ref with the plans it made
// (like Rerun), each job's image replaced by the reference pins gives it (by pipeline position):
// an image tag that moved since still runs what ran. The commit must still be in the repo.
// Which pins to give, and refusing when something recorded is gone, is the caller's (package
// record): this only checks what only the build side can, the commit.
func (s *Service) RerunExact(ctx context.Context, a *repo.Access, user *auth.User, orig *Build, pins map[int][]Pin) (*Build, error) {
	if orig.Status == StatusFailed && orig.ErrorMessage != "" {
		return nil, fault.Conflict("build #%d never planned a pipeline (%s); push a fixed .cnb.yml instead", orig.Number, orig.ErrorMessage)
	}
	if a.Repo.Archived {
		return nil, fault.Conflict("%s/%s is archived; unarchive it to run builds", a.Org.Name, a.Repo.Name)
	}
	if _, err := git.Commit(ctx, s.repos.Path(a.Repo), orig.CommitSHA); err != nil {
		if errors.Is(err, git.ErrUnknownRevision) {
			return nil, fault.Conflict("cannot re-run build #%d exactly: its commit %s is no longer in the repository", orig.Number, short(orig.CommitSHA))
		}
		return nil, err
	}
	return s.rerun(ctx, user, orig, a.Org.ID, func(pos int, plan *protocol.Plan) {
		for _, pin := range pins[pos] {
			if j := jobAt(plan, pin.Stage, pin.Job); j != nil {
				img := protocol.Image{}
				if j.Image != nil {
					img = *j.Image
				} else if plan.Image != nil {
					img = *plan.Image
				}
				img.Name = pin.Image
				j.Image = &img
			}
		}
	})
}

// jobAt is the job at stage and job positions over stages, failStages and endStages in that
// order, the way stages are stored.
func jobAt(plan *protocol.Plan, stage, job int) *protocol.Job {
	all := make([]*protocol.Stage, 0, len(plan.Stages)+len(plan.FailStages)+len(plan.EndStages))
	for _, list := range [][]protocol.Stage{plan.Stages, plan.FailStages, plan.EndStages} {
		for i := range list {
			all = append(all, &list[i])
		}
	}
	if stage < 0 || stage >= len(all) || job < 0 || job >= len(all[stage].Jobs) {
		return nil
	}
	return &all[stage].Jobs[job]
}

func short(sha string) string {
	sha = strings.TrimSpace(sha)
	return sha[:min(12, len(sha))]
}
