package billing

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// setCap sets the account's monthly spending cap.
func (f *fixture) setCap(a *Account, limit Amount) {
	f.t.Helper()
	if err := f.db.Model(&Account{}).Where("id = ?", a.ID).Update("spending_cap", limit).Error; err != nil {
		f.t.Fatal(err)
	}
}

// overrun runs a GPU pipeline on an account that holds money for exactly two windows: the third
// cannot be frozen, the pipeline is told to stop and stops 7 s past its last covered window. It
// returns what the account paid (the two windows) and what was written off (those 7 s).
func (f *fixture) overrun(a *Account, id int64) (paid, writtenOff Amount) {
	f.t.Helper()
	ctx := context.Background()
	window := CostOf(16*300, Scale/2)
	f.grant(a, (2 * window).String())
	start := f.clock.Now()
	if err := f.svc.Start(ctx, gpuRun(id, a.OrgID), start); err != nil {
		f.t.Fatal(err)
	}
	f.clock.Set(start.Add(5 * time.Minute))
	if stop, err := f.svc.Tick(ctx); err != nil || len(stop) != 0 {
		f.t.Fatalf("second window: stop %v, %v", stop, err)
	}
	f.clock.Set(start.Add(10 * time.Minute))
	if stop, err := f.svc.Tick(ctx); err != nil || len(stop) != 1 || stop[0] != id {
		f.t.Fatalf("third window: stop %v, %v", stop, err)
	}
	if err := f.svc.Settle(ctx, id, start.Add(10*time.Minute+7*time.Second)); err != nil {
		f.t.Fatal(err)
	}
	return 2 * window, CostOf(16*607, Scale/2) - 2*window
}

// A terminated pipeline's overrun is written off, but it used to count as spent all the same:
// month_spent, usage, the pipeline's cost, the settle entry and the statement showed the full
// price, and the cap check added it up, refusing a pipeline that the money really paid plus one
// window left room for.
func TestWrittenOffOverrunIsNotSpent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, DefaultConfig())
		ctx := context.Background()
		a := f.account()
		paid, writtenOff := f.overrun(a, 1)
		if writtenOff <= 0 {
			t.Fatalf("the scenario must write something off: %s", writtenOff)
		}

		if spent, err := f.svc.MonthSpent(ctx, a.ID); err != nil || spent != paid {
			t.Errorf("month spent %s (%v), want what was paid: %s", spent, err, paid)
		}
		if sp, err := f.svc.MonthSpending(ctx, a.ID); err != nil || sp.Paid != paid || sp.WrittenOff != writtenOff {
			t.Errorf("month spending %+v (%v), want %s paid and %s written off", sp, err, paid, writtenOff)
		}
		var pb PipelineBilling
		db.Take(&pb, 1)
		if pb.Cost != paid || pb.WrittenOff() != writtenOff || pb.Uncovered() != 7*time.Second {
			t.Errorf("pipeline cost %s, written off %s, uncovered %s; want %s, %s and 7s", pb.Cost, pb.WrittenOff(), pb.Uncovered(), paid, writtenOff)
		}
		use, err := f.svc.PipelineUsage(ctx, map[int64]time.Time{1: f.clock.Now()})
		if err != nil || use[1].Cost != paid || use[1].CoreSeconds != 16*607 || use[1].WrittenOff != writtenOff || use[1].Uncovered != 7*time.Second {
			t.Errorf("pipeline usage %+v (%v), want cost %s and %s written off for 7s", use[1], err, paid, writtenOff)
		}
		var settle Txn
		db.Where("kind = ? AND pipeline_id = ?", KindSettle, 1).Take(&settle)
		if settle.Amount != paid {
			t.Errorf("settle entry amount %s, want what was paid: %s", settle.Amount, paid)
		}
		day := f.clock.Now().In(f.svc.cfg.Location).Format(time.DateOnly)
		rows, err := f.svc.Usage(ctx, a.ID, day, day)
		if err != nil || len(rows) != 1 || rows[0].Cost != paid || rows[0].WrittenOff != writtenOff {
			t.Errorf("usage %+v (%v), want cost %s and %s written off", rows, err, paid, writtenOff)
		}
		entries, err := f.svc.Ledger(ctx, a.ID, api.Page{Limit: 10})
		if err != nil || len(entries) == 0 || entries[0].Kind != KindSettle || entries[0].Amount != paid ||
			entries[0].BalanceChange+entries[0].FrozenChange != -paid {
			t.Fatalf("ledger %+v (%v), want the settle entry to show %s", entries, err, paid)
		}
		if e := entryJSON(&entries[0]); e.WrittenOff != writtenOff.String() || e.UncoveredMs == nil || *e.UncoveredMs != 7000 {
			t.Errorf("settle entry %+v, want %s written off for 7000 ms", e, writtenOff)
		}
		if e := entryJSON(&entries[1]); e.Kind != KindFreeze || e.WrittenOff != "0.00000000" || e.UncoveredMs != nil {
			t.Errorf("freeze entry %+v: nothing written off, no uncovered time", e)
		}
		var buf bytes.Buffer
		if err := f.svc.Statement(ctx, a, f.svc.Month(), &buf); err != nil {
			t.Fatal(err)
		}
		csvRows, _ := csv.NewReader(&buf).ReadAll()
		col := map[string]int{}
		for i, name := range csvRows[0] {
			col[name] = i
		}
		for _, row := range csvRows[1:] {
			if row[col["kind"]] == KindSettle && (row[col["amount"]] != paid.String() || row[col["written_off"]] != writtenOff.String()) {
				t.Errorf("statement's settle row %v, want amount %s and %s written off", row, paid, writtenOff)
			}
		}

		// Room for exactly one more window beside what was paid: the cap lets it start, and
		// refuses the window after it.
		window := CostOf(16*300, Scale/2)
		f.grant(a, "10")
		f.setCap(a, paid+window)
		if err := f.svc.CanStart(ctx, gpuRun(2, a.OrgID)); err != nil {
			t.Errorf("CanStart with room for one window: %v", err)
		}
		if err := f.svc.Start(ctx, gpuRun(2, a.OrgID), f.clock.Now()); err != nil {
			t.Fatalf("start with room for one window: %v", err)
		}
		if err := f.svc.Start(ctx, gpuRun(3, a.OrgID), f.clock.Now()); !errors.Is(err, ErrSpendingCap) {
			t.Fatalf("a window past the cap: %v", err)
		}
		f.checkLedger()
	})
}

