package billing

import (
	"context"
	"crypto/rand"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/paging"
	"github.com/nimbus-build/nimbus/backend/store"
)

// What the billing API reads and changes beyond the money moves of service.go: the month's
// quota and spending, usage, the ledger as entries, statements, settings, notifications and
// admin grants.

// Month is the current calendar month in the billing time zone ("2026-06").
func (s *Service) Month() string { return s.month(s.clock.Now()) }

// Quota returns the account's use of bucket's free quota in the current month (zero when none
// yet).
func (s *Service) Quota(ctx context.Context, accountID int64, bucket Bucket) (QuotaUsage, error) {
	q := QuotaUsage{AccountID: accountID, Month: s.Month(), Bucket: bucket}
	err := quotaRow(s.db.WithContext(ctx), accountID, quotaKey{bucket, q.Month}).Take(&q).Error
	if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		return q, fmt.Errorf("billing: %s quota of account %d: %w", bucket, accountID, err)
	}
	return q, nil
}

// MonthSpent is what the account paid for its pipelines settled this month: their cost less
// what was written off (what the spending cap counts, besides the money frozen for running
// ones).
func (s *Service) MonthSpent(ctx context.Context, accountID int64) (Amount, error) {
	sp, err := s.MonthSpending(ctx, accountID)
	return sp.Paid, err
}

// MonthSpending is what the account's pipelines settled this month paid and had written off,
// builds and workspaces together.
func (s *Service) MonthSpending(ctx context.Context, accountID int64) (Spending, error) {
	sp, err := s.spentSince(s.db.WithContext(ctx), accountID, s.monthStart(s.clock.Now()))
	if err != nil {
		return sp, fmt.Errorf("billing: spending of account %d: %w", accountID, err)
	}
	return sp, nil
}

// MonthSpendingByBucket is MonthSpending for each bucket (every bucket present, zero when it
// settled nothing); the buckets add up to MonthSpending.
func (s *Service) MonthSpendingByBucket(ctx context.Context, accountID int64) (map[Bucket]Spending, error) {
	sp, err := s.spentSinceByBucket(s.db.WithContext(ctx), accountID, s.monthStart(s.clock.Now()))
	if err != nil {
		return nil, fmt.Errorf("billing: spending of account %d: %w", accountID, err)
	}
	for _, b := range Buckets {
		if _, ok := sp[b]; !ok {
			sp[b] = Spending{}
		}
	}
	return sp, nil
}

// SoFar is what a pipeline used and costs up to end: its settled values once settled (Cost is
// what was paid), else cores × the seconds since its start (rounded up, as settlement does) and
// the price of the part its frozen free quota does not cover.
func (pb *PipelineBilling) SoFar(end time.Time) (coreSeconds int64, cost Amount) {
	if pb.Settled {
		return pb.CoreSeconds, pb.Cost
	}
	secs := max(0, int64(math.Ceil(end.Sub(pb.StartedAt).Seconds())))
	used := int64(pb.Cores) * secs
	return used, CostOf(used-min(used, pb.FrozenQuota), pb.Price)
}

// WrittenOff is what of a settled pipeline's price the platform wrote off: its price (the money
// part of its core-seconds, as Settle computed it) less what the account paid (Cost). Zero
// before settlement.
func (pb *PipelineBilling) WrittenOff() Amount {
	if !pb.Settled {
		return 0
	}
	return max(0, CostOf(pb.CoreSeconds-pb.QuotaCoreSeconds, pb.Price)-pb.Cost)
}

// Uncovered is how long a settled pipeline ran past the end of its last frozen window (rounded
// up to the millisecond): for a terminated pipeline, the time between the window its account
// could not cover starting and the pipeline ending, whose price is written off when the balance
// cannot pay it. With windows frozen a lead ahead and the stop delivered at once it is zero.
// Zero before settlement.
func (pb *PipelineBilling) Uncovered() time.Duration {
	if !pb.Settled || pb.EndedAt == nil {
		return 0
	}
	return roundUpMs(pb.EndedAt.Sub(pb.FrozenUntil))
}

// roundUpMs rounds d up to the millisecond; below zero it is zero.
func roundUpMs(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}

