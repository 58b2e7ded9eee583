package billing

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/store"
)

// Config holds prices, the free quotas and the freeze interval. All of it is configuration.
type Config struct {
	Currency string
	// Prices per core-hour by runner class (canonical tag). A class without a price is free.
	Prices map[string]Amount
	// QuotaClasses are the classes the monthly free quotas pay for (the CPU classes), in both
	// buckets.
	QuotaClasses map[string]bool
	// FreeCoreSeconds is the builds' monthly free quota (160 core-hours = 576 000 core-seconds).
	FreeCoreSeconds int64
	// FreeWorkspaceCoreSeconds is the workspaces' monthly free quota, a bucket of its own (1 600
	// core-hours = 5 760 000 core-seconds).
	FreeWorkspaceCoreSeconds int64
	// FreezeInterval is the window frozen ahead (5 minutes).
	FreezeInterval time.Duration
	// FreezeLeadPercent is how early the next window is frozen, in percent of FreezeInterval:
	// 20 freezes it a minute before a 5-minute window runs out, so a pipeline its account
	// cannot cover any more is known, and its stop delivered, while it still runs on paid time.
	// 0 freezes at the boundary; values are kept within 0–99.
	FreezeLeadPercent int
	// Location decides calendar months (Asia/Shanghai).
	Location *time.Location
	// EndedAt says when each of the pipelines ids that has ended ended
	// (build.Service.PipelinesEndedAt): billing may not read build's tables, and cannot import
	// build, which imports billing, so app.New hands it in. SettleEnded needs it.
	EndedAt func(ctx context.Context, ids []int64) (map[int64]time.Time, error)
	// Stop asks the agent of a running pipeline the account can no longer cover to stop it,
	// with reason insufficient_balance (build.Service.RequestStop, handed in by app.New for the
	// same reason as EndedAt). TickOnce calls it; nil stops nothing.
	Stop func(ctx context.Context, pipelineID int64) error
	// Builds names the build of each of the pipelines ids whose repo still exists
	// (build.Service.PipelineBuilds, handed in by app.New for the same reason as EndedAt), in
	// one call: the ledger links its entries to their build pages by it. nil links none.
	Builds func(ctx context.Context, ids []int64) (map[int64]BuildRef, error)
}

// BuildRef names a pipeline's build: what the link to its page needs
// (/{org}/{repo}/builds/{number}?pipeline={id}).
type BuildRef struct {
	Repo   string // "org/name"
	Number int64
}

// DefaultConfig is Part A's pricing: CPU 0.125 per core-hour after 160 free core-hours a month
// for builds and 1 600 for workspaces, GPU 0.5 per core-hour with no free quota.
func DefaultConfig() Config {
	cpu, gpu := Amount(Scale/8), Amount(Scale/2)
	return Config{
		Currency: DefaultCurrency,
		Prices: map[string]Amount{
			"cnb:arch:amd64": cpu, "cnb:arch:arm64:v8": cpu, "cnb:arch:amd64:containerd-snapshotter": cpu,
			"cnb:arch:amd64:gpu": gpu, "cnb:arch:amd64:gpu:L40": gpu, "cnb:arch:amd64:gpu:H20": gpu, "cnb:arch:amd64:gpu:L20": gpu,
		},
		QuotaClasses: map[string]bool{"cnb:arch:amd64": true, "cnb:arch:arm64:v8": true,
			"cnb:arch:amd64:containerd-snapshotter": true},
		FreeCoreSeconds:          160 * 3600,
		FreeWorkspaceCoreSeconds: 1600 * 3600,
		FreezeInterval:           5 * time.Minute,
		FreezeLeadPercent:        20,
		Location:                 time.FixedZone("UTC+8", 8*3600),
	}
}

// Service moves money.
type Service struct {
	db    *gorm.DB
	clock clock.Clock
	log   *slog.Logger
	cfg   Config
}

