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
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/runnerclass"
	"github.com/nimbus-build/nimbus/backend/webhook"
)

// Handler serves the billing routes. Everything under /orgs/{org}/billing is for the org's
// members with the billing, admin or owner role (others 403, non-members 404, like the rest of
// the org's settings), through a credential with billing:read, or billing:write for changes.
type Handler struct {
	svc    *Service
	orgs   *org.Service
	stripe *Stripe
	cfg    HandlerConfig
	log    *slog.Logger
}

// HandlerConfig holds the settings of the billing routes.
type HandlerConfig struct {
	// AllowPrivateWebhooks accepts alert webhook URLs on loopback and private addresses
	// (AlertSenderConfig.AllowPrivate: the same setting).
	AllowPrivateWebhooks bool
	// Classes are the server's runner classes, for the pricing (runnerclass.Defaults).
	Classes []runnerclass.Class
	// ZoneName is the billing time zone as configured (NIMBUS_TIMEZONE), for people.
	ZoneName string
	// Admins lists the platform admins' usernames: who to ask for credit.
	Admins func(context.Context) ([]string, error)
}

// NewHandler returns the billing HTTP handler.
func NewHandler(svc *Service, orgs *org.Service, st *Stripe, cfg HandlerConfig, log *slog.Logger) *Handler {
	return &Handler{svc: svc, orgs: orgs, stripe: st, cfg: cfg, log: log}
}

// Routes implements server.Module.
func (h *Handler) Routes(_ *gin.Engine, v1 *gin.RouterGroup) {
	rs := api.NewRoutes(v1, h.log)
	rs.GET("/orgs/:org/billing", h.summary)
	rs.PUT("/orgs/:org/billing/settings", h.settings)
	rs.GET("/orgs/:org/billing/usage", h.usage)
	rs.GET("/orgs/:org/billing/ledger", newestFirst(h, h.svc.Ledger, entryJSON, func(e EntryJSON) int64 { return e.ID }))
	rs.GET("/orgs/:org/billing/statements/:month", h.statement)
	rs.GET("/orgs/:org/billing/notifications", newestFirst(h, h.svc.Notifications, notificationJSON,
		func(n NotificationJSON) int64 { return n.ID }))
	rs.POST("/orgs/:org/billing/topups", h.topup)
	rs.POST("/admin/orgs/:org/credits", h.grant)
	rs.POST("/billing/stripe/webhook", h.webhook)
	rs.GET("/pricing", h.pricing)
}

// load authorizes the caller for the billing account of the route's :org.
func (h *Handler) load(c *gin.Context, write bool) (*org.Org, *Account, error) {
	p := auth.From(c)
	if p.User == nil {
		if p.Authenticated() {
			return nil, nil, org.NotFound(c.Param("org"))
		}
		return nil, nil, fault.Unauthenticated("sign in or send a token")
	}
	o, role, err := h.orgs.Access(c.Request.Context(), p, c.Param("org"))
	if err != nil {
		return nil, nil, err
	}
	scope := auth.ScopeBillingRead
	if write {
		scope = auth.ScopeBillingWrite
	}
	if err := p.Need(scope); err != nil {
		return nil, nil, err
	}
	if !role.CanBilling() {
		return nil, nil, fault.Forbidden("billing needs the billing, admin or owner role in %s (you are %s)", o.Name, role)
	}
	a, err := h.svc.AccountOf(c.Request.Context(), o.ID)
	if err != nil {
		return nil, nil, err
	}
	return o, a, nil
}

// SummaryJSON is an account as GET …/billing shows it. Money is a decimal string with 4 places.
// FreeQuota is the builds' bucket, WorkspaceFreeQuota the workspaces'; MonthSpent and
// MonthWrittenOff add up both buckets (what the cap counts), MonthByBucket splits them.
type SummaryJSON struct {
	Currency            string           `json:"currency"`
	Balance             string           `json:"balance"`
	Frozen              string           `json:"frozen"`
	FreeQuota           QuotaJSON        `json:"free_quota"`
	WorkspaceFreeQuota  QuotaJSON        `json:"workspace_free_quota"`
	Month               string           `json:"month"`
	MonthSpent          string           `json:"month_spent"`
	MonthWrittenOff     string           `json:"month_written_off"`
	MonthByBucket       MonthBucketsJSON `json:"month_by_bucket"`
	SpendingCap         *string          `json:"spending_cap"`
	LowBalanceThreshold *string          `json:"low_balance_threshold"`
	AlertWebhookURL     string           `json:"alert_webhook_url"`
	Topups              TopupsJSON       `json:"topups"`
	// TimeZone is the billing time zone that decides days and months ("Asia/Shanghai,
	// UTC+08:00"); usage dates and the month are in it.
	TimeZone string `json:"time_zone"`
	// CreditFrom names who can grant credit when top-ups are off: the platform admins.
	CreditFrom []string `json:"credit_from"`
}

