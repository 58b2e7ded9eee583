package billing

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// Workspaces are billed in a bucket of their own: their own free CPU quota, the same prices,
// freezing, termination, settlement and spending cap as builds.

func wsRun(r Run) Run {
	r.Workspace = true
	return r
}

// quota returns the account's row of a bucket's quota this month (zero when none).
func (f *fixture) quota(a *Account, b Bucket) QuotaUsage {
	f.t.Helper()
	q, err := f.svc.Quota(context.Background(), a.ID, b)
	if err != nil {
		f.t.Fatal(err)
	}
	return q
}

func (f *fixture) billingOf(id int64) PipelineBilling {
	f.t.Helper()
	var pb PipelineBilling
	if err := f.db.Take(&pb, id).Error; err != nil {
		f.t.Fatal(err)
	}
	return pb
}

func TestDefaultConfigHasAWorkspaceBucket(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.FreeQuota(BucketBuild) != 160*3600 || cfg.FreeQuota(BucketWorkspace) != 1600*3600 {
		t.Fatalf("free quotas %d / %d core-seconds, want 160 and 1600 core-hours", cfg.FreeQuota(BucketBuild), cfg.FreeQuota(BucketWorkspace))
	}
	if BucketOf(true) != BucketWorkspace || BucketOf(false) != BucketBuild {
		t.Fatal("BucketOf")
	}
}

// A CPU workspace draws on the workspaces' quota, never on the builds': with the builds' quota
// spent and no money, a workspace still starts, runs window after window and costs nothing,
// while a build is refused.
func TestCPUWorkspaceUsesTheWorkspaceQuotaNotTheBuilds(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		cfg := DefaultConfig()
		cfg.FreeCoreSeconds = 0
		cfg.FreeWorkspaceCoreSeconds = 8 * 900 // three windows of an 8-core workspace
		f := newFixture(t, db, cfg)
		ctx := context.Background()
		a := f.account()
		if err := f.svc.Start(ctx, cpuRun(1, a.OrgID, 8), f.clock.Now()); !errors.Is(err, ErrInsufficientBalance) {
			t.Fatalf("a build without build quota or money: %v", err)
		}
		if err := f.svc.CanStart(ctx, wsRun(cpuRun(2, a.OrgID, 8))); err != nil {
			t.Fatalf("CanStart of a workspace inside its quota: %v", err)
		}
		if err := f.svc.Start(ctx, wsRun(cpuRun(2, a.OrgID, 8)), f.clock.Now()); err != nil {
			t.Fatalf("a workspace inside the workspace quota: %v", err)
		}
		if pb := f.billingOf(2); pb.Bucket != BucketWorkspace || pb.FrozenQuota != 8*300 || pb.FrozenAmount != 0 {
			t.Fatalf("workspace record %+v", pb)
		}
		for range 2 {
			f.clock.Advance(5 * time.Minute)
			if stop, err := f.svc.Tick(ctx); err != nil || len(stop) != 0 {
				t.Fatalf("workspace windows from its quota: stop %v err %v", stop, err)
			}
		}
		if q := f.quota(a, BucketWorkspace); q.FrozenCoreSeconds != 8*900 {
			t.Fatalf("workspace quota %+v, want three windows held", q)
		}
		// It ends 12 minutes in: 720 s × 8 from the workspace quota, nothing paid.
		if err := f.svc.Settle(ctx, 2, f.clock.Now().Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		ws, build := f.quota(a, BucketWorkspace), f.quota(a, BucketBuild)
		pb := f.billingOf(2)
		if ws.UsedCoreSeconds != 8*720 || ws.FrozenCoreSeconds != 0 || pb.QuotaCoreSeconds != 8*720 || pb.Cost != 0 {
			t.Fatalf("workspace quota %+v, record %+v", ws, pb)
		}
		if build.UsedCoreSeconds != 0 || build.FrozenCoreSeconds != 0 {
			t.Fatalf("a workspace used the builds' quota: %+v", build)
		}
		if got := f.reload(a); got.Balance != 0 || got.Frozen != 0 {
			t.Fatalf("money moved: %s / %s", got.Balance, got.Frozen)
		}
		var kinds []string
		db.Model(&Txn{}).Where("account_id = ?", a.ID).Pluck("kind", &kinds)
		if len(kinds) != 0 {
			t.Fatalf("ledger %v for a run its quota paid", kinds)
		}
		f.checkLedger()
	})
}