// NewService returns the billing service.
func NewService(db *gorm.DB, clk clock.Clock, log *slog.Logger, cfg Config) *Service {
	if cfg.FreezeInterval <= 0 {
		cfg.FreezeInterval = 5 * time.Minute
	}
	if cfg.Location == nil {
		cfg.Location = time.FixedZone("UTC+8", 8*3600)
	}
	if cfg.Currency == "" {
		cfg.Currency = DefaultCurrency
	}
	cfg.FreezeLeadPercent = min(max(cfg.FreezeLeadPercent, 0), 99)
	return &Service{db: db, clock: clk, log: log, cfg: cfg}
}

// Config returns the service's configuration.
func (s *Service) Config() Config { return s.cfg }

// FreeQuota is the monthly free CPU quota of bucket b, in core-seconds.
func (c Config) FreeQuota(b Bucket) int64 {
	if b == BucketWorkspace {
		return c.FreeWorkspaceCoreSeconds
	}
	return c.FreeCoreSeconds
}

// Run is what billing needs to know about a pipeline.
type Run struct {
	PipelineID int64
	OrgID      int64
	RepoID     int64
	Class      string
	Cores      int
	// Workspace puts the pipeline in the workspaces' bucket (build.Pipeline.Workspace): their
	// own free CPU quota; everything else is billed as for builds.
	Workspace bool
}

// Reasons a pipeline is refused or stopped by billing.
var (
	ErrInsufficientBalance = errors.New("insufficient_balance")
	ErrSpendingCap         = errors.New("spending_cap_reached")
)

// month is the calendar month of t in the billing time zone.
func (s *Service) month(t time.Time) string { return t.In(s.cfg.Location).Format("2006-01") }

// monthStart is the first instant of t's calendar month, in UTC.
func (s *Service) monthStart(t time.Time) time.Time {
	l := t.In(s.cfg.Location)
	return time.Date(l.Year(), l.Month(), 1, 0, 0, 0, 0, s.cfg.Location).UTC()
}

func (s *Service) windowSeconds() int64 { return int64(math.Ceil(s.cfg.FreezeInterval.Seconds())) }

// lead is how long before a pipeline's frozen time runs out its next window is frozen.
func (s *Service) lead() time.Duration {
	return s.cfg.FreezeInterval * time.Duration(s.cfg.FreezeLeadPercent) / 100
}

// AccountOf returns the org's account.
func (s *Service) AccountOf(ctx context.Context, orgID int64) (*Account, error) {
	var a Account
	if err := s.db.WithContext(ctx).Where("org_id = ?", orgID).Take(&a).Error; err != nil {
		return nil, fmt.Errorf("billing: account of org %d: %w", orgID, err)
	}
	return &a, nil
}

// lockAccount serialises the money moves of one account (PostgreSQL advisory lock; SQLite runs
// one writer at a time anyway) and returns its current row.
func lockAccount(tx *gorm.DB, id int64) (*Account, error) {
	if err := store.Lock(tx, fmt.Sprintf("billing:account:%d", id)); err != nil {
		return nil, err
	}
	var a Account
	if err := tx.Take(&a, id).Error; err != nil {
		return nil, err
	}
	return &a, nil
}

// quotaKey names one bucket's free quota in one month.
type quotaKey struct {
	bucket Bucket
	month  string
}

// quotaOf is the free quota pb draws on.
func quotaOf(pb *PipelineBilling) quotaKey { return quotaKey{pb.Bucket, pb.QuotaMonth} }

// quotaRow selects the account's row of the quota k.
func quotaRow(db *gorm.DB, accountID int64, k quotaKey) *gorm.DB {
	return db.Model(&QuotaUsage{}).Where("account_id = ? AND month = ? AND bucket = ?", accountID, k.month, k.bucket)
}

// quotaLeft returns the free core-seconds the account has left of the quota k, creating the row.
func (s *Service) quotaLeft(tx *gorm.DB, accountID int64, k quotaKey) (int64, error) {
	q := QuotaUsage{AccountID: accountID, Month: k.month, Bucket: k.bucket}
	if err := tx.Where(QuotaUsage{AccountID: accountID, Month: k.month, Bucket: k.bucket}).FirstOrCreate(&q).Error; err != nil {
		return 0, err
	}
	return max(0, s.cfg.FreeQuota(k.bucket)-q.UsedCoreSeconds-q.FrozenCoreSeconds), nil
}

