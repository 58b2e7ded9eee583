package artifacts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/outbox"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/secrets"
	"github.com/nimbus-build/nimbus/backend/webhook"
	"github.com/nimbus-build/nimbus/internal/backoff"
)

// Publish webhooks: a repo may name one URL that hears of every new model version, so an
// inference deployment rolls forward on it. The version's creation (its first file) writes a
// delivery in the same transaction — exactly one per version (unique), never for a build's
// hand-off versions or release files. The Publisher sends it once the version has had no new
// file for Settle (a pipeline pushes a version's files one after another), as a POST of
// PublishJSON signed with the hook's secret (X-Nimbus-Signature: sha256=<hex HMAC-SHA256 of
// the body>) and named by X-Nimbus-Delivery (a receiver's idempotency key). The delivery row
// is the record the dashboard lists (attempts, codes, errors); the sending goes through the
// webhook outbox (backend/outbox): the version's transaction enqueues a KindPublish message
// with the delivery, and the outbox's loop calls deliverPublish, which waits (outbox.NotYet)
// while the version still settles. A failed POST is retried with backoff (30 s doubling to an
// hour) up to MaxPublishAttempts, then marked failed. Sends go through the same dial-time
// guard against private addresses as billing's alert webhooks.

// KindPublish is the outbox kind of publish webhooks; the message's Ref is the delivery's id.
const KindPublish = "artifacts.publish"

// Delivery statuses.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)

// MaxPublishAttempts bounds the tries of one delivery.
const MaxPublishAttempts = 8