// MonthBucketsJSON is the month's spending of each bucket.
type MonthBucketsJSON struct {
	Build     SpendingJSON `json:"build"`
	Workspace SpendingJSON `json:"workspace"`
}

// SpendingJSON is what one bucket's pipelines settled this month paid and had written off.
type SpendingJSON struct {
	Spent      string `json:"spent"`
	WrittenOff string `json:"written_off"`
}

func spendingJSON(sp Spending) SpendingJSON {
	return SpendingJSON{Spent: sp.Paid.Display(), WrittenOff: sp.WrittenOff.Display()}
}

// QuotaJSON is the month's free CPU quota of one bucket.
type QuotaJSON struct {
	TotalCoreSeconds  int64 `json:"total_core_seconds"`
	UsedCoreSeconds   int64 `json:"used_core_seconds"`
	FrozenCoreSeconds int64 `json:"frozen_core_seconds"`
	LeftCoreSeconds   int64 `json:"left_core_seconds"`
}

// TopupsJSON says whether and how much an account can top up.
type TopupsJSON struct {
	Enabled bool   `json:"enabled"`
	Min     string `json:"min"`
	Max     string `json:"max"`
}

func display(a *Amount) *string {
	if a == nil {
		return nil
	}
	s := a.Display()
	return &s
}

// quota is the month's use of bucket's free quota.
func (h *Handler) quota(ctx context.Context, a *Account, bucket Bucket) (QuotaJSON, error) {
	q, err := h.svc.Quota(ctx, a.ID, bucket)
	if err != nil {
		return QuotaJSON{}, err
	}
	total := h.svc.Config().FreeQuota(bucket)
	return QuotaJSON{TotalCoreSeconds: total, UsedCoreSeconds: q.UsedCoreSeconds, FrozenCoreSeconds: q.FrozenCoreSeconds,
		LeftCoreSeconds: max(0, total-q.UsedCoreSeconds-q.FrozenCoreSeconds)}, nil
}

func (h *Handler) summarize(c *gin.Context, a *Account) (*SummaryJSON, error) {
	ctx := c.Request.Context()
	month := h.svc.Month()
	builds, err := h.quota(ctx, a, BucketBuild)
	if err != nil {
		return nil, err
	}
	workspaces, err := h.quota(ctx, a, BucketWorkspace)
	if err != nil {
		return nil, err
	}
	spent, err := h.svc.MonthSpending(ctx, a.ID)
	if err != nil {
		return nil, err
	}
	byBucket, err := h.svc.MonthSpendingByBucket(ctx, a.ID)
	if err != nil {
		return nil, err
	}
	buckets := MonthBucketsJSON{Build: spendingJSON(byBucket[BucketBuild]), Workspace: spendingJSON(byBucket[BucketWorkspace])}
	lo, hi := h.stripe.Bounds()
	admins := []string{}
	if h.cfg.Admins != nil && !h.stripe.Enabled() {
		if admins, err = h.cfg.Admins(ctx); err != nil {
			return nil, err
		}
	}
	return &SummaryJSON{
		Currency: a.Currency, Balance: a.Balance.Display(), Frozen: a.Frozen.Display(),
		FreeQuota: builds, WorkspaceFreeQuota: workspaces,
		Month: month, MonthSpent: spent.Paid.Display(), MonthWrittenOff: spent.WrittenOff.Display(), MonthByBucket: buckets,
		SpendingCap: display(a.SpendingCap), LowBalanceThreshold: display(a.LowBalanceThreshold), AlertWebhookURL: a.AlertWebhookURL,
		Topups:   TopupsJSON{Enabled: h.stripe.Enabled(), Min: lo.Display(), Max: hi.Display()},
		TimeZone: ZoneLabel(h.svc.cfg.Location, h.cfg.ZoneName, h.svc.clock.Now()), CreditFrom: admins,
	}, nil
}

