// Package buildtest seeds build rows for the tests and benchmarks of other packages that need
// builds to exist without running a trigger: a running pipeline with its job token and a job
// (registry, model files, logs), or thousands of queued pipelines (the scheduler's benchmarks).
// Only tests import it; it lives under backend/build because no other package writes build's
// tables (TestOnlyBuildWritesBuildRows).
package buildtest

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/store"
)

// Running is a build of one running pipeline of one stage of one job.
type Running struct {
	RepoID, OrgID int64
	Number        int64  // the build number
	Commit        string // the build's commit (need not exist in the repo)
	TriggeredBy   int64  // the user; 0 for nobody
	// Build, when not 0, is an existing build: Seed adds a pipeline to it (Number and Commit
	// are then ignored).
	Build int64
	// Event is the build's event; "" is push.
	Event string
}

// Seeded is what Seed wrote.
type Seeded struct {
	BuildID, PipelineID, JobID int64
	JobToken                   string // the pipeline's CNB_TOKEN
}

// Seed writes the running build, its pipeline, stage and job.
func Seed(db *gorm.DB, r Running) (Seeded, error) {
	raw, err := auth.NewToken(auth.PrefixJob)
	if err != nil {
		return Seeded{}, err
	}
	now := time.Now().UTC()
	event := r.Event
	if event == "" {
		event = "push"
	}
	b := build.Build{RepoID: r.RepoID, Number: r.Number, Event: event, Branch: "main", CommitSHA: r.Commit,
		Status: build.StatusRunning, CreatedAt: now, UpdatedAt: now}
	if r.TriggeredBy != 0 {
		by := r.TriggeredBy
		b.TriggeredBy = &by
	}
	var out Seeded
	key := "p"
	err = store.Tx(context.Background(), db, func(tx *gorm.DB) error {
		if r.Build != 0 {
			var n int64
			if err := tx.Model(&build.Pipeline{}).Where("build_id = ?", r.Build).Count(&n).Error; err != nil {
				return err
			}
			b.ID, key = r.Build, fmt.Sprintf("p%d", n)
		} else if err := tx.Create(&b).Error; err != nil {
			return err
		}
		p := build.Pipeline{BuildID: b.ID, Key: key, Name: key, Status: build.StatusRunning, RunnerTag: "cnb:arch:amd64", CPUs: 1,
			Plan: "{}", OrgID: r.OrgID, RepoID: r.RepoID, CreatedAt: now, UpdatedAt: now, JobTokenHash: auth.HashToken(raw)}
		if err := tx.Create(&p).Error; err != nil {
			return err
		}
		st := build.Stage{PipelineID: p.ID, Name: "s", Status: build.StatusRunning}
		if err := tx.Create(&st).Error; err != nil {
			return err
		}
		j := build.Job{StageID: st.ID, PipelineID: p.ID, Name: "j", Status: build.StatusRunning}
		if err := tx.Create(&j).Error; err != nil {
			return err
		}
		out = Seeded{BuildID: b.ID, PipelineID: p.ID, JobID: j.ID, JobToken: raw}
		return nil
	})
	return out, err
}

// Team is a repo of a team that queued pipelines belong to.
type Team struct{ OrgID, RepoID int64 }

// Queued writes n queued pipelines of class cnb:arch:amd64 (1 core, plan as their Plan JSON),
// each with its own build, a stage and a job, spread round robin over the teams, in one
// transaction; nothing is enqueued.
func Queued(db *gorm.DB, teams []Team, plan string, n int) ([]*build.Pipeline, error) {
	now := time.Now().UTC()
	out := make([]*build.Pipeline, 0, n)
	err := store.Tx(context.Background(), db, func(tx *gorm.DB) error {
		for i := 0; i < n; i++ {
			t := teams[i%len(teams)]
			bd := &build.Build{RepoID: t.RepoID, Number: time.Now().UnixNano(), Event: "push", Branch: "main",
				CommitSHA: "0000000000000000000000000000000000000001", Status: build.StatusQueued, CreatedAt: now, UpdatedAt: now}
			if err := tx.Create(bd).Error; err != nil {
				return err
			}
			p := &build.Pipeline{BuildID: bd.ID, Key: "pipeline-0", Name: "p", Status: build.StatusQueued, RunnerTag: "cnb:arch:amd64", CPUs: 1,
				Plan: plan, OrgID: t.OrgID, RepoID: t.RepoID, CreatedAt: now, UpdatedAt: now, QueuedAt: &now}
			if err := tx.Create(p).Error; err != nil {
				return err
			}
			st := &build.Stage{PipelineID: p.ID, Name: "s", Status: build.StatusQueued}
			if err := tx.Create(st).Error; err != nil {
				return err
			}
			if err := tx.Create(&build.Job{StageID: st.ID, PipelineID: p.ID, Name: "j", Status: build.StatusQueued}).Error; err != nil {
				return err
			}
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

// Ended marks a build ended at the given time (its pipelines untouched): what retention rules
// that count from a build's end need.
func Ended(db *gorm.DB, buildID int64, at time.Time) error {
	return db.Model(&build.Build{}).Where("id = ?", buildID).
		Updates(map[string]any{"status": build.StatusSuccess, "finished_at": at.UTC()}).Error
}

// ForPull links build id to pull request number, as a pull_request* event build is.
func ForPull(db *gorm.DB, id, number int64) error {
	return db.Model(&build.Build{}).Where("id = ?", id).Update("pull_number", number).Error
}

// Untrusted marks build id as a fork's proposed code of request number (build.Build.Untrusted).
func Untrusted(db *gorm.DB, id, number int64) error {
	return db.Model(&build.Build{}).Where("id = ?", id).Updates(map[string]any{"untrusted": true, "pull_number": number}).Error
}

// Report keeps a metric row as a finished job's report would.
func Report(db *gorm.DB, m build.Metric) error { return db.Create(&m).Error }
