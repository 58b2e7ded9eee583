package billing

import (
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/outbox"
)

// alerts records the notifications an account's new state calls for, each once: 50, 80 and
// 100 % of the monthly spending cap, and the balance falling below its threshold (once per fall).
// Each is enqueued in the webhook outbox in the same transaction; delivery to the account's
// webhook happens outside it (deliver.go).
func (s *Service) alerts(tx *gorm.DB, a *Account, now time.Time) error {
	if a.SpendingCap != nil && *a.SpendingCap > 0 {
		sp, err := s.spentSince(tx, a.ID, s.monthStart(now))
		if err != nil {
			return err
		}
		spent := sp.Paid // what was written off was never spent
		month := s.month(now)
		for _, pct := range []int64{50, 80, 100} {
			if int64(spent+a.Frozen)*100 >= int64(*a.SpendingCap)*pct {
				msg := fmt.Sprintf("%d%% of the monthly spending cap of %s %s is used (%s spent, %s held for running pipelines)",
					pct, a.SpendingCap.Display(), a.Currency, spent.Display(), a.Frozen.Display())
				if err := notify(tx, a.ID, fmt.Sprintf("cap_%d", pct), fmt.Sprintf("cap:%d:%s:%d", a.ID, month, pct), msg, now); err != nil {
					return err
				}
			}
		}
	}
	if a.LowBalanceThreshold != nil {
		// One alert per fall below the threshold: the key changes once the balance recovers.
		var recoveries int64
		if err := tx.Model(&Txn{}).Where("account_id = ? AND kind IN ?", a.ID, []string{KindTopup, KindGrant}).Count(&recoveries).Error; err != nil {
			return err
		}
		if a.Balance < *a.LowBalanceThreshold {
			msg := fmt.Sprintf("the balance is %s %s, below the alert threshold of %s", a.Balance.Display(), a.Currency, a.LowBalanceThreshold.Display())
			if err := notify(tx, a.ID, "low_balance", fmt.Sprintf("low:%d:%d", a.ID, recoveries), msg, now); err != nil {
				return err
			}
		}
	}
	return nil
}

func notify(tx *gorm.DB, accountID int64, kind, key, msg string, now time.Time) error {
	var n int64
	if err := tx.Model(&Notification{}).Where("dedupe_key = ?", key).Count(&n).Error; err != nil || n > 0 {
		return err
	}
	note := Notification{AccountID: accountID, Kind: kind, DedupeKey: key, Message: msg, CreatedAt: now}
	if err := tx.Create(&note).Error; err != nil {
		return err
	}
	return outbox.Enqueue(tx.Statement.Context, tx, KindAlert, note.ID, now)
}