// PublishHook is a repo's publish webhook (migration 00023). Secret is sealed (package secrets).
type PublishHook struct {
	ID        int64     `gorm:"primaryKey"`
	RepoID    int64     `gorm:"not null"`
	URL       string    `gorm:"not null"`
	Secret    []byte    `gorm:"not null"`
	CreatedAt time.Time `gorm:"not null"`
	UpdatedAt time.Time `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (PublishHook) TableName() string { return "artifact_publish_hooks" }

// PublishDelivery is one version's notification.
type PublishDelivery struct {
	ID           int64     `gorm:"primaryKey"`
	RepoID       int64     `gorm:"not null"`
	VersionID    int64     `gorm:"not null"`
	Package      string    `gorm:"not null"`
	Version      string    `gorm:"not null"`
	Status       string    `gorm:"not null"`
	Attempts     int       `gorm:"not null"`
	ResponseCode int       `gorm:"not null"`
	Error        string    `gorm:"not null"`
	DueAt        time.Time `gorm:"not null"`
	CreatedAt    time.Time `gorm:"not null"`
	DeliveredAt  *time.Time
}

// TableName implements gorm's Tabler.
func (PublishDelivery) TableName() string { return "artifact_publish_deliveries" }

// enqueuePublish writes the delivery of a version just created, in its transaction, when the
// repo has a publish webhook.
func enqueuePublish(tx *gorm.DB, repoID int64, pkg string, ver *Version, now time.Time) error {
	if ver.BuildScoped || pkg == ReleasePackage {
		return nil
	}
	var n int64
	if err := tx.Model(&PublishHook{}).Where("repo_id = ?", repoID).Count(&n).Error; err != nil || n == 0 {
		return err
	}
	d := PublishDelivery{RepoID: repoID, VersionID: ver.ID, Package: pkg, Version: ver.Version, Status: DeliveryPending,
		DueAt: now, CreatedAt: now}
	res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&d)
	if res.Error != nil || res.RowsAffected == 0 {
		return res.Error // the version's delivery was written already
	}
	return outbox.Enqueue(tx.Statement.Context, tx, KindPublish, d.ID, now)
}

// PublishFileJSON is a file of a published version.
type PublishFileJSON struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// PublishJSON is the body of a publish webhook.
type PublishJSON struct {
	Event    string            `json:"event"` // model.published
	Delivery int64             `json:"delivery"`
	Repo     string            `json:"repo"`
	Package  string            `json:"package"`
	Version  string            `json:"version"`
	Commit   string            `json:"commit"`
	Build    *int64            `json:"build"` // the build number; nil when a person pushed
	Files    []PublishFileJSON `json:"files"`
	// Provenance is the reproducibility record of the pipeline that pushed the version (nil
	// when a person pushed it).
	Provenance  *string   `json:"provenance"`
	PublishedAt time.Time `json:"published_at"`
}

// PublisherConfig configures publish deliveries.
type PublisherConfig struct {
	DB        *gorm.DB
	Outbox    *outbox.Outbox
	Repos     *repo.Service
	Box       *secrets.Box
	Clock     clock.Clock
	Log       *slog.Logger
	PublicURL string
	// AllowPrivate lets publish webhooks reach loopback and private addresses.
	AllowPrivate bool
	// Settle is how long a version must go without a new file before it is announced (5 s
	// when 0); Timeout bounds one POST (5 s when 0).
	Settle, Timeout time.Duration
}

// Publisher sends publish deliveries and serves the webhooks' API.
type Publisher struct {
	cfg    PublisherConfig
	client *http.Client
}

// NewPublisher returns a publisher, registered as the outbox's handler of KindPublish.
func NewPublisher(cfg PublisherConfig) *Publisher {
	if cfg.Settle <= 0 {
		cfg.Settle = 5 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	p := &Publisher{cfg: cfg, client: webhook.Client(cfg.AllowPrivate, cfg.Timeout)}
	cfg.Outbox.Register(KindPublish, outbox.Kind{Handle: p.deliverPublish, Retry: publishRetry(), MaxAttempts: MaxPublishAttempts})
	return p
}

func sealContext(repoID int64) string {
	return "artifact-publish-hook:" + strconv.FormatInt(repoID, 10)
}

// publishRetry is the wait after a failed try: 30 s doubling to an hour.
func publishRetry() backoff.Policy { return backoff.Policy{Initial: 30 * time.Second, Max: time.Hour} }

// deliverPublish sends the delivery m names once its version has settled, and keeps the
// delivery's record of the attempt in step with the outbox's decision.
func (p *Publisher) deliverPublish(ctx context.Context, m outbox.Message) error {
	db := p.cfg.DB.WithContext(ctx)
	now := p.cfg.Clock.Now().UTC()
	var d PublishDelivery
	if err := db.Where("id = ?", m.Ref).Take(&d).Error; errors.Is(err, gorm.ErrRecordNotFound) {
		return outbox.Permanent(fmt.Errorf("publish delivery %d is gone", m.Ref))
	} else if err != nil {
		return fmt.Errorf("artifacts: publish delivery: %w", err)
	}
	if d.Status != DeliveryPending {
		return nil
	}
	var hooks int64
	if err := db.Model(&PublishHook{}).Where("repo_id = ?", d.RepoID).Count(&hooks).Error; err != nil {
		return fmt.Errorf("artifacts: publish hook: %w", err)
	}
	if hooks == 0 {
		return outbox.NotYet(time.Minute, "the repo has no publish webhook")
	}
	var recent int64
	if err := db.Model(&File{}).Where("version_id = ? AND created_at > ?", d.VersionID, now.Add(-p.cfg.Settle)).Count(&recent).Error; err != nil {
		return fmt.Errorf("artifacts: the version's recent files: %w", err)
	}
	if recent > 0 {
		return outbox.NotYet(p.cfg.Settle, "the version is still receiving files")
	}
	code, err := p.send(ctx, &d)
	attempt := m.Attempts + 1
	set := map[string]any{"attempts": attempt, "response_code": code, "error": ""}
	switch {
	case err == nil:
		set["status"], set["delivered_at"] = DeliveryDelivered, now
	case errors.Is(err, errVersionGone) || attempt >= MaxPublishAttempts:
		set["status"], set["error"] = DeliveryFailed, err.Error()
		err = outbox.Permanent(err)
	default:
		set["error"], set["due_at"] = err.Error(), now.Add(publishRetry().After(attempt))
	}
	// A context that has ended still needs the attempt recorded.
	if uerr := p.cfg.DB.WithContext(context.WithoutCancel(ctx)).Model(&PublishDelivery{}).Where("id = ?", d.ID).Updates(set).Error; uerr != nil {
		return errors.Join(err, fmt.Errorf("artifacts: record publish delivery %d: %w", d.ID, uerr))
	}
	return err
}

var errVersionGone = errors.New("the version was deleted before it was announced")

// send POSTs one delivery and returns the receiver's status code.
func (p *Publisher) send(ctx context.Context, d *PublishDelivery) (int, error) {
	db := p.cfg.DB.WithContext(ctx)
	var hook PublishHook
	if err := db.Where("repo_id = ?", d.RepoID).Take(&hook).Error; err != nil {
		return 0, err
	}
	secret, err := p.cfg.Box.Open(hook.Secret, sealContext(d.RepoID))
	if err != nil {
		return 0, fmt.Errorf("the webhook's secret: %w", err)
	}
	var ver Version
	if err := db.Where("id = ?", d.VersionID).Take(&ver).Error; errors.Is(err, gorm.ErrRecordNotFound) {
		return 0, errVersionGone
	} else if err != nil {
		return 0, err
	}
	var files []File
	if err := db.Where("version_id = ?", ver.ID).Order("name").Find(&files).Error; err != nil {
		return 0, err
	}
	r, o, err := p.cfg.Repos.ByID(ctx, d.RepoID)
	if err != nil {
		return 0, err
	}
	slug := o.Name + "/" + r.Name
	body := PublishJSON{Event: "model.published", Delivery: d.ID, Repo: slug, Package: d.Package, Version: ver.Version,
		Commit: ver.CommitSHA, Build: ver.BuildNumber, Files: []PublishFileJSON{}, PublishedAt: ver.CreatedAt.UTC()}
	for _, f := range files {
		body.Files = append(body.Files, PublishFileJSON{Name: f.Name, Size: f.Size, SHA256: f.Digest})
	}
	if ver.PipelineID != nil {
		u := p.cfg.PublicURL + "/api/v1/repos/" + slug + "/pipelines/" + strconv.FormatInt(*ver.PipelineID, 10) + "/record"
		body.Provenance = &u
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook.URL, bytes.NewReader(raw))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Nimbus-Publish-Webhook/1")
	req.Header.Set("X-Nimbus-Event", "model.published")
	req.Header.Set("X-Nimbus-Delivery", strconv.FormatInt(d.ID, 10))
	req.Header.Set("X-Nimbus-Signature", webhook.Sign(secret, raw))
	res, err := p.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("POST %s: %w", webhook.Redact(hook.URL), errors.Unwrap(err))
	}
	defer res.Body.Close()
	io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return res.StatusCode, fmt.Errorf("%s answered %s", webhook.Redact(hook.URL), res.Status)
	}
	return res.StatusCode, nil
}

// ---- API: the repo's publish webhook (repo admin) --------------------------------------------

// PublishHookJSON is a repo's publish webhook. Secret is shown only in the answer to the PUT
// that set it.
type PublishHookJSON struct {
	URL       string    `json:"url"`
	Secret    string    `json:"secret,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// PublishDeliveryJSON is a delivery as the API shows it.
type PublishDeliveryJSON struct {
	ID           int64      `json:"id"`
	Package      string     `json:"package"`
	Version      string     `json:"version"`
	Status       string     `json:"status"`
	Attempts     int        `json:"attempts"`
	ResponseCode int        `json:"response_code"`
	Error        string     `json:"error"`
	CreatedAt    time.Time  `json:"created_at"`
	DeliveredAt  *time.Time `json:"delivered_at"`
	NextAttempt  *time.Time `json:"next_attempt_at"`
}