// UsageRow is the settled use of one day × bucket × runner class × repo.
type UsageRow struct {
	Day              string // "2026-06-10" in the billing time zone
	Bucket           Bucket // builds and workspaces are never added up in one row
	Class            string
	RepoID           int64
	Repo             string // "" when the repo was deleted
	Pipelines        int
	CoreSeconds      int64
	QuotaCoreSeconds int64
	Cost             Amount // what the account paid
	WrittenOff       Amount // what the platform wrote off beside it
}

// MaxUsageDays bounds the range of one usage query.
const MaxUsageDays = 366

// Usage adds up the account's settled pipelines by the day they ended (billing time zone), their
// bucket, the runner class and the repo (what they paid, and what was written off beside it),
// for the days from..to (inclusive, "2006-01-02"), sorted by day, bucket, class and repo.
func (s *Service) Usage(ctx context.Context, accountID int64, from, to string) ([]UsageRow, error) {
	start, err := time.ParseInLocation(time.DateOnly, from, s.cfg.Location)
	if err != nil {
		return nil, fault.Invalid("from", "from must be a date such as 2026-06-01")
	}
	last, err := time.ParseInLocation(time.DateOnly, to, s.cfg.Location)
	if err != nil {
		return nil, fault.Invalid("to", "to must be a date such as 2026-06-30")
	}
	if last.Before(start) || last.Sub(start) >= MaxUsageDays*24*time.Hour {
		return nil, fault.Invalid("to", "to must be on or after from, at most %d days later", MaxUsageDays-1)
	}
	end := last.AddDate(0, 0, 1)
	rows, err := s.db.WithContext(ctx).Table("pipeline_billing").
		Select("pipeline_billing.ended_at, pipeline_billing.bucket, pipeline_billing.class, pipeline_billing.repo_id, COALESCE(repos.name, '') AS repo, "+
			"pipeline_billing.core_seconds, pipeline_billing.quota_core_seconds, pipeline_billing.price, pipeline_billing.cost").
		Joins("LEFT JOIN repos ON repos.id = pipeline_billing.repo_id").
		Where("pipeline_billing.account_id = ? AND pipeline_billing.settled = ? AND pipeline_billing.ended_at >= ? AND pipeline_billing.ended_at < ?",
			accountID, true, start.UTC(), end.UTC()).Rows()
	if err != nil {
		return nil, fmt.Errorf("billing: usage of account %d: %w", accountID, err)
	}
	defer rows.Close()
	type key struct {
		day    string
		bucket Bucket
		class  string
		repo   int64
	}
	sums := map[key]*UsageRow{}
	for rows.Next() {
		var r struct {
			EndedAt          time.Time
			Bucket           Bucket
			Class            string
			RepoID           int64
			Repo             string
			CoreSeconds      int64
			QuotaCoreSeconds int64
			Price            Amount
			Cost             Amount
		}
		if err := s.db.ScanRows(rows, &r); err != nil {
			return nil, fmt.Errorf("billing: usage of account %d: %w", accountID, err)
		}
		k := key{r.EndedAt.In(s.cfg.Location).Format(time.DateOnly), r.Bucket, r.Class, r.RepoID}
		u := sums[k]
		if u == nil {
			u = &UsageRow{Day: k.day, Bucket: k.bucket, Class: k.class, RepoID: k.repo, Repo: r.Repo}
			sums[k] = u
		}
		u.Pipelines++
		u.CoreSeconds += r.CoreSeconds
		u.QuotaCoreSeconds += r.QuotaCoreSeconds
		u.Cost += r.Cost
		pb := PipelineBilling{Settled: true, CoreSeconds: r.CoreSeconds, QuotaCoreSeconds: r.QuotaCoreSeconds, Price: r.Price, Cost: r.Cost}
		u.WrittenOff += pb.WrittenOff()
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("billing: usage of account %d: %w", accountID, err)
	}
	out := make([]UsageRow, 0, len(sums))
	for _, u := range sums {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b UsageRow) int {
		return cmpFirst(strings.Compare(a.Day, b.Day), strings.Compare(string(a.Bucket), string(b.Bucket)), strings.Compare(a.Class, b.Class),
			strings.Compare(a.Repo, b.Repo), int(a.RepoID-b.RepoID))
	})
	return out, nil
}

func cmpFirst(cs ...int) int {
	for _, c := range cs {
		if c != 0 {
			return c
		}
	}
	return 0
}

