package billing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

const (
	cpuClass = "cnb:arch:amd64"
	gpuClass = "cnb:arch:amd64:gpu"
)

type fixture struct {
	t     testing.TB
	db    *gorm.DB
	svc   *Service
	clock *clock.Fake
}

func newFixture(t testing.TB, db *gorm.DB, cfg Config) *fixture {
	f := &fixture{t: t, db: db, clock: clock.NewFake(time.Date(2026, 6, 10, 4, 0, 0, 0, time.UTC))}
	f.svc = NewService(db, f.clock, slog.New(slog.NewTextHandler(io.Discard, nil)), cfg)
	return f
}

var orgSeq atomic.Int64

// account creates an org with its billing account and returns the account.
func (f *fixture) account() *Account {
	f.t.Helper()
	now := f.clock.Now()
	name := fmt.Sprintf("team-%d-%d", time.Now().UnixNano(), orgSeq.Add(1))
	if err := f.db.Exec("INSERT INTO orgs (name, created_at, updated_at) VALUES (?, ?, ?)", name, now, now).Error; err != nil {
		f.t.Fatal(err)
	}
	var orgID int64
	f.db.Raw("SELECT id FROM orgs WHERE name = ?", name).Scan(&orgID)
	if err := OpenAccount(f.db, orgID, now); err != nil {
		f.t.Fatal(err)
	}
	a, err := f.svc.AccountOf(context.Background(), orgID)
	if err != nil {
		f.t.Fatal(err)
	}
	return a
}

func (f *fixture) grant(a *Account, amount string) {
	f.t.Helper()
	amt, _ := ParseAmount(amount)
	if err := f.svc.Credit(context.Background(), a.ID, KindGrant, BookGrants, amt, fmt.Sprintf("test-grant-%d", time.Now().UnixNano()), "test"); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) reload(a *Account) *Account {
	var out Account
	f.db.Take(&out, a.ID)
	return &out
}

// checkLedger asserts the invariants: every transaction balances, the cached balance and frozen
// equal the ledger, nothing is negative.
func (f *fixture) checkLedger() {
	f.t.Helper()
	var unbalanced int64
	f.db.Raw("SELECT COUNT(*) FROM (SELECT txn_id FROM ledger_postings GROUP BY txn_id HAVING SUM(amount) <> 0) u").Scan(&unbalanced)
	if unbalanced != 0 {
		f.t.Fatalf("%d unbalanced transactions", unbalanced)
	}
	var accounts []Account
	f.db.Find(&accounts)
	for _, a := range accounts {
		var avail, frozen int64
		f.db.Raw("SELECT COALESCE(SUM(amount), 0) FROM ledger_postings WHERE account_id = ? AND book = ?", a.ID, BookAvailable).Scan(&avail)
		f.db.Raw("SELECT COALESCE(SUM(amount), 0) FROM ledger_postings WHERE account_id = ? AND book = ?", a.ID, BookFrozen).Scan(&frozen)
		if Amount(avail) != a.Balance || Amount(frozen) != a.Frozen {
			f.t.Fatalf("account %d: cached %s/%s, ledger %s/%s", a.ID, a.Balance, a.Frozen, Amount(avail), Amount(frozen))
		}
		if a.Balance < 0 || a.Frozen < 0 {
			f.t.Fatalf("account %d below zero: %s / %s", a.ID, a.Balance, a.Frozen)
		}
	}
	var over int64
	f.db.Raw("SELECT COUNT(*) FROM quota_usage WHERE used_core_seconds + frozen_core_seconds > CASE WHEN bucket = ? THEN ? ELSE ? END "+
		"OR frozen_core_seconds < 0 OR bucket NOT IN (?, ?)", BucketWorkspace, f.svc.cfg.FreeWorkspaceCoreSeconds, f.svc.cfg.FreeCoreSeconds,
		BucketBuild, BucketWorkspace).Scan(&over)
	if over != 0 {
		f.t.Fatalf("%d quota rows beyond their bucket's free quota", over)
	}
}

