package billing

import (
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/store"
)

// Books.
const (
	BookAvailable = "available"
	BookFrozen    = "frozen"
	BookStripe    = "stripe"
	BookGrants    = "grants"
	BookRevenue   = "revenue"
	BookWriteoff  = "writeoff"
)

// Transaction kinds.
const (
	KindTopup   = "topup"
	KindGrant   = "grant"
	KindRefund  = "refund"
	KindFreeze  = "freeze"
	KindSettle  = "settle"  // charge from the freeze and release the rest
	KindRelease = "release" // a freeze released without charge (a pipeline that never started)
)

// ErrDuplicate means a transaction with the idempotency key exists: the movement happened
// already and nothing was written.
var ErrDuplicate = errors.New("billing: duplicate idempotency key")

// leg is one posting to write; account 0 means a platform book.
type leg struct {
	account int64
	book    string
	amount  Amount
}

// post writes one balanced transaction and moves the cached balances of the accounts it touches,
// inside tx. It returns ErrDuplicate (and writes nothing) when key was used before.
func post(tx *gorm.DB, t *Txn, legs []leg, now time.Time) error {
	var sum Amount
	for _, l := range legs {
		sum += l.amount
	}
	if sum != 0 {
		return fmt.Errorf("billing: unbalanced %s transaction %s: legs sum to %d", t.Kind, t.IdempotencyKey, sum)
	}
	var n int64
	if err := tx.Model(&Txn{}).Where("idempotency_key = ?", t.IdempotencyKey).Count(&n).Error; err != nil {
		return err
	}
	if n > 0 {
		return ErrDuplicate
	}
	t.CreatedAt = now
	if err := tx.Create(t).Error; err != nil {
		if store.IsUniqueViolation(err) {
			return ErrDuplicate
		}
		return err
	}
	rows := make([]Posting, 0, len(legs))
	balance, frozen := map[int64]Amount{}, map[int64]Amount{}
	for _, l := range legs {
		p := Posting{TxnID: t.ID, Book: l.book, Amount: l.amount}
		if l.account != 0 {
			id := l.account
			p.AccountID = &id
			switch l.book {
			case BookAvailable:
				balance[id] += l.amount
			case BookFrozen:
				frozen[id] += l.amount
			}
		}
		rows = append(rows, p)
	}
	if err := tx.Create(&rows).Error; err != nil {
		return err
	}
	for id := range union(balance, frozen) {
		res := tx.Model(&Account{}).Where("id = ?", id).Updates(map[string]any{
			"balance": gorm.Expr("balance + ?", balance[id]),
			"frozen":  gorm.Expr("frozen + ?", frozen[id]),
		})
		if res.Error != nil {
			return res.Error
		}
	}
	return nil
}

func union(a, b map[int64]Amount) map[int64]bool {
	out := map[int64]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}