// With a spending cap, dispatch used to compare the cap with the window's full price and ignore
// the free quota (the "why it waits" preview subtracted it): a 2-core CPU pipeline inside the
// free quota, which costs no money, was refused spending_cap_reached under a cap of 0.
func TestCapCountsTheFreeQuota(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		cfg := DefaultConfig()
		cfg.FreeCoreSeconds = 2*300 + 100 // one 2-core window and 100 core-seconds more
		f := newFixture(t, db, cfg)
		ctx := context.Background()
		a := f.account()
		f.setCap(a, 0)
		same := func(what string, r Run, want error) {
			t.Helper()
			if err := f.svc.CanStart(ctx, r); !errors.Is(err, want) {
				t.Errorf("%s: CanStart %v, want %v", what, err, want)
			}
			if err := f.svc.Start(ctx, r, f.clock.Now()); !errors.Is(err, want) {
				t.Errorf("%s: Start %v, want %v", what, err, want)
			}
		}
		same("a CPU window the free quota pays", cpuRun(1, a.OrgID, 2), nil)
		// 100 core-seconds of quota are left: 500 of the next window are money, over a cap of 0.
		same("a CPU window partly paid in money", cpuRun(2, a.OrgID, 2), ErrSpendingCap)
		same("a GPU window", gpuRun(3, a.OrgID), ErrSpendingCap)
		// A cap with room for exactly that money: both let it through (then the balance decides).
		f.grant(a, "1")
		f.setCap(a, CostOf(500, Scale/8))
		same("a CPU window whose money fits the cap", cpuRun(4, a.OrgID, 2), nil)
		f.checkLedger()
	})
}