func gpuRun(id, org int64) Run {
	return Run{PipelineID: id, OrgID: org, RepoID: 1, Class: gpuClass, Cores: 16}
}
func cpuRun(id, org int64, cores int) Run {
	return Run{PipelineID: id, OrgID: org, RepoID: 1, Class: cpuClass, Cores: cores}
}

func TestGPUPipelineIsTerminatedWhenTheThirdWindowCannotBeFrozen(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, DefaultConfig())
		ctx := context.Background()
		a := f.account()
		// A GPU window is 16 cores × 300 s at 0.5/core-hour = 0.66666667: money for two windows.
		window := CostOf(16*300, Scale/2)
		if err := f.svc.Credit(ctx, a.ID, KindGrant, BookGrants, 2*window, "two-windows", ""); err != nil {
			t.Fatal(err)
		}
		start := f.clock.Now()
		if err := f.svc.Start(ctx, gpuRun(1, a.OrgID), start); err != nil {
			t.Fatal(err)
		}
		if got := f.reload(a); got.Frozen.Display() != "0.6667" || got.Balance.Display() != "0.6667" {
			t.Fatalf("after the first window: balance %s frozen %s", got.Balance.Display(), got.Frozen.Display())
		}
		f.clock.Advance(5 * time.Minute)
		if stop, err := f.svc.Tick(ctx); err != nil || len(stop) != 0 {
			t.Fatalf("second window: stop %v err %v", stop, err)
		}
		f.clock.Advance(5 * time.Minute)
		stop, err := f.svc.Tick(ctx)
		if err != nil || len(stop) != 1 || stop[0] != 1 {
			t.Fatalf("third window: stop %v err %v", stop, err)
		}
		// The agent stops 7 s later; the run is settled by the second.
		end := f.clock.Now().Add(7 * time.Second)
		if err := f.svc.Settle(ctx, 1, end); err != nil {
			t.Fatal(err)
		}
		got := f.reload(a)
		var pb PipelineBilling
		db.Take(&pb, 1)
		if pb.CoreSeconds != 16*607 || got.Frozen != 0 || got.Balance < 0 {
			t.Fatalf("settled %d core-seconds, balance %s frozen %s", pb.CoreSeconds, got.Balance, got.Frozen)
		}
		// Two windows were frozen (1.33333334); the run's price is 16 × 607 s = 1.34888889. The
		// balance is empty, so the 7 s past the last covered window are written off: the account
		// ends at zero, never below, and the pipeline's cost is what was paid.
		var writeoff int64
		db.Raw("SELECT COALESCE(SUM(amount), 0) FROM ledger_postings WHERE book = ?", BookWriteoff).Scan(&writeoff)
		price := CostOf(16*607, Scale/2)
		if pb.Cost != 2*window || got.Balance != 0 || Amount(-writeoff) != price-2*window || pb.WrittenOff() != price-2*window {
			t.Fatalf("cost %s balance %s writeoff %s (pipeline: %s)", pb.Cost, got.Balance, Amount(-writeoff), pb.WrittenOff())
		}
		if pb.Uncovered() != 7*time.Second {
			t.Fatalf("ran %s past its last covered window, want 7s", pb.Uncovered())
		}
		var kinds []string
		db.Model(&Txn{}).Where("account_id = ?", a.ID).Order("id").Pluck("kind", &kinds)
		if fmt.Sprint(kinds) != "[grant freeze freeze settle]" {
			t.Fatalf("ledger %v", kinds)
		}
		f.checkLedger()
	})
}