// Entry is a ledger transaction as the account sees it: what it moved, and how it changed the
// account's balance and frozen money.
type Entry struct {
	Txn
	BalanceChange Amount
	FrozenChange  Amount
	// WrittenOff is what the transaction wrote off (its posting to the writeoff book): for a
	// settlement, the part of the pipeline's price the balance could not pay (Amount is what
	// was paid); for a refund, the money already spent.
	WrittenOff Amount
	// Uncovered is, for a settlement, how long the pipeline ran past its last frozen window
	// (PipelineBilling.Uncovered); nil for other kinds.
	Uncovered *time.Duration `gorm:"-"`
	// Build names the build of the entry's pipeline (Config.Builds); nil for entries of no
	// pipeline, and for a pipeline whose repo was deleted.
	Build *BuildRef `gorm:"-"`
}

// entries selects ledger transactions of an account with their effect on its two books and what
// they wrote off. The available and frozen books are the account's own: no other account's
// postings share its transactions.
func (s *Service) entries(ctx context.Context, accountID int64) *gorm.DB {
	return s.db.WithContext(ctx).Table("ledger_txns").
		Select("ledger_txns.id, ledger_txns.account_id, ledger_txns.kind, ledger_txns.idempotency_key, ledger_txns.pipeline_id, "+
			"ledger_txns.amount, ledger_txns.note, ledger_txns.created_at, "+
			"COALESCE(SUM(CASE WHEN ledger_postings.book = ? THEN ledger_postings.amount ELSE 0 END), 0) AS balance_change, "+
			"COALESCE(SUM(CASE WHEN ledger_postings.book = ? THEN ledger_postings.amount ELSE 0 END), 0) AS frozen_change, "+
			"COALESCE(-SUM(CASE WHEN ledger_postings.book = ? THEN ledger_postings.amount ELSE 0 END), 0) AS written_off",
			BookAvailable, BookFrozen, BookWriteoff).
		// All the transaction's postings: the account's books, and the platform's writeoff.
		Joins("LEFT JOIN ledger_postings ON ledger_postings.txn_id = ledger_txns.id").
		Where("ledger_txns.account_id = ?", accountID).
		Group("ledger_txns.id, ledger_txns.account_id, ledger_txns.kind, ledger_txns.idempotency_key, ledger_txns.pipeline_id, " +
			"ledger_txns.amount, ledger_txns.note, ledger_txns.created_at")
}

// Ledger returns a page of the account's ledger, newest first (the cursor is the transaction id).
func (s *Service) Ledger(ctx context.Context, accountID int64, page paging.Page) ([]Entry, error) {
	q := s.entries(ctx, accountID)
	if page.After > 0 {
		q = q.Where("ledger_txns.id < ?", page.After)
	}
	var out []Entry
	if err := q.Order("ledger_txns.id DESC").Limit(page.Limit + 1).Scan(&out).Error; err != nil {
		return nil, fmt.Errorf("billing: ledger of account %d: %w", accountID, err)
	}
	if err := s.withSettlements(ctx, out); err != nil {
		return nil, fmt.Errorf("billing: ledger of account %d: %w", accountID, err)
	}
	if err := s.withBuilds(ctx, out); err != nil {
		return nil, fmt.Errorf("billing: ledger of account %d: %w", accountID, err)
	}
	return out, nil
}