// quotaLeftNow is quotaLeft without creating the row: for reading only.
func (s *Service) quotaLeftNow(db *gorm.DB, accountID int64, k quotaKey) (int64, error) {
	var q QuotaUsage
	err := quotaRow(db, accountID, k).Take(&q).Error
	if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		return 0, err
	}
	return max(0, s.cfg.FreeQuota(k.bucket)-q.UsedCoreSeconds-q.FrozenCoreSeconds), nil
}

// window is what freezing one more window of pb takes: core-seconds of free quota (from left)
// and money. ok is false when balance cannot pay the money.
func (s *Service) window(pb *PipelineBilling, left int64, balance Amount) (fromQuota int64, money Amount, ok bool) {
	need := int64(pb.Cores) * s.windowSeconds()
	if pb.QuotaMonth != "" {
		fromQuota = min(need, left)
	}
	money = CostOf(need-fromQuota, pb.Price)
	return fromQuota, money, money <= balance
}

// advance records one frozen window on pb.
func (s *Service) advance(pb *PipelineBilling, fromQuota int64, money Amount) {
	pb.Windows++
	pb.FrozenQuota += fromQuota
	pb.FrozenAmount += money
	pb.FrozenUntil = pb.FrozenUntil.Add(s.cfg.FreezeInterval)
}

func freezeTxn(accountID int64, pb *PipelineBilling, money Amount) *Txn {
	pid := pb.PipelineID
	return &Txn{AccountID: accountID, Kind: KindFreeze, IdempotencyKey: fmt.Sprintf("freeze:%d:%d", pb.PipelineID, pb.Windows+1),
		PipelineID: &pid, Amount: money, Note: fmt.Sprintf("window %d of pipeline %d", pb.Windows+1, pb.PipelineID)}
}

// admit is the one rule that decides whether the next window of pb may be charged to account a
// at `at` — Start (dispatch) and CanStart (the queue's "why it waits") both ask it. The free
// quota of pb's bucket pays first (quota classes); the rest is the window's money, whichever the
// bucket: the cap counts builds and workspaces together. Under a spending cap, what
// the account paid this month (settled cost less what was written off: see spentSince), the
// money frozen for its running pipelines and the window's money must stay within the cap; a
// window that costs no money never passes a cap. Then the balance must hold the money. It
// returns the window's split, or ErrSpendingCap or ErrInsufficientBalance; it writes nothing.
func (s *Service) admit(db *gorm.DB, a *Account, pb *PipelineBilling, at time.Time) (fromQuota int64, money Amount, err error) {
	var left int64
	if pb.QuotaMonth != "" {
		if left, err = s.quotaLeftNow(db, a.ID, quotaOf(pb)); err != nil {
			return 0, 0, err
		}
	}
	fromQuota, money, covered := s.window(pb, left, a.Balance)
	if a.SpendingCap != nil && money > 0 {
		spent, err := s.spentSince(db, a.ID, s.monthStart(at))
		if err != nil {
			return 0, 0, err
		}
		if spent.Paid+a.Frozen+money > *a.SpendingCap {
			return 0, 0, fmt.Errorf("%w: %s paid this month and %s frozen, its first %s window's %s would pass the cap of %s %s",
				ErrSpendingCap, spent.Paid.Display(), a.Frozen.Display(), s.cfg.FreezeInterval, money.Display(), a.SpendingCap.Display(), a.Currency)
		}
	}
	if !covered {
		return 0, 0, fmt.Errorf("%w: its first %s window costs %s %s, the balance is %s %s", ErrInsufficientBalance,
			s.cfg.FreezeInterval, money.Display(), a.Currency, a.Balance.Display(), a.Currency)
	}
	return fromQuota, money, nil
}

