package build_test

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/app"
	"github.com/nimbus-build/nimbus/backend/billing"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// TestPipelineCostInTheBuildAPI: a running pipeline shows cores × its seconds so far and the cost
// of what its frozen free quota does not cover; a settled one its settled figures; one that never
// started zero.
func TestPipelineCostInTheBuildAPI(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		f.commit("add ci", map[string]string{".cnb.yml": twoPipelines})
		b := f.push("refs/heads/main", git.ZeroSHA, "main")[0]
		var ps []build.Pipeline
		if err := db.Where("build_id = ?", b.ID).Order("position").Find(&ps).Error; err != nil || len(ps) != 2 {
			t.Fatalf("pipelines %v %v", ps, err)
		}
		now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC) // the fixture's clock
		// The team's account was opened with the team (testworld, as app.New).
		var acct billing.Account
		if err := db.Where("org_id = ?", f.access.Org.ID).Take(&acct).Error; err != nil {
			t.Fatal(err)
		}
		// train-cpu: 8 cores for 100.2 s (rounded up to 101), 600 core-seconds of frozen quota,
		// the rest (208) at 0.125 per core-hour.
		running := billing.PipelineBilling{PipelineID: ps[0].ID, AccountID: acct.ID, RepoID: b.RepoID, Class: "cnb:arch:amd64", Cores: 8,
			Price: billing.Scale / 8, QuotaMonth: "2026-05", StartedAt: now.Add(-100200 * time.Millisecond), FrozenUntil: now.Add(time.Minute),
			Windows: 1, FrozenQuota: 600}
		if err := db.Create(&running).Error; err != nil {
			t.Fatal(err)
		}
		h := build.NewHandler(build.HandlerConfig{Service: f.builds, Repos: f.repos, Log: f.log,
			Meter: app.Usage(billing.NewService(db, f.clock, f.log, billing.DefaultConfig()))})
		detail, err := h.Describe(context.Background(), b.RepoID, b.Number)
		if err != nil {
			t.Fatal(err)
		}
		cpu, gpu := detail.Pipelines[0], detail.Pipelines[1]
		wantCost := billing.CostOf(808-600, billing.Scale/8).Display()
		if cpu.CoreSeconds != 808 || cpu.Cost != wantCost {
			t.Errorf("running: %d core-seconds, cost %s; want 808 and %s", cpu.CoreSeconds, cpu.Cost, wantCost)
		}
		if gpu.CoreSeconds != 0 || gpu.Cost != build.NoCost {
			t.Errorf("never started: %d core-seconds, cost %s", gpu.CoreSeconds, gpu.Cost)
		}
		settled := billing.PipelineBilling{PipelineID: ps[1].ID, AccountID: acct.ID, RepoID: b.RepoID, Class: "cnb:arch:amd64:gpu", Cores: 16,
			Price: billing.Scale / 2, StartedAt: now.Add(-time.Hour), FrozenUntil: now, Settled: true, EndedAt: &now,
			CoreSeconds: 960, Cost: billing.CostOf(960, billing.Scale/2)}
		if err := db.Create(&settled).Error; err != nil {
			t.Fatal(err)
		}
		detail, err = h.Describe(context.Background(), b.RepoID, b.Number)
		if err != nil {
			t.Fatal(err)
		}
		if gpu := detail.Pipelines[1]; gpu.CoreSeconds != 960 || gpu.Cost != "0.1333" {
			t.Errorf("settled: %d core-seconds, cost %s; want 960 and 0.1333", gpu.CoreSeconds, gpu.Cost)
		}
	})
}
