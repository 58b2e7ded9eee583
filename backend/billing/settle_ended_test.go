package billing

import (
	"context"
	"errors"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// SettleEnded settles exactly the unsettled pipelines build says have ended, at the time build
// gives, and leaves running ones frozen. Build's side (PipelinesEndedAt) is tested in build;
// here EndedAt is a map, as build would answer.
func TestSettleEndedSettlesWhatBuildSaysEnded(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		cfg := DefaultConfig()
		ended := map[int64]time.Time{}
		var asked [][]int64
		cfg.EndedAt = func(_ context.Context, ids []int64) (map[int64]time.Time, error) {
			asked = append(asked, ids)
			out := map[int64]time.Time{}
			for _, id := range ids {
				if at, ok := ended[id]; ok {
					out[id] = at
				}
			}
			return out, nil
		}
		f := newFixture(t, db, cfg)
		ctx := context.Background()
		a := f.account()
		f.grant(a, "100")
		start := f.clock.Now()
		for id := int64(1); id <= 3; id++ {
			if err := f.svc.Start(ctx, gpuRun(id, a.OrgID), start); err != nil {
				t.Fatal(err)
			}
		}
		// Pipeline 2 ended after 60 s and its settlement was lost; 1 and 3 still run.
		ended[2] = start.Add(60 * time.Second)
		n, err := f.svc.SettleEnded(ctx)
		if err != nil || n != 1 {
			t.Fatalf("settled %d, err %v; want 1", n, err)
		}
		if len(asked) != 1 || len(asked[0]) != 3 {
			t.Fatalf("build was asked about %v, want the three unsettled pipelines once", asked)
		}
		var pbs []PipelineBilling
		db.Order("pipeline_id").Find(&pbs)
		if len(pbs) != 3 || pbs[0].Settled || !pbs[1].Settled || pbs[2].Settled || pbs[1].CoreSeconds != 16*60 {
			t.Fatalf("pipeline billing after SettleEnded: %+v", pbs)
		}
		// Nothing is settled twice: the next call asks about the two still running only.
		if n, err := f.svc.SettleEnded(ctx); err != nil || n != 0 || len(asked[1]) != 2 {
			t.Fatalf("second call settled %d (err %v), asked about %v", n, err, asked[1])
		}
		f.checkLedger()
	})
}

// Without the build's answer there is nothing to settle by: the call fails, loudly.
func TestSettleEndedNeedsEndedAt(t *testing.T) {
	f := newFixture(t, storetest.SQLite(t), DefaultConfig())
	if _, err := f.svc.SettleEnded(context.Background()); err == nil {
		t.Fatal("SettleEnded without Config.EndedAt succeeded")
	}
	boom := errors.New("boom")
	cfg := DefaultConfig()
	cfg.EndedAt = func(context.Context, []int64) (map[int64]time.Time, error) { return nil, boom }
	f = newFixture(t, storetest.SQLite(t), cfg)
	a := f.account()
	f.grant(a, "10")
	if err := f.svc.Start(context.Background(), gpuRun(7, a.OrgID), f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.SettleEnded(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("err %v, want build's error wrapped", err)
	}
}