// hold freezes one window of pb that admit let through (fromQuota core-seconds of free quota and
// money), writing the quota and the ledger; the caller saves pb.
func (s *Service) hold(tx *gorm.DB, a *Account, pb *PipelineBilling, fromQuota int64, money Amount, now time.Time) error {
	if fromQuota > 0 {
		if _, err := s.quotaLeft(tx, a.ID, quotaOf(pb)); err != nil { // creates the month's row
			return err
		}
		if err := quotaRow(tx, a.ID, quotaOf(pb)).
			Update("frozen_core_seconds", gorm.Expr("frozen_core_seconds + ?", fromQuota)).Error; err != nil {
			return err
		}
	}
	if money > 0 {
		err := post(tx, freezeTxn(a.ID, pb, money), []leg{{a.ID, BookAvailable, -money}, {a.ID, BookFrozen, money}}, now)
		if err != nil && !errors.Is(err, ErrDuplicate) {
			return err
		}
		a.Balance -= money
		a.Frozen += money
	}
	s.advance(pb, fromQuota, money)
	return nil
}

// newBilling is the billing record a pipeline starts with at `at`, nothing frozen yet: in its
// bucket, at its class's price, drawing on the bucket's free quota if the class is a CPU one.
func (s *Service) newBilling(accountID int64, r Run, at time.Time) *PipelineBilling {
	pb := &PipelineBilling{PipelineID: r.PipelineID, AccountID: accountID, RepoID: r.RepoID, Class: r.Class, Bucket: BucketOf(r.Workspace),
		Cores: r.Cores, Price: s.cfg.Prices[r.Class], StartedAt: at, FrozenUntil: at}
	if s.cfg.QuotaClasses[r.Class] {
		pb.QuotaMonth = s.month(at)
	}
	return pb
}

// Start freezes a pipeline's first window when it is dispatched. It returns
// ErrInsufficientBalance or ErrSpendingCap (wrapped, with the figures) when the pipeline must
// not start (admit decides); then nothing is held. Starting a pipeline twice is harmless.
func (s *Service) Start(ctx context.Context, r Run, at time.Time) error {
	acct, err := s.AccountOf(ctx, r.OrgID)
	if err != nil {
		return err
	}
	err = store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		a, err := lockAccount(tx, acct.ID)
		if err != nil {
			return err
		}
		var n int64
		if err := tx.Model(&PipelineBilling{}).Where("pipeline_id = ?", r.PipelineID).Count(&n).Error; err != nil || n > 0 {
			return err
		}
		pb := s.newBilling(a.ID, r, at)
		fromQuota, money, err := s.admit(tx, a, pb, at)
		if err != nil {
			return err
		}
		if err := s.hold(tx, a, pb, fromQuota, money, at); err != nil {
			return err
		}
		if err := tx.Create(pb).Error; err != nil {
			return err
		}
		return s.alerts(tx, a, at)
	})
	return err
}

// Started moves the start of a pipeline's bill to at, when it began to run later than it was
// dispatched (a Kubernetes pod that waited for capacity: protocol.Event.Waited): its run time
// counts from at, and what was frozen at dispatch covers the same span from there. A settled
// bill, or one that starts at or after at already, is left as it is.
func (s *Service) Started(ctx context.Context, pipelineID int64, at time.Time) error {
	// Fenced on the row as read: the tick may freeze a window in between; then read again.
	for range 3 {
		var pb PipelineBilling
		err := s.db.WithContext(ctx).Where("pipeline_id = ? AND NOT settled", pipelineID).Take(&pb).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		shift := at.Sub(pb.StartedAt)
		if shift <= 0 {
			return nil
		}
		res := s.db.WithContext(ctx).Model(&PipelineBilling{}).
			Where("pipeline_id = ? AND NOT settled AND started_at = ? AND frozen_until = ?", pipelineID, pb.StartedAt, pb.FrozenUntil).
			Updates(map[string]any{"started_at": at, "frozen_until": pb.FrozenUntil.Add(shift)})
		if res.Error != nil || res.RowsAffected == 1 {
			return res.Error
		}
	}
	return fmt.Errorf("billing: pipeline %d's bill kept changing while its start was moved", pipelineID)
}

