// Package billing owns each team's billing account and the money of Nimbus: a double-entry
// ledger in integer units (money.go), the monthly free CPU quotas in core-seconds (one per
// bucket: builds and workspaces), and the lifecycle of a pipeline's cost:
//
//	Start   at dispatch: freeze the first window (its bucket's free quota first for CPU
//	        classes, then money); a pipeline whose account cannot cover it never starts
//	Tick    every few seconds: freeze the next window of every running pipeline whose frozen
//	        time runs out; the ones that cannot be covered are to be terminated
//	Settle  at the end, once: the real core-seconds (backend-observed start to end, rounded up
//	        to the second) are charged from the freeze, what is left is released
//
// Every movement of money is a ledger transaction whose postings sum to zero, written with an
// idempotency key in the same database transaction that moves the account's cached balance, so
// the balance equals the ledger at all times and a retried call never moves money twice.
//
// Books: each account has "available" (its balance) and "frozen"; the platform has "stripe"
// (money paid in), "grants" (credit given by admins), "revenue" (what runs cost) and "writeoff"
// (cost the platform absorbed: seconds a terminated pipeline ran past its last covered window,
// refunds of money already spent).
package billing

import (
	"time"

	"gorm.io/gorm"
)

// DefaultCurrency of new accounts.
const DefaultCurrency = "CNY"

// Account is a team's billing account. Balance and Frozen are kept equal to the ledger's
// "available" and "frozen" books of the account.
type Account struct {
	ID                  int64     `gorm:"primaryKey"`
	OrgID               int64     `gorm:"not null"`
	Currency            string    `gorm:"not null"`
	Balance             Amount    `gorm:"not null"`
	Frozen              Amount    `gorm:"not null"`
	StripeCustomerID    string    `gorm:"not null"`
	SpendingCap         *Amount   // per calendar month; nil = none
	LowBalanceThreshold *Amount   // alert below this; nil = none
	AlertWebhookURL     string    `gorm:"not null"`
	CreatedAt           time.Time `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (Account) TableName() string { return "billing_accounts" }

// OpenAccount creates the billing account of a new org; it runs inside the org's creating
// transaction (org.Service.OnCreate).
func OpenAccount(tx *gorm.DB, orgID int64, now time.Time) error {
	return tx.Create(&Account{OrgID: orgID, Currency: DefaultCurrency, CreatedAt: now}).Error
}

// Txn is one ledger transaction.
type Txn struct {
	ID             int64     `gorm:"primaryKey"`
	AccountID      int64     `gorm:"not null"`
	Kind           string    `gorm:"not null"`
	IdempotencyKey string    `gorm:"not null"`
	PipelineID     *int64    // for freeze, release and charge
	Amount         Amount    `gorm:"not null"` // the money moved, for lists and statements
	Note           string    `gorm:"not null"`
	CreatedAt      time.Time `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (Txn) TableName() string { return "ledger_txns" }

// Posting is one leg of a transaction.
type Posting struct {
	ID        int64  `gorm:"primaryKey"`
	TxnID     int64  `gorm:"not null"`
	AccountID *int64 // nil for the platform's books
	Book      string `gorm:"not null"`
	Amount    Amount `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (Posting) TableName() string { return "ledger_postings" }

// Bucket is what a pipeline's compute is billed as. Each bucket has its own monthly free CPU
// quota (Config.FreeQuota); prices, freezing, settlement and the spending cap are the same.
type Bucket string

const (
	// BucketBuild is every pipeline that is not a workspace (160 free CPU core-hours a month).
	BucketBuild Bucket = "build"
	// BucketWorkspace is a cloud development workspace, build.Pipeline.Workspace (1,600 free CPU
	// core-hours a month).
	BucketWorkspace Bucket = "workspace"
)

// Buckets lists the buckets in the order the API shows them.
var Buckets = []Bucket{BucketBuild, BucketWorkspace}

// BucketOf is the bucket of a pipeline: a workspace's, or a build's.
func BucketOf(workspace bool) Bucket {
	if workspace {
		return BucketWorkspace
	}
	return BucketBuild
}

// QuotaUsage is an account's use of one bucket's free CPU quota in one calendar month.
type QuotaUsage struct {
	AccountID         int64  `gorm:"primaryKey;autoIncrement:false"`
	Month             string `gorm:"primaryKey"`
	Bucket            Bucket `gorm:"primaryKey"`
	UsedCoreSeconds   int64  `gorm:"not null"`
	FrozenCoreSeconds int64  `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (QuotaUsage) TableName() string { return "quota_usage" }

// PipelineBilling is the cost record of one started pipeline.
type PipelineBilling struct {
	PipelineID       int64     `gorm:"primaryKey;autoIncrement:false"`
	AccountID        int64     `gorm:"not null"`
	RepoID           int64     `gorm:"not null"`
	Class            string    `gorm:"not null"`
	Bucket           Bucket    `gorm:"not null"` // whose free quota it draws on, and where usage shows it
	Cores            int       `gorm:"not null"`
	Price            Amount    `gorm:"not null"` // per core-hour, fixed at start
	QuotaMonth       string    `gorm:"not null"` // "" when the class has no free quota
	StartedAt        time.Time `gorm:"not null"`
	FrozenUntil      time.Time `gorm:"not null"`
	Windows          int       `gorm:"not null"`
	FrozenQuota      int64     `gorm:"not null"` // core-seconds of free quota held
	FrozenAmount     Amount    `gorm:"not null"`
	Settled          bool      `gorm:"not null"`
	EndedAt          *time.Time
	CoreSeconds      int64 `gorm:"not null"`
	QuotaCoreSeconds int64 `gorm:"not null"` // of CoreSeconds, how many the free quota paid
	// Cost is what the account paid once settled: the price of CoreSeconds − QuotaCoreSeconds
	// less what was written off (WrittenOff derives that from these columns).
	Cost Amount `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (PipelineBilling) TableName() string { return "pipeline_billing" }

// Notification is an alert about an account (cap reached, balance low).
type Notification struct {
	ID        int64     `gorm:"primaryKey"`
	AccountID int64     `gorm:"not null"`
	Kind      string    `gorm:"not null"`
	DedupeKey string    `gorm:"not null"`
	Message   string    `gorm:"not null"`
	CreatedAt time.Time `gorm:"not null"`
	Delivered bool      `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (Notification) TableName() string { return "billing_notifications" }
