package billing

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// Property: whatever sequence of starts (builds and workspaces), ticks, finishes, agent losses,
// top-ups, refunds, duplicate webhooks and spending-cap changes happens, the ledger balances, the
// cached balances equal it, no account goes negative, each pipeline is settled at most once, and
// neither bucket's free quota is ever exceeded. Dispatch (Start) and its preview (CanStart) always give the same answer, and
// every settled pipeline's paid cost and write-off add up to its price and agree with the ledger
// and the month's spending, in total and by bucket.
func TestLedgerInvariantsProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := DefaultConfig()
		cfg.FreeCoreSeconds = rapid.Int64Range(0, 20000).Draw(rt, "free core-seconds")
		cfg.FreeWorkspaceCoreSeconds = rapid.Int64Range(0, 40000).Draw(rt, "free workspace core-seconds")
		f := newFixture(t, storetest.SQLite(t), cfg)
		ctx := context.Background()
		accounts := []*Account{f.account(), f.account()}
		var running []int64 // started, not settled
		settled := map[int64]bool{}
		var topups []string
		next := int64(1)
		steps := rapid.IntRange(1, 40).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			a := accounts[rapid.IntRange(0, 1).Draw(rt, "account")]
			switch op := rapid.IntRange(0, 7).Draw(rt, "op"); op {
			case 0: // a pipeline is dispatched
				r := cpuRun(next, a.OrgID, rapid.IntRange(1, 64).Draw(rt, "cores"))
				if rapid.Bool().Draw(rt, "gpu") {
					r = gpuRun(next, a.OrgID)
				}
				r.Workspace = rapid.Bool().Draw(rt, "workspace")
				preview := f.svc.CanStart(ctx, r)
				err := f.svc.Start(ctx, r, f.clock.Now())
				if class(err) != class(preview) {
					rt.Fatalf("start says %v, its preview %v", err, preview)
				}
				if err == nil {
					running = append(running, next)
				} else if !errors.Is(err, ErrInsufficientBalance) && !errors.Is(err, ErrSpendingCap) {
					rt.Fatalf("start: %v", err)
				}
				next++
			case 1: // time passes and the tick runs; stopped pipelines end a few seconds later
				f.clock.Advance(time.Duration(rapid.IntRange(0, 400).Draw(rt, "seconds")) * time.Second)
				stop, err := f.svc.Tick(ctx)
				if err != nil {
					rt.Fatalf("tick: %v", err)
				}
				for _, id := range stop {
					if err := f.svc.Settle(ctx, id, f.clock.Now().Add(3*time.Second)); err != nil {
						rt.Fatal(err)
					}
					settled[id] = true
				}
			case 2, 3: // a pipeline finishes, or its agent is lost (settled at the lease expiry)
				if len(running) == 0 {
					continue
				}
				k := rapid.IntRange(0, len(running)-1).Draw(rt, "which")
				id := running[k]
				end := f.clock.Now()
				if op == 3 {
					end = end.Add(30 * time.Second)
				}
				if err := f.svc.Settle(ctx, id, end); err != nil {
					rt.Fatal(err)
				}
				if rapid.Bool().Draw(rt, "settle twice") {
					f.svc.Settle(ctx, id, end.Add(time.Minute))
				}
				settled[id] = true
				running = append(running[:k], running[k+1:]...)
			case 4: // a top-up webhook, sometimes delivered twice
				amt := Amount(rapid.Int64Range(1, 20*Scale).Draw(rt, "top-up"))
				key := fmt.Sprintf("stripe:session:%d", len(topups))
				if len(topups) > 0 && rapid.Bool().Draw(rt, "duplicate") {
					key = topups[rapid.IntRange(0, len(topups)-1).Draw(rt, "which top-up")]
				} else {
					topups = append(topups, key)
				}
				if err := f.svc.Credit(ctx, a.ID, KindTopup, BookStripe, amt, key, ""); err != nil && !errors.Is(err, ErrDuplicate) {
					rt.Fatal(err)
				}
			case 5: // a refund
				amt := Amount(rapid.Int64Range(1, 10*Scale).Draw(rt, "refund"))
				if err := f.svc.Refund(ctx, a.ID, amt, fmt.Sprintf("stripe:refund:%d", i), ""); err != nil {
					rt.Fatal(err)
				}
			case 6: // an admin grant
				if err := f.svc.Credit(ctx, a.ID, KindGrant, BookGrants, Amount(rapid.Int64Range(1, 5*Scale).Draw(rt, "grant")),
					fmt.Sprintf("grant:%d", i), ""); err != nil {
					rt.Fatal(err)
				}
			case 7: // the team sets a spending cap (0 included) or clears it
				var limit *Amount
				if rapid.Bool().Draw(rt, "cap") {
					v := Amount(rapid.Int64Range(0, 5*Scale).Draw(rt, "cap amount"))
					limit = &v
				}
				if _, err := f.svc.ChangeSettings(ctx, a.ID, Settings{SpendingCap: &limit}); err != nil {
					rt.Fatal(err)
				}
			}
			f.checkLedger()
			f.checkSettlements(rt, accounts)
			var twice int64
			f.db.Raw("SELECT COUNT(*) FROM (SELECT pipeline_id FROM ledger_txns WHERE kind = ? GROUP BY pipeline_id HAVING COUNT(*) > 1) d", KindSettle).Scan(&twice)
			if twice != 0 {
				rt.Fatalf("%d pipelines settled more than once", twice)
			}
		}
	})
}