// Spending is what an account's settled pipelines took in a period: Paid is the money that came
// out of its balance and its freezes, WrittenOff what their price exceeded that by (seconds a
// terminated pipeline ran past its last covered window, which the platform absorbed).
type Spending struct {
	Paid, WrittenOff Amount
}

// spentSince reads the account's spending since t from the ledger's settle transactions: what
// a settlement paid is what it took from the account's two books (its postings on the account
// sum to minus that), what it wrote off its posting to the writeoff book. Builds and workspaces
// alike: it is what the spending cap counts.
func (s *Service) spentSince(db *gorm.DB, accountID int64, t time.Time) (Spending, error) {
	var out struct{ Paid, WrittenOff int64 }
	err := settledSince(db, accountID, t).Select(settledSums, BookWriteoff).Scan(&out).Error
	return Spending{Paid: Amount(out.Paid), WrittenOff: Amount(out.WrittenOff)}, err
}

// spentSinceByBucket is spentSince split by the buckets of the settled pipelines (a bucket with
// no settlement is absent).
func (s *Service) spentSinceByBucket(db *gorm.DB, accountID int64, t time.Time) (map[Bucket]Spending, error) {
	var rows []struct {
		Bucket           Bucket
		Paid, WrittenOff int64
	}
	err := settledSince(db, accountID, t).Select("pipeline_billing.bucket AS bucket, "+settledSums, BookWriteoff).
		Joins("JOIN pipeline_billing ON pipeline_billing.pipeline_id = ledger_txns.pipeline_id").
		Group("pipeline_billing.bucket").Scan(&rows).Error
	out := make(map[Bucket]Spending, len(rows))
	for _, r := range rows {
		out[r.Bucket] = Spending{Paid: Amount(r.Paid), WrittenOff: Amount(r.WrittenOff)}
	}
	return out, err
}

// settledSums adds up what settle transactions paid (their postings on the account's books) and
// wrote off (their posting to the writeoff book, the one parameter).
const settledSums = "COALESCE(-SUM(CASE WHEN ledger_postings.account_id = ledger_txns.account_id THEN ledger_postings.amount ELSE 0 END), 0) AS paid, " +
	"COALESCE(-SUM(CASE WHEN ledger_postings.book = ? THEN ledger_postings.amount ELSE 0 END), 0) AS written_off"

// settledSince selects the postings of the account's settle transactions since t.
func settledSince(db *gorm.DB, accountID int64, t time.Time) *gorm.DB {
	return db.Table("ledger_txns").
		Joins("JOIN ledger_postings ON ledger_postings.txn_id = ledger_txns.id").
		Where("ledger_txns.account_id = ? AND ledger_txns.kind = ? AND ledger_txns.created_at >= ?", accountID, KindSettle, t)
}

// Tick freezes the next window of every running pipeline whose frozen time runs out within the
// lead (FreezeLeadPercent of a window) and returns the pipelines that could not be covered: they
// must be terminated, and are told so while they still run on frozen time. A pipeline stays on
// the list at every tick until it is settled.
//
// It works one account at a time, in one transaction per account, computing in memory under the
// account's lock and writing in batches: ten thousand running pipelines are a hundred-odd
// transactions of a few statements each, not tens of thousands of statements.
func (s *Service) Tick(ctx context.Context) ([]int64, error) {
	now := s.clock.Now().UTC()
	var due []PipelineBilling
	if err := s.db.WithContext(ctx).Where("settled = ? AND frozen_until <= ?", false, now.Add(s.lead())).
		Order("account_id, started_at, pipeline_id").Find(&due).Error; err != nil {
		return nil, fmt.Errorf("billing: tick: %w", err)
	}
	var terminate []int64
	for start := 0; start < len(due); {
		end := start
		for end < len(due) && due[end].AccountID == due[start].AccountID {
			end++
		}
		group := due[start:end]
		start = end
		var stop []int64
		err := store.Tx(ctx, s.db, func(tx *gorm.DB) error {
			var err error
			stop, err = s.tickAccount(tx, group, now)
			return err
		})
		if err != nil {
			return terminate, err
		}
		terminate = append(terminate, stop...)
	}
	return terminate, nil
}