// And the other way round: builds spend the builds' quota and leave the workspaces' whole.
func TestCPUBuildLeavesTheWorkspaceQuota(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, DefaultConfig())
		ctx := context.Background()
		a := f.account()
		if err := f.svc.Start(ctx, cpuRun(1, a.OrgID, 4), f.clock.Now()); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.Settle(ctx, 1, f.clock.Now().Add(100*time.Second)); err != nil {
			t.Fatal(err)
		}
		if b, ws := f.quota(a, BucketBuild), f.quota(a, BucketWorkspace); b.UsedCoreSeconds != 400 || ws.UsedCoreSeconds != 0 || ws.FrozenCoreSeconds != 0 {
			t.Fatalf("build quota %+v, workspace quota %+v", b, ws)
		}
		if pb := f.billingOf(1); pb.Bucket != BucketBuild {
			t.Fatalf("a build in bucket %q", pb.Bucket)
		}
		f.checkLedger()
	})
}

// Past its 1 600 free core-hours a CPU workspace pays the CPU price for the rest, with the
// builds' 160 hours untouched.
func TestCPUWorkspacePastItsQuotaPaysTheCPUPrice(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		cfg := DefaultConfig()
		f := newFixture(t, db, cfg)
		ctx := context.Background()
		a := f.account()
		// 100 s of an 8-core workspace are left of this month's 1 600 hours.
		if err := db.Create(&QuotaUsage{AccountID: a.ID, Month: f.svc.Month(), Bucket: BucketWorkspace,
			UsedCoreSeconds: 1600*3600 - 8*100}).Error; err != nil {
			t.Fatal(err)
		}
		cpu := cfg.Prices[cpuClass]
		if err := f.svc.Start(ctx, wsRun(cpuRun(1, a.OrgID, 8)), f.clock.Now()); !errors.Is(err, ErrInsufficientBalance) {
			t.Fatalf("a workspace window beyond the quota without money: %v", err)
		}
		f.grant(a, "1")
		if err := f.svc.Start(ctx, wsRun(cpuRun(1, a.OrgID, 8)), f.clock.Now()); err != nil {
			t.Fatal(err)
		}
		if pb := f.billingOf(1); pb.FrozenQuota != 8*100 || pb.FrozenAmount != CostOf(8*200, cpu) || pb.Price != cpu {
			t.Fatalf("first window: %+v, want 100 s from the quota and 200 s at %s", pb, cpu)
		}
		f.clock.Advance(5 * time.Minute)
		if stop, err := f.svc.Tick(ctx); err != nil || len(stop) != 0 {
			t.Fatalf("second window: stop %v err %v", stop, err)
		}
		// It ends at 7 minutes: 420 s × 8, of which 100 s × 8 free, the rest at the CPU price.
		end := f.clock.Now().Add(2 * time.Minute)
		if err := f.svc.Settle(ctx, 1, end); err != nil {
			t.Fatal(err)
		}
		pb := f.billingOf(1)
		want := CostOf(8*320, cpu)
		if pb.CoreSeconds != 8*420 || pb.QuotaCoreSeconds != 8*100 || pb.Cost != want || pb.WrittenOff() != 0 {
			t.Fatalf("settled %+v, want cost %s", pb, want)
		}
		if got := f.reload(a); got.Balance != Scale-want || got.Frozen != 0 {
			t.Fatalf("balance %s frozen %s", got.Balance, got.Frozen)
		}
		if ws, b := f.quota(a, BucketWorkspace), f.quota(a, BucketBuild); ws.UsedCoreSeconds != 1600*3600 || ws.FrozenCoreSeconds != 0 ||
			b.UsedCoreSeconds != 0 {
			t.Fatalf("workspace quota %+v, build quota %+v", ws, b)
		}
		sp, err := f.svc.MonthSpendingByBucket(ctx, a.ID)
		if err != nil || sp[BucketWorkspace].Paid != want || sp[BucketBuild].Paid != 0 {
			t.Fatalf("spending by bucket %+v (%v)", sp, err)
		}
		f.checkLedger()
	})
}

