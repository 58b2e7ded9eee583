package build_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/build/buildtest"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// The "pipeline ended" hook is the one place what follows an end starts from (the scheduler's
// slot and locks, billing's settlement): it fires once per pipeline an agent's finish or the
// reaper ended, in registration order, and never for a repeated finish or a re-queued pipeline.
func TestOnEndedFiresOncePerEnd(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var calls []string
		f.builds.OnEnded(func(ctx context.Context, p *build.Pipeline) {
			// The agent's context ends with its request; the hook's never does.
			if ctx.Done() != nil {
				t.Errorf("pipeline %d: the hook's context can be cancelled", p.ID)
			}
			calls = append(calls, fmt.Sprintf("first %d %s %s", p.ID, p.Status, p.Reason))
		})
		f.builds.OnEnded(func(_ context.Context, p *build.Pipeline) {
			calls = append(calls, fmt.Sprintf("second %d", p.ID))
		})
		now := f.clock.Now().UTC()
		seed := func(n int64, lease string, userStarted bool, expires time.Time) int64 {
			t.Helper()
			s, err := buildtest.Seed(db, buildtest.Running{RepoID: f.access.Repo.ID, OrgID: f.access.Org.ID, Number: n, Commit: "c"})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Model(&build.Pipeline{}).Where("id = ?", s.PipelineID).Updates(map[string]any{"agent_id": "agt", "lease_id": lease,
				"user_started": userStarted, "lease_expires_at": expires, "started_at": now.Add(-time.Hour)}).Error; err != nil {
				t.Fatal(err)
			}
			return s.PipelineID
		}
		finished := seed(1, "lease_finish", true, now.Add(time.Hour))
		lost := seed(2, "lease_lost", true, now.Add(-time.Minute))
		requeued := seed(3, "lease_requeued", false, now.Add(-time.Minute))

		if _, ended, err := f.builds.Finish(ctx, "agt", "lease_finish", protocol.FinishRequest{Status: build.StatusSuccess}); err != nil || !ended {
			t.Fatalf("finish: ended %v, %v", ended, err)
		}
		if _, ended, err := f.builds.Finish(ctx, "agt", "lease_finish", protocol.FinishRequest{Status: build.StatusSuccess}); err != nil || ended {
			t.Fatalf("repeated finish: ended %v, %v", ended, err)
		}
		reaped, err := f.builds.Reap(context.Background(), now, 30*time.Second)
		if err != nil || len(reaped) != 2 {
			t.Fatalf("reap: %+v, %v", reaped, err)
		}
		if again, err := f.builds.Reap(context.Background(), now, 30*time.Second); err != nil || len(again) != 0 {
			t.Fatalf("second reap: %+v, %v", again, err)
		}
		want := []string{
			fmt.Sprintf("first %d success ", finished), fmt.Sprintf("second %d", finished),
			fmt.Sprintf("first %d failed %s", lost, build.ReasonAgentLost), fmt.Sprintf("second %d", lost),
		}
		if !slices.Equal(calls, want) {
			t.Fatalf("hook calls %q, want %q (pipeline %d was re-queued)", calls, want, requeued)
		}
	})
}