// tickAccount freezes the due windows of one account's pipelines inside tx. The spending cap is
// not asked here: it decides which pipelines start (admit), not which keep running.
func (s *Service) tickAccount(tx *gorm.DB, group []PipelineBilling, now time.Time) ([]int64, error) {
	a, err := lockAccount(tx, group[0].AccountID)
	if err != nil {
		return nil, err
	}
	quotaLeft := map[quotaKey]int64{}
	quotaFrozen := map[quotaKey]int64{}
	var stop []int64
	var txns []Txn
	var changed []*PipelineBilling
	startBalance, startFrozen := a.Balance, a.Frozen
	horizon := now.Add(s.lead())
	for i := range group {
		pb := &group[i]
		moved := false
		for !pb.FrozenUntil.After(horizon) {
			k := quotaOf(pb)
			left, ok := quotaLeft[k]
			if pb.QuotaMonth != "" && !ok {
				if left, err = s.quotaLeft(tx, a.ID, k); err != nil {
					return nil, err
				}
				quotaLeft[k] = left
			}
			fromQuota, money, covered := s.window(pb, left, a.Balance)
			if !covered {
				stop = append(stop, pb.PipelineID)
				break
			}
			if fromQuota > 0 {
				quotaLeft[k] -= fromQuota
				quotaFrozen[k] += fromQuota
			}
			if money > 0 {
				t := freezeTxn(a.ID, pb, money)
				t.CreatedAt = now
				txns = append(txns, *t)
				a.Balance -= money
				a.Frozen += money
			}
			s.advance(pb, fromQuota, money)
			moved = true
		}
		if moved {
			changed = append(changed, pb)
		}
	}
	for k, n := range quotaFrozen {
		if err := quotaRow(tx, a.ID, k).
			Update("frozen_core_seconds", gorm.Expr("frozen_core_seconds + ?", n)).Error; err != nil {
			return nil, err
		}
	}
	if len(txns) > 0 {
		if err := tx.CreateInBatches(&txns, 500).Error; err != nil {
			return nil, err
		}
		postings := make([]Posting, 0, 2*len(txns))
		for _, t := range txns {
			id := a.ID
			postings = append(postings, Posting{TxnID: t.ID, AccountID: &id, Book: BookAvailable, Amount: -t.Amount},
				Posting{TxnID: t.ID, AccountID: &id, Book: BookFrozen, Amount: t.Amount})
		}
		if err := tx.CreateInBatches(&postings, 1000).Error; err != nil {
			return nil, err
		}
		if err := tx.Model(&Account{}).Where("id = ?", a.ID).Updates(map[string]any{
			"balance": gorm.Expr("balance + ?", a.Balance-startBalance),
			"frozen":  gorm.Expr("frozen + ?", a.Frozen-startFrozen),
		}).Error; err != nil {
			return nil, err
		}
	}
	if err := saveWindows(tx, changed); err != nil {
		return nil, err
	}
	return stop, s.alerts(tx, a, now)
}