// class is the billing reason of err: nil, ErrSpendingCap, ErrInsufficientBalance or err itself.
func class(err error) error {
	for _, c := range []error{ErrSpendingCap, ErrInsufficientBalance} {
		if errors.Is(err, c) {
			return c
		}
	}
	return err
}

// checkSettlements asserts that each settled pipeline's cost (what was paid) and write-off add
// up to its price, that its settle transaction moved the paid amount and wrote the write-off off,
// and that the accounts' month spending adds them up.
func (f *fixture) checkSettlements(rt *rapid.T, accounts []*Account) {
	var pbs []PipelineBilling
	f.db.Where("settled = ?", true).Find(&pbs)
	paid, writtenOff := map[int64]Amount{}, map[int64]Amount{}
	type inBucket struct {
		account int64
		bucket  Bucket
	}
	bucketPaid, bucketWrittenOff := map[inBucket]Amount{}, map[inBucket]Amount{}
	for _, pb := range pbs {
		if pb.Cost+pb.WrittenOff() != CostOf(pb.CoreSeconds-pb.QuotaCoreSeconds, pb.Price) || pb.Cost < 0 {
			rt.Fatalf("pipeline %d: paid %s + written off %s is not its price", pb.PipelineID, pb.Cost, pb.WrittenOff())
		}
		var t Txn
		if err := f.db.Where("kind = ? AND pipeline_id = ?", KindSettle, pb.PipelineID).Take(&t).Error; err != nil {
			if pb.Cost == 0 && pb.WrittenOff() == 0 && pb.FrozenAmount == 0 {
				continue // the free quota paid it all: no money moved
			}
			rt.Fatalf("pipeline %d: no settle transaction: %v", pb.PipelineID, err)
		}
		var w int64
		f.db.Raw("SELECT COALESCE(-SUM(amount), 0) FROM ledger_postings WHERE txn_id = ? AND book = ?", t.ID, BookWriteoff).Scan(&w)
		if t.Amount != pb.Cost || Amount(w) != pb.WrittenOff() {
			rt.Fatalf("pipeline %d: settle moved %s and wrote off %s; the pipeline paid %s, %s written off", pb.PipelineID, t.Amount, Amount(w), pb.Cost, pb.WrittenOff())
		}
		paid[pb.AccountID] += pb.Cost
		writtenOff[pb.AccountID] += pb.WrittenOff()
		bucketPaid[inBucket{pb.AccountID, pb.Bucket}] += pb.Cost
		bucketWrittenOff[inBucket{pb.AccountID, pb.Bucket}] += pb.WrittenOff()
	}
	for _, a := range accounts {
		sp, err := f.svc.MonthSpending(context.Background(), a.ID)
		if err != nil || sp.Paid != paid[a.ID] || sp.WrittenOff != writtenOff[a.ID] {
			rt.Fatalf("account %d: month spending %+v (%v), its pipelines paid %s, %s written off", a.ID, sp, err, paid[a.ID], writtenOff[a.ID])
		}
		byBucket, err := f.svc.MonthSpendingByBucket(context.Background(), a.ID)
		if err != nil || len(byBucket) != len(Buckets) {
			rt.Fatalf("account %d: spending by bucket %+v (%v)", a.ID, byBucket, err)
		}
		for b, sp := range byBucket {
			k := inBucket{a.ID, b}
			if sp.Paid != bucketPaid[k] || sp.WrittenOff != bucketWrittenOff[k] {
				rt.Fatalf("account %d: %s spending %+v, its %s pipelines paid %s, %s written off", a.ID, b, sp, b, bucketPaid[k], bucketWrittenOff[k])
			}
		}
	}
}