// The next window used to be frozen only once the last one had run out, so a pipeline that
// could not be covered was found out at the boundary and ran into the unpaid window while the
// stop reached its agent. It is frozen a lead ahead (20 % of a window by default), so the stop
// goes out while the run is still paid for.
func TestNextWindowIsFrozenAheadOfTheBoundary(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, DefaultConfig())
		ctx := context.Background()
		a := f.account()
		window := CostOf(16*300, Scale/2)
		f.grant(a, (2 * window).String())
		start := f.clock.Now()
		if err := f.svc.Start(ctx, gpuRun(1, a.OrgID), start); err != nil {
			t.Fatal(err)
		}
		windows := func() (int, time.Time) {
			var pb PipelineBilling
			db.Take(&pb, 1)
			return pb.Windows, pb.FrozenUntil
		}
		f.clock.Set(start.Add(4*time.Minute - time.Second))
		if stop, err := f.svc.Tick(ctx); err != nil || len(stop) != 0 {
			t.Fatalf("before the lead: stop %v, %v", stop, err)
		}
		if n, _ := windows(); n != 1 {
			t.Fatalf("%d windows frozen before the lead, want 1", n)
		}
		// One minute before the first window ends, the second is frozen.
		f.clock.Set(start.Add(4 * time.Minute))
		if stop, err := f.svc.Tick(ctx); err != nil || len(stop) != 0 {
			t.Fatalf("at the lead: stop %v, %v", stop, err)
		}
		if n, until := windows(); n != 2 || !until.Equal(start.Add(10*time.Minute)) {
			t.Fatalf("at the lead: %d windows until %s, want 2 until %s", n, until, start.Add(10*time.Minute))
		}
		// The money is gone: the third window fails a minute before the second ends, and the
		// pipeline is told to stop while it is still covered.
		f.clock.Set(start.Add(9 * time.Minute))
		stop, err := f.svc.Tick(ctx)
		if err != nil || len(stop) != 1 || stop[0] != 1 {
			t.Fatalf("the third window at its lead: stop %v, %v", stop, err)
		}
		end := start.Add(9*time.Minute + time.Second)
		if err := f.svc.Settle(ctx, 1, end); err != nil {
			t.Fatal(err)
		}
		var pb PipelineBilling
		db.Take(&pb, 1)
		var writeoff int64
		db.Raw("SELECT COALESCE(SUM(amount), 0) FROM ledger_postings WHERE book = ?", BookWriteoff).Scan(&writeoff)
		if pb.Cost != CostOf(16*541, Scale/2) || writeoff != 0 {
			t.Fatalf("cost %s, written off %s: a run stopped inside its windows is paid in full", pb.Cost, Amount(-writeoff))
		}
		if got := f.reload(a); got.Balance != 2*window-pb.Cost || got.Frozen != 0 {
			t.Fatalf("balance %s frozen %s", got.Balance, got.Frozen)
		}
		f.checkLedger()
	})
}

// The lead is configuration: half a window freezes the next one 2.5 minutes ahead; none freezes
// it at the boundary.
func TestFreezeLeadIsConfigurable(t *testing.T) {
	for _, c := range []struct {
		percent int
		at      time.Duration
	}{{50, 150 * time.Second}, {0, 5 * time.Minute}} {
		cfg := DefaultConfig()
		cfg.FreezeLeadPercent = c.percent
		f := newFixture(t, storetest.SQLite(t), cfg)
		ctx := context.Background()
		a := f.account()
		f.grant(a, "10")
		start := f.clock.Now()
		if err := f.svc.Start(ctx, gpuRun(1, a.OrgID), start); err != nil {
			t.Fatal(err)
		}
		for _, step := range []struct {
			at      time.Duration
			windows int
		}{{c.at - time.Second, 1}, {c.at, 2}, {c.at + 5*time.Minute - time.Second, 2}, {c.at + 5*time.Minute, 3}} {
			f.clock.Set(start.Add(step.at))
			if _, err := f.svc.Tick(ctx); err != nil {
				t.Fatal(err)
			}
			var pb PipelineBilling
			f.db.Take(&pb, 1)
			if pb.Windows != step.windows {
				t.Errorf("lead %d%%, %s after the start: %d windows, want %d", c.percent, step.at, pb.Windows, step.windows)
			}
		}
		f.checkLedger()
	}
}