// saveWindows writes the new freeze state of pipelines: one statement on PostgreSQL (arrays
// unnested into a join), one per pipeline on SQLite, which runs in-process.
func saveWindows(tx *gorm.DB, pbs []*PipelineBilling) error {
	if len(pbs) == 0 {
		return nil
	}
	if store.Dialect(tx) == store.Postgres {
		ids, windows, quota, amount, until := make([]int64, len(pbs)), make([]int64, len(pbs)), make([]int64, len(pbs)), make([]int64, len(pbs)), make([]time.Time, len(pbs))
		for i, pb := range pbs {
			ids[i], windows[i], quota[i], amount[i], until[i] = pb.PipelineID, int64(pb.Windows), pb.FrozenQuota, int64(pb.FrozenAmount), pb.FrozenUntil
		}
		return tx.Exec(`UPDATE pipeline_billing AS pb SET windows = v.windows, frozen_quota = v.quota, frozen_amount = v.amount, frozen_until = v.until
FROM (SELECT unnest(?::bigint[]) AS id, unnest(?::bigint[]) AS windows, unnest(?::bigint[]) AS quota,
             unnest(?::bigint[]) AS amount, unnest(?::timestamptz[]) AS until) AS v
WHERE pb.pipeline_id = v.id AND NOT pb.settled`, intArray(ids), intArray(windows), intArray(quota), intArray(amount), timeArray(until)).Error
	}
	for _, pb := range pbs {
		if err := tx.Model(&PipelineBilling{}).Where("pipeline_id = ? AND settled = ?", pb.PipelineID, false).Updates(map[string]any{
			"windows": pb.Windows, "frozen_quota": pb.FrozenQuota, "frozen_amount": pb.FrozenAmount, "frozen_until": pb.FrozenUntil,
		}).Error; err != nil {
			return err
		}
	}
	return nil
}

// Settle charges a pipeline's real run time, once: cores × the seconds from its start to end,
// rounded up to the second. Its bucket's free quota pays first (for quota classes), then the
// frozen money, then the balance; what the balance cannot pay (a terminated pipeline that ran
// past its last covered window) is written off, so an account never goes below zero. The unused
// freeze is released. The pipeline's Cost and the settle transaction's Amount are what the account paid;
// the write-off is the settle transaction's posting to the writeoff book (WrittenOff, Uncovered).
// Settling twice changes nothing.
func (s *Service) Settle(ctx context.Context, pipelineID int64, end time.Time) error {
	return store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		var pb PipelineBilling
		if err := tx.Where("pipeline_id = ?", pipelineID).Take(&pb).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return nil // never started: nothing was frozen
			}
			return err
		}
		if pb.Settled {
			return nil
		}
		a, err := lockAccount(tx, pb.AccountID)
		if err != nil {
			return err
		}
		// Claim the settlement first: of two concurrent settlers exactly one gets here.
		res := tx.Model(&PipelineBilling{}).Where("pipeline_id = ? AND settled = ?", pipelineID, false).Update("settled", true)
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		secs := int64(math.Ceil(end.Sub(pb.StartedAt).Seconds()))
		if secs < 0 {
			secs = 0
		}
		used := int64(pb.Cores) * secs
		fromQuota := min(used, pb.FrozenQuota)
		cost := CostOf(used-fromQuota, pb.Price)
		fromFrozen := min(cost, pb.FrozenAmount)
		extra := cost - fromFrozen
		fromBalance := min(extra, a.Balance+pb.FrozenAmount-fromFrozen)
		writeoff := extra - fromBalance
		paid := fromFrozen + fromBalance
		release := pb.FrozenAmount - fromFrozen
		if pb.FrozenQuota > 0 {
			if err := quotaRow(tx, a.ID, quotaOf(&pb)).Updates(map[string]any{
				"frozen_core_seconds": gorm.Expr("frozen_core_seconds - ?", pb.FrozenQuota),
				"used_core_seconds":   gorm.Expr("used_core_seconds + ?", fromQuota),
			}).Error; err != nil {
				return err
			}
		}
		if pb.FrozenAmount > 0 || cost > 0 {
			pid := pipelineID
			legs := []leg{{a.ID, BookFrozen, -pb.FrozenAmount}, {a.ID, BookAvailable, release - fromBalance}, {0, BookRevenue, cost}}
			note := fmt.Sprintf("pipeline %d: %d core-seconds (%d from the %s free quota)", pipelineID, used, fromQuota, pb.Bucket)
			if writeoff > 0 {
				legs = append(legs, leg{0, BookWriteoff, -writeoff})
				note += fmt.Sprintf("; %s of its %s written off: it ran %s past its last covered window",
					writeoff.String(), cost.String(), roundUpMs(end.Sub(pb.FrozenUntil)))
			}
			t := &Txn{AccountID: a.ID, Kind: KindSettle, IdempotencyKey: fmt.Sprintf("settle:%d", pipelineID), PipelineID: &pid,
				Amount: paid, Note: note}
			if err := post(tx, t, legs, end); err != nil && !errors.Is(err, ErrDuplicate) {
				return err
			}
			a.Balance += release - fromBalance
			a.Frozen -= pb.FrozenAmount
		}
		if err := tx.Model(&PipelineBilling{}).Where("pipeline_id = ?", pipelineID).Updates(map[string]any{
			"ended_at": end, "core_seconds": used, "quota_core_seconds": fromQuota, "cost": paid,
		}).Error; err != nil {
			return err
		}
		return s.alerts(tx, a, end)
	})
}

