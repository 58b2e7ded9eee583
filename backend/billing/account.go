// Package billing owns each team's billing account. Every organization gets exactly one, opened
// in the same transaction that creates the organization.
package billing

import (
	"time"

	"gorm.io/gorm"
)

// DefaultCurrency of new accounts.
const DefaultCurrency = "CNY"

// Account is a team's billing account.
type Account struct {
	ID        int64     `gorm:"primaryKey"`
	OrgID     int64     `gorm:"not null"`
	Currency  string    `gorm:"not null"`
	CreatedAt time.Time `gorm:"not null"`
}

// OpenAccount creates the billing account of a new org; it runs inside the org's creating
// transaction (org.Service.OnCreate).
func OpenAccount(tx *gorm.DB, orgID int64, now time.Time) error {
	return tx.Create(&Account{OrgID: orgID, Currency: DefaultCurrency, CreatedAt: now}).Error
}

// TableName implements gorm's Tabler.
func (Account) TableName() string { return "billing_accounts" }