func (h *Handler) summary(c *gin.Context) error {
	_, a, err := h.load(c, false)
	if err != nil {
		return err
	}
	out, err := h.summarize(c, a)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, out)
}

// settings changes the account's controls. A field left out keeps its value; null clears it.
func (h *Handler) settings(c *gin.Context) error {
	_, a, err := h.load(c, true)
	if err != nil {
		return err
	}
	var req struct {
		SpendingCap         json.RawMessage `json:"spending_cap"`
		LowBalanceThreshold json.RawMessage `json:"low_balance_threshold"`
		AlertWebhookURL     json.RawMessage `json:"alert_webhook_url"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	var ch Settings
	if ch.SpendingCap, err = amountSetting("spending_cap", req.SpendingCap); err != nil {
		return err
	}
	if ch.LowBalanceThreshold, err = amountSetting("low_balance_threshold", req.LowBalanceThreshold); err != nil {
		return err
	}
	if ch.AlertWebhookURL, err = h.webhookSetting(req.AlertWebhookURL); err != nil {
		return err
	}
	if a, err = h.svc.ChangeSettings(c.Request.Context(), a.ID, ch); err != nil {
		return err
	}
	out, err := h.summarize(c, a)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, out)
}

// nullable reads a field that is left out (nil, false), null ("", true, nil) or a string.
func nullable(field string, raw json.RawMessage) (s *string, set bool, err error) {
	if raw == nil {
		return nil, false, nil
	}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, true, nil
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, false, fault.BadRequest("field %q must be a string or null", field)
	}
	return &v, true, nil
}

// amountSetting reads a money setting: a decimal string ≥ 0, or null.
func amountSetting(field string, raw json.RawMessage) (**Amount, error) {
	s, set, err := nullable(field, raw)
	if err != nil || !set {
		return nil, err
	}
	var v *Amount
	if s != nil {
		a, err := ParseAmount(*s)
		if err != nil {
			return nil, fault.Invalid(field, "%s must be a decimal amount of at least 0 such as \"100.00\", or null", field)
		}
		v = &a
	}
	return &v, nil
}

// webhookSetting reads the alert webhook URL: an http(s) URL, or null or "" to clear it.
func (h *Handler) webhookSetting(raw json.RawMessage) (*string, error) {
	s, set, err := nullable("alert_webhook_url", raw)
	if err != nil || !set {
		return nil, err
	}
	v := ""
	if s != nil {
		v = strings.TrimSpace(*s)
	}
	if v == "" {
		return &v, nil
	}
	if bad := webhook.CheckURL(v, h.cfg.AllowPrivateWebhooks); bad != "" {
		return nil, fault.Invalid("alert_webhook_url", "alert_webhook_url %s, or null", bad)
	}
	return &v, nil
}

// UsageJSON is one day × bucket × runner class × repo of settled use.
type UsageJSON struct {
	Date             string `json:"date"`
	Bucket           string `json:"bucket"` // "build" or "workspace"
	RunnerClass      string `json:"runner_class"`
	RepoID           int64  `json:"repo_id"`
	Repo             string `json:"repo"`
	Pipelines        int    `json:"pipelines"`
	CoreSeconds      int64  `json:"core_seconds"`
	QuotaCoreSeconds int64  `json:"quota_core_seconds"`
	Cost             string `json:"cost"`        // what was paid
	WrittenOff       string `json:"written_off"` // what the platform wrote off beside it
}

// usage lists settled use from ?from= to ?to= (dates in the billing time zone, inclusive;
// default: this month so far). The list pages like every other; the cursor is a position in it.
func (h *Handler) usage(c *gin.Context) error {
	_, a, err := h.load(c, false)
	if err != nil {
		return err
	}
	// Not api.ListAll: the sort key is a row's position (usageKey), known only once the list is
	// read.
	page, err := api.ParsePage(c)
	if err != nil {
		return err
	}
	now := h.svc.clock.Now().In(h.svc.cfg.Location)
	from, to := c.Query("from"), c.Query("to")
	if from == "" {
		from = h.svc.Month() + "-01"
	}
	if to == "" {
		to = now.Format(time.DateOnly)
		if to < from {
			to = from
		}
	}
	rows, err := h.svc.Usage(c.Request.Context(), a.ID, from, to)
	if err != nil {
		return err
	}
	out := make([]UsageJSON, 0, len(rows))
	for _, r := range rows {
		out = append(out, UsageJSON{Date: r.Day, Bucket: string(r.Bucket), RunnerClass: r.Class, RepoID: r.RepoID, Repo: r.Repo, Pipelines: r.Pipelines,
			CoreSeconds: r.CoreSeconds, QuotaCoreSeconds: r.QuotaCoreSeconds, Cost: r.Cost.Display(), WrittenOff: r.WrittenOff.Display()})
	}
	return api.JSON(c, http.StatusOK, api.Paginate(page, out, usageKey(out)))
}

// usageKey makes the position (1, 2, …) of a row its sort key, so Paginate can page the list.
func usageKey(rows []UsageJSON) func(UsageJSON) int64 {
	pos := make(map[UsageJSON]int64, len(rows))
	for i, r := range rows {
		pos[r] = int64(i + 1)
	}
	return func(r UsageJSON) int64 { return pos[r] }
}

// EntryJSON is a ledger transaction. amount is what it moved (for a settlement, what the account
// paid) and written_off what the platform absorbed beside it; balance_change and frozen_change
// are its effect on the account's balance and frozen money (negative when they went down). A
// settlement also says how long its pipeline ran past its last covered window (uncovered_ms;
// null for other kinds). The ledger shows amounts exactly (8 decimals), so its entries add up to
// the balance to the unit; summaries round to 4. An entry of a pipeline names its build (repo,
// "org/name", and build_number), what its link /{org}/{repo}/builds/{number}?pipeline={id}
// needs; both are null for other entries and for a pipeline whose repo was deleted.
type EntryJSON struct {
	ID            int64     `json:"id"`
	Kind          string    `json:"kind"`
	Amount        string    `json:"amount"`
	WrittenOff    string    `json:"written_off"`
	BalanceChange string    `json:"balance_change"`
	FrozenChange  string    `json:"frozen_change"`
	PipelineID    *int64    `json:"pipeline_id"`
	Repo          *string   `json:"repo"`
	BuildNumber   *int64    `json:"build_number"`
	UncoveredMs   *int64    `json:"uncovered_ms"`
	Note          string    `json:"note"`
	CreatedAt     time.Time `json:"created_at"`
}

func entryJSON(e *Entry) EntryJSON {
	out := EntryJSON{ID: e.ID, Kind: e.Kind, Amount: e.Amount.String(), WrittenOff: e.WrittenOff.String(), BalanceChange: e.BalanceChange.String(),
		FrozenChange: e.FrozenChange.String(), PipelineID: e.PipelineID, Note: e.Note, CreatedAt: e.CreatedAt.UTC()}
	if e.Uncovered != nil {
		ms := e.Uncovered.Milliseconds()
		out.UncoveredMs = &ms
	}
	if e.Build != nil {
		repo, number := e.Build.Repo, e.Build.Number
		out.Repo, out.BuildNumber = &repo, &number
	}
	return out
}

// newestFirst serves a page of one of the account's lists (the ledger, the notifications),
// which fetch returns newest first, with up to one more row than the page holds.
func newestFirst[T, J any](h *Handler, fetch func(context.Context, int64, api.Page) ([]T, error), view func(*T) J, id func(J) int64) api.HandlerFunc {
	return func(c *gin.Context) error {
		_, a, err := h.load(c, false)
		if err != nil {
			return err
		}
		return api.ListPage(c, func(page api.Page) ([]J, error) {
			rows, err := fetch(c.Request.Context(), a.ID, page)
			if err != nil {
				return nil, err
			}
			out := make([]J, 0, len(rows))
			for i := range rows {
				out = append(out, view(&rows[i]))
			}
			return out, nil
		}, id)
	}
}

// statement answers a month's statement as CSV. It is built in memory first, so a failure
// midway is still an error envelope rather than half a file.
func (h *Handler) statement(c *gin.Context) error {
	o, a, err := h.load(c, false)
	if err != nil {
		return err
	}
	month := c.Param("month")
	var buf bytes.Buffer
	if err := h.svc.Statement(c.Request.Context(), a, month, &buf); err != nil {
		return err
	}
	c.Header("Content-Disposition", fmt.Sprintf(`attachment; filename="%s-%s.csv"`, o.Name, month))
	c.Data(http.StatusOK, "text/csv; charset=utf-8", buf.Bytes())
	return nil
}

// NotificationJSON is an alert of the account.
type NotificationJSON struct {
	ID        int64     `json:"id"`
	Kind      string    `json:"kind"`
	Message   string    `json:"message"`
	Delivered bool      `json:"delivered"`
	CreatedAt time.Time `json:"created_at"`
}

func notificationJSON(n *Notification) NotificationJSON {
	return NotificationJSON{ID: n.ID, Kind: n.Kind, Message: n.Message, Delivered: n.Delivered, CreatedAt: n.CreatedAt.UTC()}
}

// parseMoney reads a positive decimal amount from a request field.
func parseMoney(field, s string) (Amount, error) {
	a, err := ParseAmount(s)
	if err != nil || a <= 0 {
		return 0, fault.Invalid(field, "%s must be a decimal amount above 0 such as \"100.00\"", field)
	}
	return a, nil
}

// topup starts a Stripe Checkout for the amount and returns the page to pay on.
func (h *Handler) topup(c *gin.Context) error {
	o, a, err := h.load(c, true)
	if err != nil {
		return err
	}
	var req struct {
		Amount string `json:"amount"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	amount, err := parseMoney("amount", req.Amount)
	if err != nil {
		return err
	}
	co, err := h.stripe.Checkout(c.Request.Context(), a, o.Name, amount)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusCreated, gin.H{"checkout_url": co.URL, "session_id": co.SessionID, "amount": amount.Display(), "currency": a.Currency})
}