// Credit adds money to an account from a source book (stripe for top-ups, grants for admin
// credit). A repeated key changes nothing and returns ErrDuplicate.
func (s *Service) Credit(ctx context.Context, accountID int64, kind, source string, amount Amount, key, note string) error {
	if amount <= 0 {
		return fmt.Errorf("billing: credit of %s: must be positive", amount)
	}
	now := s.clock.Now().UTC()
	return store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		a, err := lockAccount(tx, accountID)
		if err != nil {
			return err
		}
		t := &Txn{AccountID: accountID, Kind: kind, IdempotencyKey: key, Amount: amount, Note: note}
		if err := post(tx, t, []leg{{0, source, -amount}, {accountID, BookAvailable, amount}}, now); err != nil {
			return err
		}
		a.Balance += amount
		return s.alerts(tx, a, now)
	})
}

// Refund takes money back out of an account (a refunded card payment): what the balance holds
// goes back to stripe; money already spent is written off rather than driving the balance below
// zero. A repeated key changes nothing and returns ErrDuplicate.
func (s *Service) Refund(ctx context.Context, accountID int64, amount Amount, key, note string) error {
	if amount <= 0 {
		return fmt.Errorf("billing: refund of %s: must be positive", amount)
	}
	now := s.clock.Now().UTC()
	return store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		a, err := lockAccount(tx, accountID)
		if err != nil {
			return err
		}
		fromBalance := min(amount, max(a.Balance, 0))
		legs := []leg{{accountID, BookAvailable, -fromBalance}, {0, BookStripe, amount}}
		if fromBalance < amount {
			legs = append(legs, leg{0, BookWriteoff, -(amount - fromBalance)})
		}
		t := &Txn{AccountID: accountID, Kind: KindRefund, IdempotencyKey: key, Amount: amount, Note: note}
		if err := post(tx, t, legs, now); err != nil {
			return err
		}
		a.Balance -= fromBalance
		return s.alerts(tx, a, now)
	})
}

// CanStart says whether the org's account could start the pipeline now — the question a queued
// pipeline's "why am I waiting" needs answered — without holding anything. It asks admit, as
// Start does, so the preview and the dispatch never disagree.
func (s *Service) CanStart(ctx context.Context, r Run) error {
	a, err := s.AccountOf(ctx, r.OrgID)
	if err != nil {
		return err
	}
	now := s.clock.Now().UTC()
	_, _, err = s.admit(s.db.WithContext(ctx), a, s.newBilling(a.ID, r, now), now)
	return err
}

// intArray and timeArray pass a slice as one PostgreSQL array literal (gorm would expand a
// plain slice into a list of parameters).
type intArray []int64

func (a intArray) Value() (driver.Value, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, v := range a {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(v, 10))
	}
	b.WriteByte('}')
	return b.String(), nil
}

type timeArray []time.Time

func (a timeArray) Value() (driver.Value, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, v := range a {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + v.UTC().Format(time.RFC3339Nano) + `"`)
	}
	b.WriteByte('}')
	return b.String(), nil
}