func TestCPUUsesTheFreeQuotaFirstThenMoney(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		cfg := DefaultConfig()
		cfg.FreeCoreSeconds = 8 * 450 // 7.5 minutes of an 8-core pipeline
		f := newFixture(t, db, cfg)
		ctx := context.Background()
		a := f.account()
		// No money: the first window comes from the quota alone.
		if err := f.svc.Start(ctx, cpuRun(1, a.OrgID, 8), f.clock.Now()); err != nil {
			t.Fatalf("free quota must start a CPU pipeline without money: %v", err)
		}
		f.clock.Advance(5 * time.Minute)
		// The second window is half quota, half money: without money it cannot be frozen.
		if stop, _ := f.svc.Tick(ctx); len(stop) != 1 {
			t.Fatalf("second window without money: stop %v", stop)
		}
		f.grant(a, "1")
		if stop, _ := f.svc.Tick(ctx); len(stop) != 0 {
			t.Fatalf("second window with money: stop %v", stop)
		}
		if got := f.reload(a); got.Frozen != CostOf(8*150, Scale/8) {
			t.Fatalf("frozen %s, want the money for 150 s × 8 cores", got.Frozen)
		}
		// It ends at 6 minutes: 360 s × 8 = 2880 core-seconds from the quota, nothing paid.
		if err := f.svc.Settle(ctx, 1, f.clock.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		var q QuotaUsage
		db.Where("account_id = ?", a.ID).Take(&q)
		var pb PipelineBilling
		db.Take(&pb, 1)
		if q.UsedCoreSeconds != 2880 || q.FrozenCoreSeconds != 0 || pb.Cost != 0 || pb.QuotaCoreSeconds != 2880 {
			t.Fatalf("quota %+v pipeline %+v", q, pb)
		}
		if got := f.reload(a); got.Balance != Scale || got.Frozen != 0 {
			t.Fatalf("money moved for a run the quota covered: %s / %s", got.Balance, got.Frozen)
		}
		// GPU never uses the quota.
		if err := f.svc.Start(ctx, gpuRun(2, a.OrgID), f.clock.Now()); err != nil {
			t.Fatal(err)
		}
		var gpb PipelineBilling
		db.Take(&gpb, 2)
		if gpb.FrozenQuota != 0 || gpb.FrozenAmount == 0 {
			t.Fatalf("GPU froze quota: %+v", gpb)
		}
		f.checkLedger()
	})
}

func TestStartRefusesWithoutMoneyAndTheCap(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, DefaultConfig())
		ctx := context.Background()
		a := f.account()
		if err := f.svc.Start(ctx, gpuRun(1, a.OrgID), f.clock.Now()); !errors.Is(err, ErrInsufficientBalance) {
			t.Fatalf("GPU without money: %v", err)
		}
		if err := f.svc.CanStart(ctx, gpuRun(1, a.OrgID)); !errors.Is(err, ErrInsufficientBalance) {
			t.Fatalf("CanStart: %v", err)
		}
		var n int64
		db.Model(&PipelineBilling{}).Count(&n)
		if n != 0 {
			t.Fatal("a refused pipeline left a billing record")
		}
		f.grant(a, "10")
		limit := Amount(Scale) // 1.00 a month
		db.Model(&Account{}).Where("id = ?", a.ID).Update("spending_cap", limit)
		if err := f.svc.Start(ctx, gpuRun(2, a.OrgID), f.clock.Now()); err != nil {
			t.Fatalf("first window under the cap: %v", err)
		}
		if err := f.svc.Start(ctx, gpuRun(3, a.OrgID), f.clock.Now()); !errors.Is(err, ErrSpendingCap) {
			t.Fatalf("past the cap: %v", err)
		}
		var alerts []Notification
		db.Where("account_id = ?", a.ID).Order("id").Find(&alerts)
		if len(alerts) != 1 || alerts[0].Kind != "cap_50" {
			t.Fatalf("alerts %+v", alerts)
		}
		f.checkLedger()
	})
}

func TestSettleAndCreditsAreIdempotent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, DefaultConfig())
		ctx := context.Background()
		a := f.account()
		amt, _ := ParseAmount("5")
		if err := f.svc.Credit(ctx, a.ID, KindTopup, BookStripe, amt, "stripe:cs_1", "top-up"); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.Credit(ctx, a.ID, KindTopup, BookStripe, amt, "stripe:cs_1", "top-up"); !errors.Is(err, ErrDuplicate) {
			t.Fatalf("duplicate credit: %v", err)
		}
		f.svc.Start(ctx, gpuRun(1, a.OrgID), f.clock.Now())
		end := f.clock.Now().Add(90 * time.Second)
		var wg sync.WaitGroup
		for i := 0; i < 5; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); f.svc.Settle(ctx, 1, end) }()
		}
		wg.Wait()
		var settles int64
		db.Model(&Txn{}).Where("kind = ? AND pipeline_id = ?", KindSettle, 1).Count(&settles)
		if settles != 1 {
			t.Fatalf("settled %d times", settles)
		}
		if got := f.reload(a); got.Balance != amt-CostOf(16*90, Scale/2) {
			t.Fatalf("balance %s after 90 GPU seconds", got.Balance)
		}
		refund, _ := ParseAmount("10") // more than is left: the rest is written off
		if err := f.svc.Refund(ctx, a.ID, refund, "stripe:refund:re_1", "refund"); err != nil {
			t.Fatal(err)
		}
		if got := f.reload(a); got.Balance != 0 {
			t.Fatalf("balance %s after a refund beyond it", got.Balance)
		}
		f.checkLedger()
	})
}