// A GPU workspace has no free quota: money from its first second, at the GPU price.
func TestGPUWorkspaceIsChargedFromTheFirstSecond(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, DefaultConfig())
		ctx := context.Background()
		a := f.account()
		if err := f.svc.CanStart(ctx, wsRun(gpuRun(1, a.OrgID))); !errors.Is(err, ErrInsufficientBalance) {
			t.Fatalf("CanStart of a GPU workspace without money: %v", err)
		}
		if err := f.svc.Start(ctx, wsRun(gpuRun(1, a.OrgID)), f.clock.Now()); !errors.Is(err, ErrInsufficientBalance) {
			t.Fatalf("a GPU workspace without money, its quota untouched: %v", err)
		}
		f.grant(a, "5")
		if err := f.svc.Start(ctx, wsRun(gpuRun(1, a.OrgID)), f.clock.Now()); err != nil {
			t.Fatal(err)
		}
		gpu := Amount(Scale / 2)
		if pb := f.billingOf(1); pb.Bucket != BucketWorkspace || pb.QuotaMonth != "" || pb.FrozenQuota != 0 || pb.FrozenAmount != CostOf(16*300, gpu) {
			t.Fatalf("GPU workspace record %+v", pb)
		}
		if err := f.svc.Settle(ctx, 1, f.clock.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		pb := f.billingOf(1)
		if pb.CoreSeconds != 16 || pb.QuotaCoreSeconds != 0 || pb.Cost != CostOf(16, gpu) {
			t.Fatalf("one second of a GPU workspace: %+v", pb)
		}
		if ws := f.quota(a, BucketWorkspace); ws.UsedCoreSeconds != 0 || ws.FrozenCoreSeconds != 0 {
			t.Fatalf("a GPU workspace used the free quota: %+v", ws)
		}
		f.checkLedger()
	})
}

// A workspace whose account cannot cover its next window is on Tick's list to be stopped a lead
// before it runs out, exactly as a build; the time it ran past its last window is written off.
func TestWorkspaceIsTerminatedWhenItsNextWindowCannotBeFrozen(t *testing.T) {
	cases := []struct {
		name string
		run  Run
	}{
		{"cpu past its quota", wsRun(cpuRun(1, 0, 8))},
		{"gpu", wsRun(gpuRun(1, 0))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, db *gorm.DB) {
				cfg := DefaultConfig()
				cfg.FreeWorkspaceCoreSeconds = 8 * 300 // a CPU workspace's first window
				f := newFixture(t, db, cfg)
				ctx := context.Background()
				a := f.account()
				r := c.run
				r.OrgID = a.OrgID
				window := CostOf(int64(r.Cores)*300, cfg.Prices[r.Class])
				if err := f.svc.Credit(ctx, a.ID, KindGrant, BookGrants, window, "one-window", ""); err != nil {
					t.Fatal(err)
				}
				start := f.clock.Now()
				if err := f.svc.Start(ctx, r, start); err != nil {
					t.Fatal(err)
				}
				covered := 2 // the CPU one: a window of quota, then one of money
				if r.Class == gpuClass {
					covered = 1
				}
				for w := 1; w < covered; w++ {
					f.clock.Set(start.Add(time.Duration(w)*5*time.Minute - time.Minute)) // the lead
					if stop, err := f.svc.Tick(ctx); err != nil || len(stop) != 0 {
						t.Fatalf("window %d: stop %v err %v", w+1, stop, err)
					}
				}
				f.clock.Set(start.Add(time.Duration(covered)*5*time.Minute - time.Minute))
				stop, err := f.svc.Tick(ctx)
				if err != nil || fmt.Sprint(stop) != "[1]" {
					t.Fatalf("uncovered window: stop %v err %v", stop, err)
				}
				// Stopped 3 s after its last covered window ran out, with an empty balance.
				end := start.Add(time.Duration(covered)*5*time.Minute + 3*time.Second)
				if err := f.svc.Settle(ctx, 1, end); err != nil {
					t.Fatal(err)
				}
				pb := f.billingOf(1)
				price := CostOf(pb.CoreSeconds-pb.QuotaCoreSeconds, pb.Price)
				if pb.CoreSeconds != int64(r.Cores)*int64(covered*300+3) || pb.Cost != window || pb.WrittenOff() != price-window ||
					pb.WrittenOff() <= 0 || pb.Uncovered() != 3*time.Second {
					t.Fatalf("settled %+v: paid %s, written off %s", pb, pb.Cost, pb.WrittenOff())
				}
				if got := f.reload(a); got.Balance != 0 || got.Frozen != 0 {
					t.Fatalf("balance %s frozen %s", got.Balance, got.Frozen)
				}
				sp, err := f.svc.MonthSpendingByBucket(ctx, a.ID)
				if err != nil || sp[BucketWorkspace].Paid != window || sp[BucketWorkspace].WrittenOff != pb.WrittenOff() || sp[BucketBuild] != (Spending{}) {
					t.Fatalf("spending by bucket %+v (%v)", sp, err)
				}
				f.checkLedger()
			})
		})
	}
}