// withBuilds fills in Build of the entries of a pipeline, asking Config.Builds once for all
// their pipelines.
func (s *Service) withBuilds(ctx context.Context, es []Entry) error {
	if s.cfg.Builds == nil {
		return nil
	}
	var ids []int64
	seen := map[int64]bool{}
	for _, e := range es {
		if e.PipelineID != nil && !seen[*e.PipelineID] {
			seen[*e.PipelineID] = true
			ids = append(ids, *e.PipelineID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	refs, err := s.cfg.Builds(ctx, ids)
	if err != nil {
		return err
	}
	for i := range es {
		if es[i].PipelineID == nil {
			continue
		}
		if ref, ok := refs[*es[i].PipelineID]; ok {
			es[i].Build = &ref
		}
	}
	return nil
}

// withSettlements fills in Uncovered of the settle entries, from their pipelines' records (one
// query).
func (s *Service) withSettlements(ctx context.Context, es []Entry) error {
	var ids []int64
	for _, e := range es {
		if e.Kind == KindSettle && e.PipelineID != nil {
			ids = append(ids, *e.PipelineID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	var pbs []PipelineBilling
	if err := s.db.WithContext(ctx).Where("pipeline_id IN ?", ids).Find(&pbs).Error; err != nil {
		return err
	}
	uncovered := make(map[int64]time.Duration, len(pbs))
	for i := range pbs {
		uncovered[pbs[i].PipelineID] = pbs[i].Uncovered()
	}
	for i := range es {
		if es[i].Kind != KindSettle || es[i].PipelineID == nil {
			continue
		}
		if d, ok := uncovered[*es[i].PipelineID]; ok {
			es[i].Uncovered = &d
		}
	}
	return nil
}

// Statement writes the account's ledger for month ("2026-06", billing time zone) as CSV: the
// opening balance, one row per transaction with the running balance, a total per kind, and
// the closing balance. A settlement's amount is what was paid, its written_off what the platform
// absorbed beside it. Amounts are exact (8 decimals), so every column adds up to the unit.
func (s *Service) Statement(ctx context.Context, a *Account, month string, w io.Writer) error {
	start, err := time.ParseInLocation("2006-01", month, s.cfg.Location)
	if err != nil {
		return fault.NotFound("no statement for %q: want a month such as 2026-06", month)
	}
	end := start.AddDate(0, 1, 0)
	var open struct{ Balance, Frozen Amount }
	err = s.db.WithContext(ctx).Table("ledger_postings").
		Select("COALESCE(SUM(CASE WHEN ledger_postings.book = ? THEN ledger_postings.amount ELSE 0 END), 0) AS balance, "+
			"COALESCE(SUM(CASE WHEN ledger_postings.book = ? THEN ledger_postings.amount ELSE 0 END), 0) AS frozen", BookAvailable, BookFrozen).
		Joins("JOIN ledger_txns ON ledger_txns.id = ledger_postings.txn_id").
		Where("ledger_postings.account_id = ? AND ledger_txns.created_at < ?", a.ID, start.UTC()).Scan(&open).Error
	if err != nil {
		return fmt.Errorf("billing: opening balance of account %d: %w", a.ID, err)
	}
	rows, err := s.entries(ctx, a.ID).Where("ledger_txns.created_at >= ? AND ledger_txns.created_at < ?", start.UTC(), end.UTC()).
		Order("ledger_txns.id").Rows()
	if err != nil {
		return fmt.Errorf("billing: statement of account %d: %w", a.ID, err)
	}
	defer rows.Close()
	cw := csv.NewWriter(w)
	stamp := func(t time.Time) string { return t.In(s.cfg.Location).Format(time.RFC3339) }
	cw.Write([]string{"id", "time", "kind", "pipeline_id", "amount", "written_off", "balance_change", "frozen_change", "balance", "frozen", "note"})
	cw.Write([]string{"", stamp(start), "opening", "", "", "", "", "", open.Balance.String(), open.Frozen.String(),
		fmt.Sprintf("%s statement of %s", a.Currency, month)})
	type total struct {
		n                               int
		amount, writtenOff, bal, frozen Amount
	}
	totals := map[string]*total{}
	balance, frozen := open.Balance, open.Frozen
	for rows.Next() {
		var e Entry
		if err := s.db.ScanRows(rows, &e); err != nil {
			return fmt.Errorf("billing: statement of account %d: %w", a.ID, err)
		}
		balance += e.BalanceChange
		frozen += e.FrozenChange
		pipeline := ""
		if e.PipelineID != nil {
			pipeline = strconv.FormatInt(*e.PipelineID, 10)
		}
		cw.Write([]string{strconv.FormatInt(e.ID, 10), stamp(e.CreatedAt), e.Kind, pipeline, e.Amount.String(), e.WrittenOff.String(),
			e.BalanceChange.String(), e.FrozenChange.String(), balance.String(), frozen.String(), csvText(e.Note)})
		t := totals[e.Kind]
		if t == nil {
			t = &total{}
			totals[e.Kind] = t
		}
		t.n++
		t.amount += e.Amount
		t.writtenOff += e.WrittenOff
		t.bal += e.BalanceChange
		t.frozen += e.FrozenChange
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("billing: statement of account %d: %w", a.ID, err)
	}
	kinds := make([]string, 0, len(totals))
	for k := range totals {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		t := totals[k]
		cw.Write([]string{"", "", "total:" + k, "", t.amount.String(), t.writtenOff.String(), t.bal.String(), t.frozen.String(), "", "",
			fmt.Sprintf("%d transactions", t.n)})
	}
	cw.Write([]string{"", stamp(end), "closing", "", "", "", (balance - open.Balance).String(), (frozen - open.Frozen).String(),
		balance.String(), frozen.String(), ""})
	cw.Flush()
	return cw.Error()
}

// csvText keeps a spreadsheet from reading a note as a formula (CSV injection): a cell that
// starts with = + - @ or a control character gets a leading apostrophe.
func csvText(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// Notifications returns a page of the account's notifications, newest first (cursor: the id).
func (s *Service) Notifications(ctx context.Context, accountID int64, page paging.Page) ([]Notification, error) {
	q := s.db.WithContext(ctx).Where("account_id = ?", accountID)
	if page.After > 0 {
		q = q.Where("id < ?", page.After)
	}
	var out []Notification
	if err := q.Order("id DESC").Limit(page.Limit + 1).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("billing: notifications of account %d: %w", accountID, err)
	}
	return out, nil
}

// Settings is a change of an account's controls; a nil field is left as it is.
type Settings struct {
	SpendingCap         **Amount // *nil clears the cap
	LowBalanceThreshold **Amount // *nil clears the threshold
	AlertWebhookURL     *string  // "" clears the URL
}

// ChangeSettings applies a change and records the alerts the new settings call for at once (a
// threshold set above the balance alerts now, not at the next money move).
func (s *Service) ChangeSettings(ctx context.Context, accountID int64, ch Settings) (*Account, error) {
	now := s.clock.Now().UTC()
	var out *Account
	err := store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		if _, err := lockAccount(tx, accountID); err != nil {
			return err
		}
		set := map[string]any{}
		if ch.SpendingCap != nil {
			set["spending_cap"] = *ch.SpendingCap
		}
		if ch.LowBalanceThreshold != nil {
			set["low_balance_threshold"] = *ch.LowBalanceThreshold
		}
		if ch.AlertWebhookURL != nil {
			set["alert_webhook_url"] = *ch.AlertWebhookURL
		}
		if len(set) > 0 {
			if err := tx.Model(&Account{}).Where("id = ?", accountID).Updates(set).Error; err != nil {
				return err
			}
		}
		var a Account
		if err := tx.Take(&a, accountID).Error; err != nil {
			return err
		}
		out = &a
		return s.alerts(tx, &a, now)
	})
	if err != nil {
		return nil, fmt.Errorf("billing: settings of account %d: %w", accountID, err)
	}
	return out, nil
}

// Grant credits an account from the platform's grants book. key makes it idempotent: a grant
// repeated with the key returns the first one (created false); the key reused for a different
// grant is a 409. An empty key makes a fresh grant.
func (s *Service) Grant(ctx context.Context, accountID int64, amount Amount, key, note string) (*Entry, bool, error) {
	if key == "" {
		b := make([]byte, 16)
		rand.Read(b)
		key = hex.EncodeToString(b)
	}
	key = fmt.Sprintf("grant:%d:%s", accountID, key)
	err := s.Credit(ctx, accountID, KindGrant, BookGrants, amount, key, note)
	created := err == nil
	if err != nil && !errors.Is(err, ErrDuplicate) {
		return nil, false, err
	}
	var found []Entry
	if err := s.entries(ctx, accountID).Where("ledger_txns.idempotency_key = ?", key).Scan(&found).Error; err != nil {
		return nil, false, fmt.Errorf("billing: grant %s: %w", key, err)
	}
	if len(found) == 0 {
		// The key belongs to another account's transaction: impossible with the account in the key.
		return nil, false, fmt.Errorf("billing: grant %s: not in the account's ledger", key)
	}
	e := found[0]
	if !created && (e.Kind != KindGrant || e.Amount != amount || e.Note != note) {
		return nil, false, fault.Conflict("the Idempotency-Key was used for a different grant (%s %s: %q)", e.Amount.Display(), e.Kind, e.Note)
	}
	return &e, created, nil
}
