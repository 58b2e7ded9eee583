package build_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/build/buildtest"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// The reads other packages make of build's tables answer from the rows: which pipelines and
// builds ended and when, which repo a pipeline is of, and the team's workspace pipelines.
func TestReadsOtherPackagesMake(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		r := f.access.Repo
		seed := func(number int64) buildtest.Seeded {
			s, err := buildtest.Seed(db, buildtest.Running{RepoID: r.ID, OrgID: r.OrgID, Number: number, Commit: "c0ffee"})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		running, done, old := seed(1), seed(2), seed(3)
		end := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
		if err := buildtest.Ended(db, done.BuildID, end); err != nil {
			t.Fatal(err)
		}
		if err := buildtest.Ended(db, old.BuildID, end.Add(-48*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := db.Model(&build.Pipeline{}).Where("id = ?", done.PipelineID).Updates(map[string]any{"status": build.StatusSuccess, "finished_at": end}).Error; err != nil {
			t.Fatal(err)
		}

		at, err := f.builds.PipelinesEndedAt(ctx, []int64{running.PipelineID, done.PipelineID, 9999})
		if err != nil || len(at) != 1 || !at[done.PipelineID].Equal(end) {
			t.Fatalf("PipelinesEndedAt = %v, %v; want only pipeline %d at %s", at, err, done.PipelineID, end)
		}
		if at, err := f.builds.PipelinesEndedAt(ctx, nil); err != nil || len(at) != 0 {
			t.Fatalf("PipelinesEndedAt(nil) = %v, %v", at, err)
		}

		// Ended before the cutoff, or gone (9999): the builds whose hand-offs expire.
		gone, err := f.builds.BuildsEndedBefore(ctx, []int64{running.BuildID, done.BuildID, old.BuildID, 9999}, end.Add(-time.Hour))
		if err != nil || !slices.Equal(gone, []int64{old.BuildID, 9999}) {
			t.Fatalf("BuildsEndedBefore = %v, %v; want [%d 9999]", gone, err, old.BuildID)
		}

		if id, found, err := f.builds.RepoOfPipeline(ctx, done.PipelineID); err != nil || !found || id != r.ID {
			t.Fatalf("RepoOfPipeline = %d, %v, %v", id, found, err)
		}
		if _, found, err := f.builds.RepoOfPipeline(ctx, 9999); err != nil || found {
			t.Fatalf("RepoOfPipeline(9999) found %v, err %v", found, err)
		}

		// The build pages of pipelines, in one read; an unknown pipeline has none.
		pbs, err := f.builds.PipelineBuilds(ctx, []int64{done.PipelineID, old.PipelineID, 9999})
		if err != nil || len(pbs) != 2 || pbs[done.PipelineID] != (build.PipelineBuild{ID: done.PipelineID, OrgName: "team", RepoName: "trainer", BuildNumber: 2}) ||
			pbs[old.PipelineID].BuildNumber != 3 {
			t.Fatalf("PipelineBuilds = %+v, %v; want pipelines %d (trainer #2) and %d (#3)", pbs, err, done.PipelineID, old.PipelineID)
		}
		if pbs, err := f.builds.PipelineBuilds(ctx, nil); err != nil || len(pbs) != 0 {
			t.Fatalf("PipelineBuilds(nil) = %v, %v", pbs, err)
		}

		// Only workspace pipelines are workspaces.
		if _, err := f.builds.Workspace(ctx, running.PipelineID); !errors.Is(err, gorm.ErrRecordNotFound) {
			t.Fatalf("a build pipeline read as a workspace: %v", err)
		}
		if err := db.Model(&build.Pipeline{}).Where("id IN ?", []int64{running.PipelineID, done.PipelineID}).Update("workspace", true).Error; err != nil {
			t.Fatal(err)
		}
		ws, err := f.builds.Workspace(ctx, running.PipelineID)
		if err != nil || ws.RepoName != "trainer" || ws.OrgName != "team" || ws.BuildNumber != 1 || ws.Branch != "main" {
			t.Fatalf("Workspace = %+v, %v", ws, err)
		}
		all, err := f.builds.Workspaces(ctx, r.OrgID, false)
		if err != nil || len(all) != 2 || all[0].ID != done.PipelineID || all[1].ID != running.PipelineID {
			t.Fatalf("Workspaces(all) = %+v, %v; want %d then %d", all, err, done.PipelineID, running.PipelineID)
		}
		active, err := f.builds.Workspaces(ctx, r.OrgID, true)
		if err != nil || len(active) != 1 || active[0].ID != running.PipelineID {
			t.Fatalf("Workspaces(active) = %+v, %v", active, err)
		}
		if other, err := f.builds.Workspaces(ctx, r.OrgID+1000, false); err != nil || len(other) != 0 {
			t.Fatalf("another team's workspaces: %+v, %v", other, err)
		}
	})
}
