package build_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/build/buildtest"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// The pipelines of one build that end at the same moment, reported to different replicas (here:
// goroutines), still end the build: each finish locks the build's row before it reads its
// pipelines, so the last one sees every status final. Without the lock, on PostgreSQL both read
// the other as running and the build stayed running forever (the replicas e2e caught it).
func TestConcurrentFinishesEndTheBuild(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		for round := range 20 {
			first, err := buildtest.Seed(db, buildtest.Running{RepoID: f.access.Repo.ID, OrgID: f.access.Org.ID, Number: int64(round + 1), Commit: "c"})
			if err != nil {
				t.Fatal(err)
			}
			ids := []int64{first.PipelineID}
			for range 3 {
				s, err := buildtest.Seed(db, buildtest.Running{RepoID: f.access.Repo.ID, OrgID: f.access.Org.ID, Build: first.BuildID})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, s.PipelineID)
			}
			for i, id := range ids {
				if err := db.Model(&build.Pipeline{}).Where("id = ?", id).Updates(map[string]any{"agent_id": "agt", "lease_id": leaseOf(round, i)}).Error; err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			errs := make([]error, len(ids))
			for i := range ids {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, _, errs[i] = f.builds.Finish(ctx, "agt", leaseOf(round, i), protocol.FinishRequest{Status: build.StatusSuccess})
				}()
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			var b build.Build
			db.Take(&b, first.BuildID)
			if b.Status != build.StatusSuccess {
				var sts []string
				db.Model(&build.Pipeline{}).Where("build_id = ?", first.BuildID).Pluck("status", &sts)
				t.Fatalf("round %d: the build is %s after all four pipelines succeeded at once (%v)", round, b.Status, sts)
			}
		}
	})
}

func leaseOf(round, i int) string { return fmt.Sprintf("lease_race_%d_%d", round, i) }