// The spending cap counts builds and workspaces together.
func TestSpendingCapCountsBothBuckets(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, DefaultConfig())
		ctx := context.Background()
		a := f.account()
		f.grant(a, "10")
		window := CostOf(16*300, Scale/2)
		limit := 2*window - 1 // one GPU window of each bucket would pass it
		db.Model(&Account{}).Where("id = ?", a.ID).Update("spending_cap", limit)
		if err := f.svc.Start(ctx, gpuRun(1, a.OrgID), f.clock.Now()); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.Start(ctx, wsRun(gpuRun(2, a.OrgID)), f.clock.Now()); !errors.Is(err, ErrSpendingCap) {
			t.Fatalf("a workspace past the cap with a build frozen: %v", err)
		}
		// Settled, the build's cost still counts this month.
		if err := f.svc.Settle(ctx, 1, f.clock.Now().Add(5*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.CanStart(ctx, wsRun(gpuRun(2, a.OrgID))); !errors.Is(err, ErrSpendingCap) {
			t.Fatalf("a workspace past the cap with a build paid: %v", err)
		}
		// A CPU workspace inside its free quota costs no money and still starts.
		if err := f.svc.Start(ctx, wsRun(cpuRun(3, a.OrgID, 8)), f.clock.Now()); err != nil {
			t.Fatalf("a free CPU workspace under a reached cap: %v", err)
		}
		f.checkLedger()
	})
}

// Usage keeps the buckets apart: a build and a workspace of the same class, repo and day are two
// rows.
func TestUsageSplitsBuckets(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, DefaultConfig())
		ctx := context.Background()
		a := f.account()
		f.grant(a, "10")
		start := f.clock.Now()
		runs := []Run{cpuRun(1, a.OrgID, 4), wsRun(cpuRun(2, a.OrgID, 4)), wsRun(cpuRun(3, a.OrgID, 6)), wsRun(gpuRun(4, a.OrgID))}
		for _, r := range runs {
			if err := f.svc.Start(ctx, r, start); err != nil {
				t.Fatal(err)
			}
			if err := f.svc.Settle(ctx, r.PipelineID, start.Add(100*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		day := start.In(f.svc.cfg.Location).Format(time.DateOnly)
		rows, err := f.svc.Usage(ctx, a.ID, day, day)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rows {
			got = append(got, fmt.Sprintf("%s %s %d: %d pipelines, %d core-s (%d free), %s", r.Bucket, r.Class, r.RepoID, r.Pipelines,
				r.CoreSeconds, r.QuotaCoreSeconds, r.Cost.Display()))
		}
		want := []string{
			"build cnb:arch:amd64 1: 1 pipelines, 400 core-s (400 free), 0.0000",
			"workspace cnb:arch:amd64 1: 2 pipelines, 1000 core-s (1000 free), 0.0000",
			"workspace cnb:arch:amd64:gpu 1: 1 pipelines, 1600 core-s (0 free), 0.2222",
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("usage\n got %q\nwant %q", got, want)
		}
		if b, ws := f.quota(a, BucketBuild), f.quota(a, BucketWorkspace); b.UsedCoreSeconds != 400 || ws.UsedCoreSeconds != 1000 {
			t.Fatalf("build quota %+v, workspace quota %+v", b, ws)
		}
		f.checkLedger()
	})
}
