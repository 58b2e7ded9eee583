// Package buildtest seeds build rows for tests of other packages that need a build to exist
// without running a trigger: a running pipeline whose job token they can use. Only tests import
// it; it lives under backend/build because no other package writes build's tables.
package buildtest

import (
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/build"
)

// Running is a build of one running pipeline.
type Running struct {
	RepoID, OrgID int64
	Number        int64  // the build number
	Commit        string // the build's commit (need not exist in the repo)
	TriggeredBy   int64  // the user; 0 for nobody
}

// Seed writes the build and its pipeline and returns the pipeline's job token (CNB_TOKEN).
func Seed(db *gorm.DB, r Running) (string, error) {
	raw, err := auth.NewToken(auth.PrefixJob)
	if err != nil {
		return "", err
	}
	now := time.Now().UTC()
	b := build.Build{RepoID: r.RepoID, Number: r.Number, Event: "push", Branch: "main", CommitSHA: r.Commit,
		Status: build.StatusRunning, CreatedAt: now, UpdatedAt: now}
	if r.TriggeredBy != 0 {
		by := r.TriggeredBy
		b.TriggeredBy = &by
	}
	if err := db.Create(&b).Error; err != nil {
		return "", err
	}
	p := build.Pipeline{BuildID: b.ID, Key: "p", Name: "p", Status: build.StatusRunning, RunnerTag: "cnb:arch:amd64", CPUs: 1,
		Plan: "{}", OrgID: r.OrgID, RepoID: r.RepoID, CreatedAt: now, UpdatedAt: now, JobTokenHash: auth.HashToken(raw)}
	if err := db.Create(&p).Error; err != nil {
		return "", err
	}
	return raw, nil
}