// maxNote bounds a grant's note.
const maxNote = 500

// grant credits an org's account: platform admins only. An Idempotency-Key header makes a
// retried request return the first grant (200) instead of granting again.
func (h *Handler) grant(c *gin.Context) error {
	p := auth.From(c)
	if !p.Authenticated() {
		return fault.Unauthenticated("sign in or send a token")
	}
	if !p.IsPlatformAdmin() {
		return fault.Forbidden("only platform admins grant credit (a token needs the admin scope)")
	}
	o, err := h.orgs.ByName(c.Request.Context(), c.Param("org"))
	if err != nil {
		return err
	}
	a, err := h.svc.AccountOf(c.Request.Context(), o.ID)
	if err != nil {
		return err
	}
	var req struct {
		Amount string `json:"amount"`
		Note   string `json:"note"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	amount, err := parseMoney("amount", req.Amount)
	if err != nil {
		return err
	}
	note := strings.TrimSpace(req.Note)
	if len(note) > maxNote || strings.ContainsAny(note, "\r\n\x00") {
		return fault.Invalid("note", "note must be one line of at most %d bytes", maxNote)
	}
	key := c.GetHeader("Idempotency-Key")
	if len(key) > 200 || strings.Trim(key, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:") != "" {
		return fault.BadRequest("Idempotency-Key must be at most 200 letters, digits and -_.:")
	}
	// Who granted is part of the record.
	full := "granted by " + p.User.Username
	if note != "" {
		full += ": " + note
	}
	e, created, err := h.svc.Grant(c.Request.Context(), a.ID, amount, key, full)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		h.log.InfoContext(c.Request.Context(), "billing: credit granted", "org", o.Name, "amount", amount.Display(), "by", p.User.Username)
	}
	return api.JSON(c, status, entryJSON(e))
}

// webhook is Stripe's endpoint: no Nimbus credentials, the Stripe-Signature header instead.
func (h *Handler) webhook(c *gin.Context) error {
	payload, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, api.MaxJSONBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return fault.TooLarge("request body exceeds %d bytes", api.MaxJSONBody)
		}
		return fault.BadRequest("reading the body: %v", err)
	}
	if err := h.stripe.HandleWebhook(c.Request.Context(), payload, c.GetHeader("Stripe-Signature")); err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, gin.H{"received": true})
}

// pricing answers GET /pricing to anyone signed in or holding a token.
func (h *Handler) pricing(c *gin.Context) error {
	if !auth.From(c).Authenticated() {
		return fault.Unauthenticated("sign in or send a token")
	}
	return api.JSON(c, http.StatusOK, h.svc.Pricing(h.cfg.Classes, h.cfg.ZoneName))
}
