package billing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/outbox"
	"github.com/nimbus-build/nimbus/backend/webhook"
	"github.com/nimbus-build/nimbus/internal/backoff"
)

// Alert delivery: every notification (alerts.go) is also POSTed, as JSON, to its account's
// alert webhook URL, best effort, through the webhook outbox (backend/outbox): notify enqueues
// the message in the notification's own transaction, and the outbox's loop, on every replica,
// claims it with a fenced update and calls deliverAlert. The URL is read when the message is
// sent, so an alert recorded before the account had a URL reaches the URL set later (looked at
// again each minute). A failed send waits before its next try (a minute, doubling up to an
// hour, kept in the outbox's row, so a restart forgets nothing), and notifications older than
// a day are no longer sent: an alert that old is news to nobody. The list in the API shows
// every notification and whether it was delivered.

// KindAlert is the outbox kind of billing alerts; the message's Ref is the notification's id.
const KindAlert = "billing.alert"

// AlertSenderConfig configures delivery.
type AlertSenderConfig struct {
	// AllowPrivate lets webhooks reach loopback, private and link-local addresses. Off, a team
	// cannot make the server POST into the operator's own network (the check is on the address
	// actually dialled, so DNS cannot get around it).
	AllowPrivate bool
	Timeout      time.Duration // per POST; 5 s when 0
	MaxAge       time.Duration // older notifications are not sent; 24 h when 0
}

// AlertSender delivers notifications to webhooks.
type AlertSender struct {
	db     *gorm.DB
	clock  clock.Clock
	log    *slog.Logger
	cfg    AlertSenderConfig
	client *http.Client
}

// NewAlertSender returns an alert sender, registered as the outbox's handler of KindAlert.
func NewAlertSender(db *gorm.DB, clk clock.Clock, log *slog.Logger, box *outbox.Outbox, cfg AlertSenderConfig) *AlertSender {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 24 * time.Hour
	}
	client := webhook.Client(cfg.AllowPrivate, cfg.Timeout)
	d := &AlertSender{db: db, clock: clk, log: log, cfg: cfg, client: client}
	// A minute doubling to an hour: the day of MaxAge, not the attempts, ends the tries.
	box.Register(KindAlert, outbox.Kind{Handle: d.deliverAlert, Retry: backoff.Policy{Initial: time.Minute, Max: time.Hour}, MaxAttempts: 40})
	return d
}

// AlertJSON is the body POSTed to an alert webhook.
type AlertJSON struct {
	ID        int64     `json:"id"`
	Org       string    `json:"org"`
	Kind      string    `json:"kind"`
	Message   string    `json:"message"`
	CreatedAt time.Time `json:"created_at"`
}

// deliverAlert sends the notification m names to its account's URL, and marks it delivered.
func (d *AlertSender) deliverAlert(ctx context.Context, m outbox.Message) error {
	var n struct {
		Notification
		URL string
		Org string
	}
	err := d.db.WithContext(ctx).Table("billing_notifications").
		Select("billing_notifications.*, billing_accounts.alert_webhook_url AS url, orgs.name AS org").
		Joins("JOIN billing_accounts ON billing_accounts.id = billing_notifications.account_id").
		Joins("JOIN orgs ON orgs.id = billing_accounts.org_id").
		Where("billing_notifications.id = ?", m.Ref).Take(&n).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return outbox.Permanent(fmt.Errorf("notification %d is gone", m.Ref))
	case err != nil:
		return fmt.Errorf("billing: alert to deliver: %w", err)
	case n.Delivered:
		return nil
	case n.CreatedAt.Before(d.clock.Now().Add(-d.cfg.MaxAge)):
		return outbox.Permanent(fmt.Errorf("older than %s", d.cfg.MaxAge))
	case n.URL == "":
		return outbox.NotYet(time.Minute, "the account has no alert webhook URL")
	}
	if err := d.post(ctx, n.URL, AlertJSON{ID: n.ID, Org: n.Org, Kind: n.Kind, Message: n.Message, CreatedAt: n.CreatedAt}); err != nil {
		return err
	}
	// The outbox records the delivery; the notification shows it in the API.
	if err := d.db.WithContext(context.WithoutCancel(ctx)).Model(&Notification{}).Where("id = ?", n.ID).Update("delivered", true).Error; err != nil {
		return outbox.Permanent(fmt.Errorf("billing: mark notification %d delivered: %w", n.ID, err))
	}
	return nil
}

func (d *AlertSender) post(ctx context.Context, target string, body AlertJSON) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Nimbus-Billing-Alerts/1")
	res, err := d.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return fmt.Errorf("%s answered %s", webhook.Redact(target), res.Status)
	}
	return nil
}
