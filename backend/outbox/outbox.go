// Package outbox is the one way Nimbus sends an outgoing webhook. A domain writes a message
// with Enqueue inside the transaction that records its event, so the message exists exactly
// when the event does, and survives a restart. A delivery loop (Run, one per server) claims
// due messages with a fenced conditional update, hands each to the handler of its kind, and
// records the outcome: delivered; Later (the default for an error) with the kind's backoff;
// Permanent, or after the kind's MaxAttempts, dead; or NotYet, which waits without counting
// an attempt. Requeue gives a dead message another round. See README.md for the flow.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/internal/backoff"
)

// Message statuses.
const (
	StatusPending   = "pending"
	StatusDelivered = "delivered"
	StatusDead      = "dead"
)

// Message is one outgoing webhook (migration 00027). Ref names the domain row the handler
// builds the request from (a notification, a publish delivery); the pair is unique, so an
// event enqueued twice is sent once. Claim is the fence: every claim increments it, and only
// the claimer whose number is still there may record the outcome.
type Message struct {
	ID          int64     `gorm:"primaryKey"`
	Kind        string    `gorm:"not null"`
	Ref         int64     `gorm:"not null"`
	Status      string    `gorm:"not null"`
	Attempts    int       `gorm:"not null"`
	Claim       int64     `gorm:"not null"`
	DueAt       time.Time `gorm:"not null"`
	LastError   string    `gorm:"not null"`
	CreatedAt   time.Time `gorm:"not null"`
	DeliveredAt *time.Time
}

// TableName implements gorm's Tabler.
func (Message) TableName() string { return "webhook_outbox" }

// Handler sends one message of its kind. It returns nil once the receiver took it, and
// otherwise an error: Permanent when no later try can succeed, NotYet when the message is not
// ready to go, and any other error to be tried again later.
type Handler func(ctx context.Context, m Message) error

// Kind is what the outbox knows of one kind of message.
type Kind struct {
	Handle Handler
	// Retry is the wait after the n-th failed attempt.
	Retry backoff.Policy
	// MaxAttempts is how many failed attempts make a message dead.
	MaxAttempts int
}

// permanentError marks a failure no later attempt mends.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as final: the message goes dead at once.
func Permanent(err error) error { return &permanentError{err} }

// notYetError asks for another look after a wait, without counting an attempt.
type notYetError struct {
	wait   time.Duration
	reason string
}

func (e *notYetError) Error() string { return "not yet: " + e.reason }

// NotYet says the message is not ready to go (a version still receiving files, an account
// without a webhook URL yet): it is looked at again after wait, and no attempt is counted.
func NotYet(wait time.Duration, reason string) error { return &notYetError{wait, reason} }

// Config configures an Outbox.
type Config struct {
	DB    *gorm.DB
	Clock clock.Clock
	Log   *slog.Logger
	// Lease is how long a claim keeps other servers off a message: longer than any handler's
	// request takes (a minute when 0). A server that dies mid-send leaves the message to be
	// claimed again once its lease is over.
	Lease time.Duration
	// Batch is how many messages one round claims at most (100 when 0).
	Batch int
}

// Outbox enqueues and delivers webhook messages.
type Outbox struct {
	cfg Config

	mu    sync.Mutex
	kinds map[string]Kind
}

// New returns an outbox with no kinds; each domain registers its own with Register.
func New(cfg Config) *Outbox {
	if cfg.Lease <= 0 {
		cfg.Lease = time.Minute
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 100
	}
	return &Outbox{cfg: cfg, kinds: map[string]Kind{}}
}

// Register sets the handler and retry policy of a kind. Messages of a kind nobody registered
// wait in the table (another server may know the kind).
func (o *Outbox) Register(kind string, k Kind) {
	if k.MaxAttempts <= 0 {
		k.MaxAttempts = 1
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.kinds[kind] = k
}

func (o *Outbox) kind(name string) (Kind, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k, ok := o.kinds[name]
	return k, ok
}

// Enqueue writes a message of kind about ref, due at due, in tx: the transaction that records
// the event. A message of the same kind and ref already there is left as it is.
func Enqueue(ctx context.Context, tx *gorm.DB, kind string, ref int64, due time.Time) error {
	m := Message{Kind: kind, Ref: ref, Status: StatusPending, DueAt: due.UTC(), CreatedAt: due.UTC()}
	if err := tx.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&m).Error; err != nil {
		return fmt.Errorf("outbox: enqueue %s %d: %w", kind, ref, err)
	}
	return nil
}

// Lookup returns the message of kind about ref.
func (o *Outbox) Lookup(ctx context.Context, kind string, ref int64) (Message, error) {
	var m Message
	err := o.cfg.DB.WithContext(ctx).Where("kind = ? AND ref = ?", kind, ref).Take(&m).Error
	if err != nil {
		return m, fmt.Errorf("outbox: %s %d: %w", kind, ref, err)
	}
	return m, nil
}

