package billing

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/redisconn/redistest"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// Billing's own tick, since it left the scheduler's: a pipeline the account cannot cover any
// more is handed to Config.Stop (build's RequestStop in app.New), one that ended while its
// settlement failed is settled, and Run does both on its own leader lock, tick after tick. (An
// ended but unsettled pipeline may be asked to stop too, once; build ignores a stop of an end.)
func TestTickOnceStopsAndSettles(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		var mu sync.Mutex
		var stopped []int64
		ended := map[int64]time.Time{}
		cfg := DefaultConfig()
		cfg.Stop = func(_ context.Context, id int64) error {
			mu.Lock()
			defer mu.Unlock()
			stopped = append(stopped, id)
			return nil
		}
		cfg.EndedAt = func(_ context.Context, ids []int64) (map[int64]time.Time, error) {
			mu.Lock()
			defer mu.Unlock()
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
		// Money for two GPU windows: pipeline 1 runs on, pipeline 2 ends after a minute.
		window := CostOf(16*300, Scale/2)
		if err := f.svc.Credit(ctx, a.ID, KindGrant, BookGrants, 2*window, "two-windows", ""); err != nil {
			t.Fatal(err)
		}
		start := f.clock.Now()
		for id := int64(1); id <= 2; id++ {
			if err := f.svc.Start(ctx, gpuRun(id, a.OrgID), start); err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		ended[2] = start.Add(time.Minute)
		mu.Unlock()
		f.clock.Advance(5 * time.Minute)

		rdb := redistest.Isolated(t, 9) // billing's own: no other package's server holds its leader lock there
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); f.svc.Run(runCtx, rdb, 20*time.Millisecond) }()
		deadline := time.Now().Add(10 * time.Second)
		for {
			var pb PipelineBilling
			db.Take(&pb, 2)
			mu.Lock()
			got := slices.Clone(stopped)
			mu.Unlock()
			if pb.Settled && slices.Contains(got, 1) {
				if pb.CoreSeconds != 16*60 {
					t.Fatalf("settled %d core-seconds, want %d", pb.CoreSeconds, 16*60)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after 10 s of ticks: pipeline 2 settled %v, stopped %v", pb.Settled, got)
			}
			time.Sleep(20 * time.Millisecond)
		}
		stop()
		<-done
		f.checkLedger()
	})
}

// A failed stop does not hide the rest: TickOnce still settles, and says what failed.
func TestTickOnceReportsAFailedStop(t *testing.T) {
	f := newFixture(t, storetest.SQLite(t), DefaultConfig())
	boom := errors.New("build: database is gone")
	f.svc.cfg.Stop = func(context.Context, int64) error { return boom }
	f.svc.cfg.EndedAt = func(context.Context, []int64) (map[int64]time.Time, error) { return nil, nil }
	ctx := context.Background()
	a := f.account()
	if err := f.svc.Credit(ctx, a.ID, KindGrant, BookGrants, CostOf(16*300, Scale/2), "one-window", ""); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Start(ctx, gpuRun(1, a.OrgID), f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(5 * time.Minute)
	if err := f.svc.TickOnce(ctx); !errors.Is(err, boom) {
		t.Fatalf("TickOnce = %v, want the stop's failure", err)
	}
}