// A pipeline that waited for its place after the lease (a Kubernetes pod Pending for a GPU) is
// billed from when it started, not from its dispatch; moving the start again, earlier, or for
// a pipeline without a bill changes nothing.
func TestALateStartIsBilledFromWhenItRan(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, DefaultConfig())
		ctx := context.Background()
		a := f.account()
		f.grant(a, "5")
		dispatched := f.clock.Now()
		if err := f.svc.Start(ctx, gpuRun(1, a.OrgID), dispatched); err != nil {
			t.Fatal(err)
		}
		var before PipelineBilling
		db.Take(&before, "pipeline_id = ?", 1)
		ran := dispatched.Add(2 * time.Minute) // two minutes Pending
		for _, at := range []time.Time{ran, ran.Add(-time.Minute), dispatched} {
			if err := f.svc.Started(ctx, 1, at); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.svc.Started(ctx, 99, ran); err != nil {
			t.Fatalf("a pipeline without a bill: %v", err)
		}
		var after PipelineBilling
		db.Take(&after, "pipeline_id = ?", 1)
		if !after.StartedAt.Equal(ran) || after.FrozenUntil.Sub(after.StartedAt) != before.FrozenUntil.Sub(before.StartedAt) ||
			after.FrozenAmount != before.FrozenAmount {
			t.Fatalf("bill after the late start: %+v (before %+v)", after, before)
		}
		if err := f.svc.Settle(ctx, 1, ran.Add(90*time.Second)); err != nil {
			t.Fatal(err)
		}
		want, _ := ParseAmount("5")
		if got := f.reload(a); got.Balance != want-CostOf(16*90, Scale/2) {
			t.Fatalf("balance %s: billed other than the 90 GPU seconds it ran", got.Balance)
		}
		if err := f.svc.Started(ctx, 1, ran.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		var settled PipelineBilling
		db.Take(&settled, "pipeline_id = ?", 1)
		if !settled.StartedAt.Equal(ran) {
			t.Fatal("a settled bill's start moved")
		}
		f.checkLedger()
	})
}

// 100 pipelines of one account ask at the same moment; money covers 10 first windows.
func TestConcurrentStartsNeverOverdraw(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, DefaultConfig())
		ctx := context.Background()
		a := f.account()
		window := CostOf(16*300, Scale/2)
		if err := f.svc.Credit(ctx, a.ID, KindGrant, BookGrants, 10*window, "g", "ten windows"); err != nil {
			t.Fatal(err)
		}
		var started, refused atomic.Int64
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := int64(1); i <= 100; i++ {
			wg.Add(1)
			go func(id int64) {
				defer wg.Done()
				<-gate
				err := f.svc.Start(ctx, gpuRun(id, a.OrgID), f.clock.Now())
				switch {
				case err == nil:
					started.Add(1)
				case errors.Is(err, ErrInsufficientBalance):
					refused.Add(1)
				default:
					t.Error(err)
				}
			}(i)
		}
		close(gate)
		wg.Wait()
		if started.Load() != 10 || refused.Load() != 90 {
			t.Fatalf("started %d, refused %d; want exactly 10 of 100", started.Load(), refused.Load())
		}
		if got := f.reload(a); got.Balance != 0 || got.Frozen != 10*window {
			t.Fatalf("balance %s frozen %s", got.Balance, got.Frozen)
		}
		f.checkLedger()
	})
}