// ErrNotDead is returned by Requeue for a message that is not dead.
var ErrNotDead = errors.New("outbox: the message is not dead")

// Requeue gives a dead message a fresh round of attempts, due now.
func (o *Outbox) Requeue(ctx context.Context, id int64) error {
	res := o.cfg.DB.WithContext(ctx).Model(&Message{}).Where("id = ? AND status = ?", id, StatusDead).
		Updates(map[string]any{"status": StatusPending, "attempts": 0, "due_at": o.cfg.Clock.Now().UTC()})
	if res.Error != nil {
		return fmt.Errorf("outbox: requeue %d: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("%w: %d", ErrNotDead, id)
	}
	return nil
}

// Deliver runs one round: every due message of a registered kind (kinds empty) or of the
// kinds named is claimed and handled. It returns how many were delivered.
func (o *Outbox) Deliver(ctx context.Context, kinds ...string) (int, error) {
	now := o.cfg.Clock.Now().UTC()
	if len(kinds) == 0 {
		o.mu.Lock()
		for k := range o.kinds {
			kinds = append(kinds, k)
		}
		o.mu.Unlock()
	}
	if len(kinds) == 0 {
		return 0, nil
	}
	var due []Message
	err := o.cfg.DB.WithContext(ctx).Where("status = ? AND due_at <= ? AND kind IN ?", StatusPending, now, kinds).
		Order("due_at, id").Limit(o.cfg.Batch).Find(&due).Error
	if err != nil {
		return 0, fmt.Errorf("outbox: due messages: %w", err)
	}
	sent := 0
	for _, m := range due {
		ok, err := o.claim(ctx, &m, now)
		if err != nil {
			return sent, err
		}
		if !ok {
			continue // another server has it
		}
		delivered, err := o.handle(ctx, m, now)
		if err != nil {
			return sent, err
		}
		if delivered {
			sent++
		}
	}
	return sent, nil
}

// claim takes m for one lease: the update holds only while nobody has claimed it since it was
// read (the claim number) and it is still due, so of two servers that read it, one wins.
func (o *Outbox) claim(ctx context.Context, m *Message, now time.Time) (bool, error) {
	res := o.cfg.DB.WithContext(ctx).Model(&Message{}).
		Where("id = ? AND status = ? AND claim = ? AND due_at <= ?", m.ID, StatusPending, m.Claim, now).
		Updates(map[string]any{"claim": m.Claim + 1, "due_at": now.Add(o.cfg.Lease)})
	if res.Error != nil {
		return false, fmt.Errorf("outbox: claim %d: %w", m.ID, res.Error)
	}
	m.Claim++
	return res.RowsAffected == 1, nil
}

// handle sends a claimed message and records the outcome under the claim's fence: a server
// whose lease ran out while it sent, and whose message another server claimed since, records
// nothing. It reports whether the message was delivered.
func (o *Outbox) handle(ctx context.Context, m Message, now time.Time) (bool, error) {
	k, ok := o.kind(m.Kind)
	if !ok {
		return false, nil // unregistered since the round began; its lease runs out
	}
	err := k.Handle(ctx, m)
	set := map[string]any{}
	var notYet *notYetError
	var perm *permanentError
	switch {
	case err == nil:
		set["status"], set["delivered_at"], set["attempts"], set["last_error"] = StatusDelivered, now, m.Attempts+1, ""
	case errors.As(err, &notYet):
		set["due_at"] = now.Add(notYet.wait)
	case errors.As(err, &perm) || m.Attempts+1 >= k.MaxAttempts:
		set["status"], set["attempts"], set["last_error"] = StatusDead, m.Attempts+1, err.Error()
		o.cfg.Log.WarnContext(ctx, "webhook failed for good", "kind", m.Kind, "ref", m.Ref, "attempts", m.Attempts+1, "err", err)
	default:
		set["attempts"], set["last_error"], set["due_at"] = m.Attempts+1, err.Error(), now.Add(k.Retry.After(m.Attempts+1))
		o.cfg.Log.WarnContext(ctx, "webhook failed; retrying later", "kind", m.Kind, "ref", m.Ref, "attempts", m.Attempts+1, "err", err)
	}
	// A context that has ended still needs the outcome recorded.
	res := o.cfg.DB.WithContext(context.WithoutCancel(ctx)).Model(&Message{}).
		Where("id = ? AND claim = ? AND status = ?", m.ID, m.Claim, StatusPending).Updates(set)
	if res.Error != nil {
		return false, fmt.Errorf("outbox: record %d: %w", m.ID, res.Error)
	}
	return err == nil && res.RowsAffected == 1, nil
}

// Run delivers every interval until ctx ends.
func (o *Outbox) Run(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = 5 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := o.Deliver(ctx); err != nil && ctx.Err() == nil {
			o.cfg.Log.ErrorContext(ctx, "webhook delivery", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
