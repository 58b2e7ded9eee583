package billing

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// BenchmarkTick is the 5-minute tick for 10,000 running pipelines of 100 teams on PostgreSQL:
// every one of them needs its next window frozen (target: under 5 s).
func BenchmarkTick(b *testing.B) {
	f := newFixture(b, storetest.Postgres(b), DefaultConfig())
	ctx := context.Background()
	const teams, perTeam = 100, 100
	now := f.clock.Now()
	var rows []PipelineBilling
	for i := 0; i < teams; i++ {
		a := f.account()
		if err := f.svc.Credit(ctx, a.ID, KindGrant, BookGrants, 1_000_000*Scale, fmt.Sprintf("bench-grant-%d", a.ID), ""); err != nil {
			b.Fatal(err)
		}
		for j := 0; j < perTeam; j++ {
			class, cores, month := gpuClass, 16, ""
			if j%2 == 0 {
				class, cores, month = cpuClass, 8, f.svc.month(now)
			}
			rows = append(rows, PipelineBilling{PipelineID: int64(i*perTeam + j + 1), AccountID: a.ID, RepoID: 1, Class: class, Cores: cores,
				Price: f.svc.cfg.Prices[class], QuotaMonth: month, StartedAt: now, FrozenUntil: now.Add(5 * time.Minute), Windows: 1})
		}
	}
	if err := f.db.CreateInBatches(rows, 1000).Error; err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		f.clock.Advance(5 * time.Minute)
		b.StartTimer()
		start := time.Now()
		stop, err := f.svc.Tick(ctx)
		if err != nil || len(stop) != 0 {
			b.Fatalf("tick: %d stopped, %v", len(stop), err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "s/tick")
	}
	b.StopTimer()
	// Every tick froze exactly one more window of every pipeline.
	var windows int64
	f.db.Model(&PipelineBilling{}).Select("SUM(windows)").Scan(&windows)
	if want := int64(b.N+1) * teams * perTeam; windows != want {
		b.Fatalf("%d windows frozen, want %d", windows, want)
	}
	f.checkLedger()
}
