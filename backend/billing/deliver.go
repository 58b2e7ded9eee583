package billing

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/webhook"
)

// Alert delivery: every notification (alerts.go) is also POSTed, as JSON, to its account's
// alert webhook URL, best effort. Each replica may run it: a notification is claimed by a
// conditional update before it is sent, so two replicas never send the same one, and it is put
// back when the send fails, for a later round. A URL that fails waits before its next try (a
// minute, doubling up to an hour, kept in memory), and notifications older than a day are no
// longer sent: an alert that old is news to nobody. The list in the API shows every
// notification and whether it was delivered.

// AlertSenderConfig configures delivery.
type AlertSenderConfig struct {
	// AllowPrivate lets webhooks reach loopback, private and link-local addresses. Off, a team
	// cannot make the server POST into the operator's own network (the check is on the address
	// actually dialled, so DNS cannot get around it).
	AllowPrivate bool
	Timeout      time.Duration // per POST; 5 s when 0
	MaxAge       time.Duration // older notifications are not sent; 24 h when 0
	Batch        int           // notifications per round; 100 when 0
}

// AlertSender delivers notifications to webhooks.
type AlertSender struct {
	db     *gorm.DB
	clock  clock.Clock
	log    *slog.Logger
	cfg    AlertSenderConfig
	client *http.Client

	mu      sync.Mutex
	backoff map[string]retry // by URL
}

type retry struct {
	next time.Time
	wait time.Duration
}

// NewAlertSender returns an alert sender.
func NewAlertSender(db *gorm.DB, clk clock.Clock, log *slog.Logger, cfg AlertSenderConfig) *AlertSender {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 24 * time.Hour
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 100
	}
	client := webhook.Client(cfg.AllowPrivate, cfg.Timeout)
	return &AlertSender{db: db, clock: clk, log: log, cfg: cfg, client: client, backoff: map[string]retry{}}
}

// AlertJSON is the body POSTed to an alert webhook.
type AlertJSON struct {
	ID        int64     `json:"id"`
	Org       string    `json:"org"`
	Kind      string    `json:"kind"`
	Message   string    `json:"message"`
	CreatedAt time.Time `json:"created_at"`
}

// DeliverAlerts sends one round of undelivered notifications and returns how many were
// delivered.
func (d *AlertSender) DeliverAlerts(ctx context.Context) (int, error) {
	now := d.clock.Now().UTC()
	var due []struct {
		Notification
		URL string
		Org string
	}
	err := d.db.WithContext(ctx).Table("billing_notifications").
		Select("billing_notifications.*, billing_accounts.alert_webhook_url AS url, orgs.name AS org").
		Joins("JOIN billing_accounts ON billing_accounts.id = billing_notifications.account_id").
		Joins("JOIN orgs ON orgs.id = billing_accounts.org_id").
		Where("billing_notifications.delivered = ? AND billing_notifications.created_at >= ? AND billing_accounts.alert_webhook_url <> ?",
			false, now.Add(-d.cfg.MaxAge), "").
		Order("billing_notifications.id").Limit(d.cfg.Batch).Scan(&due).Error
	if err != nil {
		return 0, fmt.Errorf("billing: alerts to deliver: %w", err)
	}
	sent := 0
	for _, n := range due {
		if !d.ready(n.URL, now) {
			continue
		}
		claim := d.db.WithContext(ctx).Model(&Notification{}).Where("id = ? AND delivered = ?", n.ID, false).Update("delivered", true)
		if claim.Error != nil {
			return sent, fmt.Errorf("billing: claim notification %d: %w", n.ID, claim.Error)
		}
		if claim.RowsAffected == 0 {
			continue // another replica has it
		}
		err := d.post(ctx, n.URL, AlertJSON{ID: n.ID, Org: n.Org, Kind: n.Kind, Message: n.Message, CreatedAt: n.CreatedAt})
		d.record(n.URL, now, err)
		if err != nil {
			d.log.WarnContext(ctx, "billing alert webhook failed; retrying later", "notification", n.ID, "org", n.Org, "err", err)
			// Put it back for a later round; a context that has ended still needs the row back.
			back := d.db.WithContext(context.WithoutCancel(ctx)).Model(&Notification{}).Where("id = ?", n.ID).Update("delivered", false)
			if back.Error != nil {
				return sent, fmt.Errorf("billing: release notification %d: %w", n.ID, back.Error)
			}
			continue
		}
		sent++
	}
	return sent, nil
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

// ready reports whether a URL may be tried now.
func (d *AlertSender) ready(target string, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !now.Before(d.backoff[target].next)
}

// record updates a URL's backoff after a try.
func (d *AlertSender) record(target string, now time.Time, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil {
		delete(d.backoff, target)
		return
	}
	r := d.backoff[target]
	r.wait = min(max(2*r.wait, time.Minute), time.Hour)
	r.next = now.Add(r.wait)
	d.backoff[target] = r
}

// Run delivers alerts every interval until ctx ends.
func (d *AlertSender) Run(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = 5 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := d.DeliverAlerts(ctx); err != nil && ctx.Err() == nil {
			d.log.ErrorContext(ctx, "billing alert delivery", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
