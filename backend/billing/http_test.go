package billing_test

// Tests of the billing API through the whole server (app.New, driven in-process through its
// http.Handler). Names start with ht so they cannot collide with the package's other tests.

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/app"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/billing"
	"github.com/nimbus-build/nimbus/backend/build/buildtest"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/config"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

const (
	htPassword      = "purple-monkey-dishwasher-42"
	htWebhookSecret = "whsec_nimbus_test_secret"
	htOrg           = "acme"
	htBase          = "/api/v1/orgs/" + htOrg + "/billing"
)

// htStart is the fake clock's time when a world is made: 08:00 on 1 March in Shanghai.
var htStart = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

type htOptions struct {
	databaseURL     string
	stripe          bool // top-ups through stripe-mock
	privateWebhooks bool // alert webhooks may reach loopback (httptest servers)
}

// htWorld is a server with one team, acme, whose members hold every role, an outsider who owns
// another team, and root, the platform admin. Callers are named by their token.
type htWorld struct {
	t      *testing.T
	ctx    context.Context
	app    *app.App
	h      http.Handler
	clock  *clock.Fake
	org    *org.Org
	tokens map[string]string
	stripe *htCounter
}

// htCounter counts the calls to the Stripe API by method and path.
type htCounter struct {
	mu     sync.Mutex
	calls  map[string]int
	bodies map[string]string // the last body of each call
}

func (c *htCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.calls[r.Method+" "+r.URL.Path]++
	c.keepBody(r)
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (c *htCounter) count(call string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[call]
}

func newHTWorld(t *testing.T, o htOptions) *htWorld {
	t.Helper()
	args := []string{"--data-dir", storetest.DataDir(t, o.databaseURL), "--builtin-agent", "false"}
	if o.databaseURL != "" {
		args = append(args, "--database-url", o.databaseURL)
	}
	if o.stripe {
		args = append(args, "--stripe-secret-key", "sk_test_nimbus", "--stripe-webhook-secret", htWebhookSecret,
			"--stripe-api-url", testenv.StripeURL(t))
	}
	if o.privateWebhooks {
		args = append(args, "--alert-webhook-private=true")
	}
	cfg, _, err := config.Load("nimbus-server", args, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	w := &htWorld{t: t, ctx: context.Background(), clock: clock.NewFake(htStart), tokens: map[string]string{},
		stripe: &htCounter{calls: map[string]int{}, bodies: map[string]string{}}}
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	w.app, err = app.New(w.ctx, cfg, log, app.Options{Version: "test", Clock: w.clock, StripeClient: &http.Client{Transport: w.stripe}, Passwords: auth.CheapPasswords()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			t.Logf("server log:\n%s", logs.String())
			mu.Unlock()
		}
		w.app.Close()
	})
	w.h = w.app.Server.Handler()
	users := map[string]*auth.User{}
	for _, name := range []string{"root", "owner", "admin", "billing", "developer", "reporter", "outsider"} {
		u, err := w.app.Auth.Signup(w.ctx, name, name+"@example.com", htPassword)
		if err != nil {
			t.Fatal(err)
		}
		users[name] = u
	}
	if w.org, err = w.app.Orgs.Create(w.ctx, users["owner"], htOrg); err != nil {
		t.Fatal(err)
	}
	if _, err := w.app.Orgs.Create(w.ctx, users["outsider"], "globex"); err != nil {
		t.Fatal(err)
	}
	for _, r := range []org.Role{org.Admin, org.Billing, org.Developer, org.Reporter} {
		if err := w.app.DB.Create(&org.Member{OrgID: w.org.ID, UserID: users[string(r)].ID, Role: r, CreatedAt: htStart}).Error; err != nil {
			t.Fatal(err)
		}
	}
	full := []string{auth.ScopeRepoRead, auth.ScopeOrgWrite, auth.ScopeBillingRead, auth.ScopeBillingWrite}
	for name, u := range users {
		scopes := full
		if name == "root" {
			scopes = append(scopes, auth.ScopeAdmin)
		}
		w.tokens[name] = w.token(u, scopes...)
	}
	w.tokens["root-noadmin"] = w.token(users["root"], full...)
	w.tokens["owner-repo-read"] = w.token(users["owner"], auth.ScopeRepoRead)
	w.tokens["owner-billing-read"] = w.token(users["owner"], auth.ScopeBillingRead)
	return w
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (w *htWorld) token(u *auth.User, scopes ...string) string {
	w.t.Helper()
	raw, _, err := w.app.Auth.CreateToken(w.ctx, u, "billing-test", scopes, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	return raw
}

// htEachDialect runs fn on a world on SQLite and one on PostgreSQL (skipped, or failed under
// CI=true, without the test cluster).
func htEachDialect(t *testing.T, o htOptions, fn func(t *testing.T, w *htWorld)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, newHTWorld(t, o))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		o := o
		o.databaseURL = storetest.PostgresURL(t)
		fn(t, newHTWorld(t, o))
	})
}

type htResp struct {
	Status int
	Body   []byte
	Header http.Header
}

// do sends a request as the named caller ("" = anonymous); body is JSON unless it is a string.
func (w *htWorld) do(as, method, path string, body any, headers ...string) *htResp {
	w.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			w.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req := httptest.NewRequest(method, path, rd)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if as != "" {
		tok, ok := w.tokens[as]
		if !ok {
			w.t.Fatalf("no caller %q", as)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	w.h.ServeHTTP(rec, req)
	return &htResp{Status: rec.Code, Body: rec.Body.Bytes(), Header: rec.Header()}
}

// json sends a request, checks the status and decodes the body into out (when non-nil).
func (w *htWorld) json(as, method, path string, body any, want int, out any, headers ...string) {
	w.t.Helper()
	r := w.do(as, method, path, body, headers...)
	if r.Status != want {
		w.t.Fatalf("%s %s as %s: %d, want %d: %s", method, path, as, r.Status, want, r.Body)
	}
	if out != nil {
		if err := json.Unmarshal(r.Body, out); err != nil {
			w.t.Fatalf("%s %s: decode %s: %v", method, path, r.Body, err)
		}
	}
}

func (w *htWorld) account() *billing.Account {
	w.t.Helper()
	a, err := w.app.Billing.AccountOf(w.ctx, w.org.ID)
	if err != nil {
		w.t.Fatal(err)
	}
	return a
}

// grant credits acme through the admin API.
func (w *htWorld) grant(amount string) {
	w.t.Helper()
	w.json("root", "POST", "/api/v1/admin/orgs/"+htOrg+"/credits", map[string]string{"amount": amount}, http.StatusCreated, nil)
}

func (w *htWorld) summary() billing.SummaryJSON {
	w.t.Helper()
	var s billing.SummaryJSON
	w.json("owner", "GET", htBase, nil, http.StatusOK, &s)
	return s
}

// envelopeCode returns the error envelope's code.
func envelopeCode(t *testing.T, r *htResp) string {
	t.Helper()
	var env struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &env); err != nil || env.Error.Code == "" {
		t.Fatalf("not an error envelope: %s", r.Body)
	}
	return env.Error.Code
}

func TestBillingReadRoutesPerRole(t *testing.T) {
	t.Parallel()
	w := newHTWorld(t, htOptions{})
	routes := []string{htBase, htBase + "/usage", htBase + "/ledger", htBase + "/notifications", htBase + "/statements/2026-03"}
	want := map[string]int{
		"": 401, "owner": 200, "admin": 200, "billing": 200, "developer": 403, "reporter": 403, "outsider": 404,
		"owner-repo-read": 403, "owner-billing-read": 200,
	}
	for _, path := range routes {
		for who, status := range want {
			r := w.do(who, "GET", path, nil)
			if r.Status != status {
				t.Errorf("GET %s as %q: %d, want %d: %s", path, who, r.Status, status, r.Body)
			}
		}
	}
	// A non-member's 404 says nothing a missing org would not.
	a := w.do("outsider", "GET", htBase, nil)
	b := w.do("outsider", "GET", "/api/v1/orgs/no-such-org/billing", nil)
	if strings.ReplaceAll(string(a.Body), htOrg, "X") != strings.ReplaceAll(string(b.Body), "no-such-org", "X") {
		t.Errorf("outsider can tell the org exists: %s vs %s", a.Body, b.Body)
	}
	// Writes need billing:write.
	if r := w.do("owner-billing-read", "PUT", htBase+"/settings", map[string]any{}); r.Status != 403 {
		t.Errorf("settings with billing:read only: %d", r.Status)
	}
}

func TestSummaryAndAdminGrant(t *testing.T) {
	t.Parallel()
	htEachDialect(t, htOptions{}, func(t *testing.T, w *htWorld) {
		s := w.summary()
		if s.Currency != "CNY" || s.Balance != "0.0000" || s.Frozen != "0.0000" || s.FreeQuota.TotalCoreSeconds != 576000 ||
			s.FreeQuota.LeftCoreSeconds != 576000 || s.WorkspaceFreeQuota.TotalCoreSeconds != 5760000 ||
			s.WorkspaceFreeQuota.LeftCoreSeconds != 5760000 || s.MonthByBucket.Workspace.Spent != "0.0000" || s.Month != "2026-03" || s.Topups.Enabled || s.Topups.Min != "10.0000" ||
			s.Topups.Max != "100000.0000" || s.SpendingCap != nil {
			t.Fatalf("fresh summary %+v", s)
		}
		credits := "/api/v1/admin/orgs/" + htOrg + "/credits"
		body := map[string]string{"amount": "10.00", "note": "welcome credit"}
		for _, who := range []string{"owner", "billing", "outsider", "root-noadmin"} {
			if r := w.do(who, "POST", credits, body); r.Status != 403 {
				t.Errorf("grant as %s: %d, want 403", who, r.Status)
			}
		}
		if r := w.do("", "POST", credits, body); r.Status != 401 {
			t.Errorf("anonymous grant: %d", r.Status)
		}
		if r := w.do("root", "POST", "/api/v1/admin/orgs/no-such-org/credits", body); r.Status != 404 {
			t.Errorf("grant to a missing org: %d", r.Status)
		}
		var first, again billing.EntryJSON
		w.json("root", "POST", credits, body, http.StatusCreated, &first, "Idempotency-Key", "grant-1")
		w.json("root", "POST", credits, body, http.StatusOK, &again, "Idempotency-Key", "grant-1")
		if first.ID != again.ID || first.Kind != "grant" || first.Amount != "10.00000000" || first.BalanceChange != "10.00000000" ||
			first.Note != "granted by root: welcome credit" {
			t.Fatalf("grant %+v, replay %+v", first, again)
		}
		if r := w.do("root", "POST", credits, map[string]string{"amount": "11.00", "note": "welcome credit"}, "Idempotency-Key", "grant-1"); r.Status != 409 {
			t.Errorf("key reused for another amount: %d %s", r.Status, r.Body)
		}
		for _, bad := range []string{"0", "-1", "1e3", "abc", "1.123456789", ""} {
			if r := w.do("root", "POST", credits, map[string]string{"amount": bad}); r.Status != 422 {
				t.Errorf("amount %q: %d, want 422", bad, r.Status)
			}
		}
		// Without a key every call grants.
		w.grant("2.50")
		if s := w.summary(); s.Balance != "12.5000" {
			t.Fatalf("balance %s, want 12.5000", s.Balance)
		}
		// Top-ups are disabled without Stripe keys; the message says why.
		r := w.do("owner", "POST", htBase+"/topups", map[string]string{"amount": "100.00"})
		if r.Status != 409 || !strings.Contains(string(r.Body), "top-ups are disabled: no Stripe key configured") {
			t.Errorf("top-up without Stripe: %d %s", r.Status, r.Body)
		}
		if r := w.do("owner", "POST", htBase+"/topups", map[string]string{"amount": "5.00"}); r.Status != 422 {
			t.Errorf("top-up under the minimum: %d %s", r.Status, r.Body)
		}
	})
}

func TestSettingsValidation(t *testing.T) {
	t.Parallel()
	w := newHTWorld(t, htOptions{})
	w.grant("20")
	put := func(body any) *htResp { return w.do("billing", "PUT", htBase+"/settings", body) }
	bad := []struct {
		body any
		want int
	}{
		{map[string]any{"spending_cap": "-1"}, 422},
		{map[string]any{"spending_cap": "ten"}, 422},
		{map[string]any{"spending_cap": "1.123456789"}, 422},
		{map[string]any{"spending_cap": 10}, 400},
		{map[string]any{"low_balance_threshold": true}, 400},
		{map[string]any{"alert_webhook_url": "ftp://example.com/x"}, 422},
		{map[string]any{"alert_webhook_url": "example.com/hook"}, 422},
		{map[string]any{"alert_webhook_url": "http://127.0.0.1:9/hook"}, 422},
		{map[string]any{"alert_webhook_url": "http://localhost/hook"}, 422},
		{map[string]any{"alert_webhook_url": "http://10.1.2.3/hook"}, 422},
		{map[string]any{"alert_webhook_url": "https://example.com/" + strings.Repeat("a", 2048)}, 422},
		{map[string]any{"alert_webhook_url": 5}, 400},
		{map[string]any{"currency": "USD"}, 400},
		{`[]`, 400},
	}
	for _, c := range bad {
		if r := put(c.body); r.Status != c.want {
			t.Errorf("%v: %d, want %d: %s", c.body, r.Status, c.want, r.Body)
		}
	}
	if s := w.summary(); s.SpendingCap != nil || s.LowBalanceThreshold != nil || s.AlertWebhookURL != "" {
		t.Fatalf("bad input changed the settings: %+v", s)
	}
	var s billing.SummaryJSON
	w.json("billing", "PUT", htBase+"/settings", map[string]any{"spending_cap": "100", "low_balance_threshold": "5.5",
		"alert_webhook_url": "https://hooks.example.com/nimbus"}, http.StatusOK, &s)
	if *s.SpendingCap != "100.0000" || *s.LowBalanceThreshold != "5.5000" || s.AlertWebhookURL != "https://hooks.example.com/nimbus" {
		t.Fatalf("settings %+v", s)
	}
	// A field left out stays; null clears.
	w.json("billing", "PUT", htBase+"/settings", map[string]any{"spending_cap": nil}, http.StatusOK, &s)
	if s.SpendingCap != nil || s.LowBalanceThreshold == nil || *s.LowBalanceThreshold != "5.5000" || s.AlertWebhookURL == "" {
		t.Fatalf("after clearing the cap: %+v", s)
	}
	w.json("billing", "PUT", htBase+"/settings", map[string]any{"low_balance_threshold": nil, "alert_webhook_url": nil}, http.StatusOK, &s)
	if s.LowBalanceThreshold != nil || s.AlertWebhookURL != "" {
		t.Fatalf("after clearing the rest: %+v", s)
	}
	// A threshold above the balance alerts at once.
	w.json("billing", "PUT", htBase+"/settings", map[string]any{"low_balance_threshold": "50"}, http.StatusOK, nil)
	var ns struct {
		Items []billing.NotificationJSON `json:"items"`
	}
	w.json("billing", "GET", htBase+"/notifications", nil, http.StatusOK, &ns)
	if len(ns.Items) != 1 || ns.Items[0].Kind != "low_balance" || ns.Items[0].Delivered || !strings.Contains(ns.Items[0].Message, "20.0000") {
		t.Fatalf("notifications %+v", ns.Items)
	}
}

// htRun starts a build of acme at start and settles it at end.
func (w *htWorld) htRun(id, repoID int64, class string, cores int, start, end time.Time) {
	w.t.Helper()
	w.htRunOf(billing.Run{PipelineID: id, OrgID: w.org.ID, RepoID: repoID, Class: class, Cores: cores}, start, end)
}

// htRunOf starts r at start and settles it at end.
func (w *htWorld) htRunOf(r billing.Run, start, end time.Time) {
	w.t.Helper()
	id := r.PipelineID
	if err := w.app.Billing.Start(w.ctx, r, start); err != nil {
		w.t.Fatalf("start pipeline %d: %v", id, err)
	}
	if err := w.app.Billing.Settle(w.ctx, id, end); err != nil {
		w.t.Fatalf("settle pipeline %d: %v", id, err)
	}
}

const (
	htCPU = "cnb:arch:amd64"
	htGPU = "cnb:arch:amd64:gpu"
)

func TestUsageLedgerAndStatement(t *testing.T) {
	t.Parallel()
	htEachDialect(t, htOptions{}, func(t *testing.T, w *htWorld) {
		w.grant("10") // at 08:00 on 1 March, Shanghai
		models, err := w.app.Repos.Create(w.ctx, w.org, "models", repo.Private, "main", "")
		if err != nil {
			t.Fatal(err)
		}
		docs, err := w.app.Repos.Create(w.ctx, w.org, "docs", repo.Private, "main", "")
		if err != nil {
			t.Fatal(err)
		}
		at := func(s string) time.Time {
			v, err := time.Parse(time.RFC3339, s)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		// CPU, 4 cores × 100 s from the free quota, ending 18:00 on 1 March in Shanghai.
		w.htRun(1, models.ID, htCPU, 4, at("2026-03-01T09:58:20Z"), at("2026-03-01T10:00:00Z"))
		// GPU, 16 cores × 90 s = 0.2, ending 00:00:30 on 2 March in Shanghai (still 1 March in UTC).
		w.htRun(2, models.ID, htGPU, 16, at("2026-03-01T15:59:00Z"), at("2026-03-01T16:00:30Z"))
		// GPU, 16 × 60 s = 0.13333333, 2 March; and one of another repo.
		w.htRun(3, models.ID, htGPU, 16, at("2026-03-02T01:00:00Z"), at("2026-03-02T01:01:00Z"))
		w.htRun(4, docs.ID, htGPU, 16, at("2026-03-02T02:00:00Z"), at("2026-03-02T02:00:45Z"))
		w.clock.Set(at("2026-03-10T04:00:00Z"))

		var usage struct {
			Items      []billing.UsageJSON `json:"items"`
			NextCursor string              `json:"next_cursor"`
		}
		w.json("billing", "GET", htBase+"/usage?from=2026-03-01&to=2026-03-31", nil, http.StatusOK, &usage)
		want := []billing.UsageJSON{
			{Date: "2026-03-01", Bucket: "build", RunnerClass: htCPU, RepoID: models.ID, Repo: "models", Pipelines: 1, CoreSeconds: 400, QuotaCoreSeconds: 400, Cost: "0.0000", WrittenOff: "0.0000"},
			{Date: "2026-03-02", Bucket: "build", RunnerClass: htGPU, RepoID: docs.ID, Repo: "docs", Pipelines: 1, CoreSeconds: 720, Cost: "0.1000", WrittenOff: "0.0000"},
			{Date: "2026-03-02", Bucket: "build", RunnerClass: htGPU, RepoID: models.ID, Repo: "models", Pipelines: 2, CoreSeconds: 2400, Cost: "0.3333", WrittenOff: "0.0000"},
		}
		if fmt.Sprint(usage.Items) != fmt.Sprint(want) || usage.NextCursor != "" {
			t.Fatalf("usage\n got %+v\nwant %+v", usage.Items, want)
		}
		// The default range is this month so far; pages of one follow the same order.
		var got []billing.UsageJSON
		cursor := ""
		for range 5 {
			usage.NextCursor = ""
			w.json("billing", "GET", htBase+"/usage?limit=1&cursor="+cursor, nil, http.StatusOK, &usage)
			got = append(got, usage.Items...)
			if cursor = usage.NextCursor; cursor == "" {
				break
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("paged usage %+v", got)
		}
		w.json("billing", "GET", htBase+"/usage?from=2026-03-03&to=2026-03-04", nil, http.StatusOK, &usage)
		if len(usage.Items) != 0 {
			t.Fatalf("usage of quiet days %+v", usage.Items)
		}
		for _, q := range []string{"from=2026-3-1", "to=tomorrow", "from=2026-03-05&to=2026-03-04", "from=2025-01-01&to=2026-03-01"} {
			if r := w.do("billing", "GET", htBase+"/usage?"+q, nil); r.Status != 422 {
				t.Errorf("usage?%s: %d, want 422", q, r.Status)
			}
		}

		// The ledger, newest first, in pages: grant, then freeze and settle of each GPU run.
		var kinds []string
		var all []billing.EntryJSON
		cursor = ""
		for range 10 {
			var page struct {
				Items      []billing.EntryJSON `json:"items"`
				NextCursor string              `json:"next_cursor"`
			}
			w.json("billing", "GET", htBase+"/ledger?limit=2&cursor="+cursor, nil, http.StatusOK, &page)
			for _, e := range page.Items {
				kinds = append(kinds, e.Kind)
			}
			all = append(all, page.Items...)
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if strings.Join(kinds, " ") != "settle freeze settle freeze settle freeze grant" {
			t.Fatalf("ledger kinds %v", kinds)
		}
		if f := all[1]; f.Amount != "0.66666667" || f.BalanceChange != "-0.66666667" || f.FrozenChange != "0.66666667" || f.PipelineID == nil || *f.PipelineID != 4 {
			t.Fatalf("freeze entry %+v", f)
		}
		if s := all[0]; s.Amount != "0.10000000" || s.WrittenOff != "0.00000000" || s.BalanceChange != "0.56666667" ||
			s.FrozenChange != "-0.66666667" || s.UncoveredMs == nil || *s.UncoveredMs != 0 {
			t.Fatalf("settle entry %+v", s)
		}
		if f := all[1]; f.UncoveredMs != nil {
			t.Fatalf("a freeze entry with uncovered time: %+v", f)
		}
		if s := w.summary(); s.MonthSpent != "0.4333" || s.MonthWrittenOff != "0.0000" {
			t.Fatalf("month spent %s, written off %s", s.MonthSpent, s.MonthWrittenOff)
		}

		// The March statement adds up to the account's balance; February's is empty.
		r := w.do("billing", "GET", htBase+"/statements/2026-03", nil)
		if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/csv") ||
			!strings.Contains(r.Header.Get("Content-Disposition"), "acme-2026-03.csv") {
			t.Fatalf("statement: %d %v %s", r.Status, r.Header, r.Body)
		}
		rows, err := csv.NewReader(bytes.NewReader(r.Body)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		col := map[string]int{}
		for i, name := range rows[0] {
			col[name] = i
		}
		if strings.Join(rows[0], ",") != "id,time,kind,pipeline_id,amount,written_off,balance_change,frozen_change,balance,frozen,note" {
			t.Fatalf("header %v", rows[0])
		}
		var seq []string
		for _, row := range rows[1:] {
			seq = append(seq, row[col["kind"]])
		}
		if strings.Join(seq, " ") != "opening grant freeze settle freeze settle freeze settle total:freeze total:grant total:settle closing" {
			t.Fatalf("statement rows %v", seq)
		}
		open, last := rows[1], rows[len(rows)-1]
		if open[col["balance"]] != "0.00000000" || open[col["time"]] != "2026-03-01T00:00:00+08:00" {
			t.Fatalf("opening %v", open)
		}
		a := w.account()
		if last[col["balance"]] != a.Balance.String() || a.Balance.String() != "9.56666667" || last[col["frozen"]] != "0.00000000" ||
			last[col["balance_change"]] != "9.56666667" {
			t.Fatalf("closing %v, account balance %s", last, a.Balance)
		}
		if settle := rows[len(rows)-2]; settle[col["amount"]] != "0.43333333" || settle[col["note"]] != "3 transactions" {
			t.Fatalf("settle total %v", settle)
		}
		r = w.do("billing", "GET", htBase+"/statements/2026-02", nil)
		if rows, _ := csv.NewReader(bytes.NewReader(r.Body)).ReadAll(); r.Status != 200 || len(rows) != 3 {
			t.Fatalf("February: %d %s", r.Status, r.Body)
		}
		for _, month := range []string{"2026-13", "march", "2026-3"} {
			if r := w.do("billing", "GET", htBase+"/statements/"+month, nil); r.Status != 404 || envelopeCode(t, r) != "not_found" {
				t.Errorf("statement %s: %d %s", month, r.Status, r.Body)
			}
		}
	})
}

func TestStatementNotesCannotBeFormulas(t *testing.T) {
	t.Parallel()
	w := newHTWorld(t, htOptions{})
	w.json("root", "POST", "/api/v1/admin/orgs/"+htOrg+"/credits", map[string]string{"amount": "1", "note": "x"}, http.StatusCreated, nil)
	if err := w.app.DB.Model(&billing.Txn{}).Where("kind = ?", "grant").Update("note", "=HYPERLINK(\"http://evil\")").Error; err != nil {
		t.Fatal(err)
	}
	r := w.do("owner", "GET", htBase+"/statements/2026-03", nil)
	if !strings.Contains(string(r.Body), `'=HYPERLINK`) {
		t.Fatalf("a note that starts with = must be quoted: %s", r.Body)
	}
}

func TestPipelineCostSoFar(t *testing.T) {
	start := htStart
	pb := billing.PipelineBilling{Cores: 4, Price: billing.Scale / 8, StartedAt: start, FrozenQuota: 100}
	if cs, cost := pb.SoFar(start.Add(30*time.Second + time.Millisecond)); cs != 124 || cost != billing.CostOf(24, billing.Scale/8) {
		t.Errorf("running: %d %s", cs, cost)
	}
	if cs, cost := pb.SoFar(start.Add(-time.Second)); cs != 0 || cost != 0 {
		t.Errorf("before its start: %d %s", cs, cost)
	}
	pb.Settled, pb.CoreSeconds, pb.Cost = true, 7, 3
	if cs, cost := pb.SoFar(start.Add(time.Hour)); cs != 7 || cost != 3 {
		t.Errorf("settled: %d %s", cs, cost)
	}
}

// A terminated pipeline's overrun is shown as written off beside what was paid, everywhere the
// API shows money: the summary, usage and the settle entry, which also says how long the
// pipeline ran past its last covered window.
func TestWrittenOffShownBesidePaid(t *testing.T) {
	t.Parallel()
	w := newHTWorld(t, htOptions{})
	window := billing.CostOf(16*300, billing.Scale/2)
	w.grant((2 * window).String())
	start := w.clock.Now()
	if err := w.app.Billing.Start(w.ctx, billing.Run{PipelineID: 1, OrgID: w.org.ID, RepoID: 1, Class: htGPU, Cores: 16}, start); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Duration{5 * time.Minute, 10 * time.Minute} {
		w.clock.Set(start.Add(at))
		if _, err := w.app.Billing.Tick(w.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.app.Billing.Settle(w.ctx, 1, start.Add(10*time.Minute+7*time.Second)); err != nil {
		t.Fatal(err)
	}
	paid, writtenOff := 2*window, billing.CostOf(16*607, billing.Scale/2)-2*window
	if s := w.summary(); s.MonthSpent != paid.Display() || s.MonthWrittenOff != writtenOff.Display() {
		t.Fatalf("summary: %s spent, %s written off; want %s and %s", s.MonthSpent, s.MonthWrittenOff, paid.Display(), writtenOff.Display())
	}
	var ledger struct {
		Items []billing.EntryJSON `json:"items"`
	}
	w.json("billing", "GET", htBase+"/ledger", nil, http.StatusOK, &ledger)
	if e := ledger.Items[0]; e.Kind != "settle" || e.Amount != paid.String() || e.WrittenOff != writtenOff.String() ||
		e.UncoveredMs == nil || *e.UncoveredMs != 7000 {
		t.Fatalf("settle entry %+v", e)
	}
	var usage struct {
		Items []billing.UsageJSON `json:"items"`
	}
	w.json("billing", "GET", htBase+"/usage", nil, http.StatusOK, &usage)
	if len(usage.Items) != 1 || usage.Items[0].Cost != paid.Display() || usage.Items[0].WrittenOff != writtenOff.Display() {
		t.Fatalf("usage %+v", usage.Items)
	}
}

// Workspaces show apart from builds: usage rows say their bucket, the summary has the
// workspaces' own free quota (1 600 core-hours by default) and each bucket's spending, and the
// two buckets add up to the month's total.
func TestUsageAndSummarySplitBuckets(t *testing.T) {
	t.Parallel()
	htEachDialect(t, htOptions{}, func(t *testing.T, w *htWorld) {
		w.grant("10")
		models, err := w.app.Repos.Create(w.ctx, w.org, "models", repo.Private, "main", "")
		if err != nil {
			t.Fatal(err)
		}
		start := w.clock.Now()
		run := func(id int64, class string, cores int, workspace bool, secs int) {
			w.htRunOf(billing.Run{PipelineID: id, OrgID: w.org.ID, RepoID: models.ID, Class: class, Cores: cores, Workspace: workspace},
				start, start.Add(time.Duration(secs)*time.Second))
		}
		run(1, htCPU, 4, false, 100) // a build: 400 core-seconds of the builds' quota
		run(2, htCPU, 8, true, 200)  // a workspace: 1 600 of the workspaces'
		run(3, htCPU, 8, true, 100)  // and 800 more
		run(4, htGPU, 16, true, 90)  // a GPU workspace: 0.2 from the first second
		run(5, htGPU, 16, false, 45) // a GPU build: 0.1
		w.clock.Set(start.Add(time.Hour))

		var usage struct {
			Items []billing.UsageJSON `json:"items"`
		}
		w.json("billing", "GET", htBase+"/usage", nil, http.StatusOK, &usage)
		want := []billing.UsageJSON{
			{Date: "2026-03-01", Bucket: "build", RunnerClass: htCPU, RepoID: models.ID, Repo: "models", Pipelines: 1, CoreSeconds: 400, QuotaCoreSeconds: 400, Cost: "0.0000", WrittenOff: "0.0000"},
			{Date: "2026-03-01", Bucket: "build", RunnerClass: htGPU, RepoID: models.ID, Repo: "models", Pipelines: 1, CoreSeconds: 720, Cost: "0.1000", WrittenOff: "0.0000"},
			{Date: "2026-03-01", Bucket: "workspace", RunnerClass: htCPU, RepoID: models.ID, Repo: "models", Pipelines: 2, CoreSeconds: 2400, QuotaCoreSeconds: 2400, Cost: "0.0000", WrittenOff: "0.0000"},
			{Date: "2026-03-01", Bucket: "workspace", RunnerClass: htGPU, RepoID: models.ID, Repo: "models", Pipelines: 1, CoreSeconds: 1440, Cost: "0.2000", WrittenOff: "0.0000"},
		}
		if fmt.Sprint(usage.Items) != fmt.Sprint(want) {
			t.Fatalf("usage\n got %+v\nwant %+v", usage.Items, want)
		}
		s := w.summary()
		if s.FreeQuota.UsedCoreSeconds != 400 || s.FreeQuota.LeftCoreSeconds != 576000-400 {
			t.Fatalf("build quota %+v", s.FreeQuota)
		}
		if q := s.WorkspaceFreeQuota; q.TotalCoreSeconds != 5760000 || q.UsedCoreSeconds != 2400 || q.FrozenCoreSeconds != 0 || q.LeftCoreSeconds != 5760000-2400 {
			t.Fatalf("workspace quota %+v", q)
		}
		if s.MonthSpent != "0.3000" || s.MonthByBucket.Build.Spent != "0.1000" || s.MonthByBucket.Workspace.Spent != "0.2000" ||
			s.MonthByBucket.Build.WrittenOff != "0.0000" || s.MonthByBucket.Workspace.WrittenOff != "0.0000" {
			t.Fatalf("month spent %s, by bucket %+v", s.MonthSpent, s.MonthByBucket)
		}
		// The raw document has the fields the OpenAPI schema names.
		r := w.do("billing", "GET", htBase, nil)
		var raw map[string]any
		if err := json.Unmarshal(r.Body, &raw); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"free_quota", "workspace_free_quota", "month_by_bucket"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("summary without %s: %s", k, r.Body)
			}
		}
	})
}

// A ledger entry of a pipeline names its build, what the dashboard links it by
// (/{org}/{repo}/builds/{number}?pipeline={id}): the repo as org/name and the build number,
// looked up through build (app.New wires Config.Builds). Once the repo is deleted, its
// pipelines' entries keep their pipeline_id and name no build (null, not left out).
func TestLedgerEntriesNameTheirPipelinesBuild(t *testing.T) {
	t.Parallel()
	htEachDialect(t, htOptions{}, func(t *testing.T, w *htWorld) {
		w.grant("10")
		trainer, err := w.app.Repos.Create(w.ctx, w.org, "trainer", repo.Private, "main", "")
		if err != nil {
			t.Fatal(err)
		}
		scratch, err := w.app.Repos.Create(w.ctx, w.org, "scratch", repo.Private, "main", "")
		if err != nil {
			t.Fatal(err)
		}
		seed := func(repoID, number int64) int64 {
			s, err := buildtest.Seed(w.app.DB, buildtest.Running{RepoID: repoID, OrgID: w.org.ID, Number: number, Commit: "c0ffee"})
			if err != nil {
				t.Fatal(err)
			}
			return s.PipelineID
		}
		// Build numbers unlike the pipeline ids, so a mix-up shows.
		kept, gone := seed(trainer.ID, 12), seed(scratch.ID, 7)
		start := w.clock.Now()
		w.htRun(kept, trainer.ID, htGPU, 16, start, start.Add(45*time.Second))
		w.htRun(gone, scratch.ID, htGPU, 16, start, start.Add(45*time.Second))
		if err := w.app.Repos.Delete(w.ctx, scratch); err != nil {
			t.Fatal(err)
		}

		r := w.do("billing", "GET", htBase+"/ledger", nil)
		if r.Status != http.StatusOK {
			t.Fatalf("ledger: %d %s", r.Status, r.Body)
		}
		var ledger struct {
			Items []billing.EntryJSON `json:"items"`
		}
		var raw struct {
			Items []map[string]any `json:"items"`
		}
		if err := json.Unmarshal(r.Body, &ledger); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(r.Body, &raw); err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for i, e := range ledger.Items {
			switch {
			case e.PipelineID == nil:
				seen["none"]++
				if e.Kind != "grant" || e.Repo != nil || e.BuildNumber != nil {
					t.Errorf("entry of no pipeline: %+v", e)
				}
			case *e.PipelineID == kept:
				seen["kept"]++
				if e.Repo == nil || *e.Repo != htOrg+"/trainer" || e.BuildNumber == nil || *e.BuildNumber != 12 {
					t.Errorf("entry of pipeline %d of acme/trainer #12: repo %v, build %v", kept, deref(e.Repo), deref(e.BuildNumber))
				}
			case *e.PipelineID == gone:
				seen["gone"]++
				if e.Repo != nil || e.BuildNumber != nil {
					t.Errorf("entry of pipeline %d of a deleted repo names a build: %s #%v", gone, deref(e.Repo), deref(e.BuildNumber))
				}
			default:
				t.Errorf("entry of an unknown pipeline: %+v", e)
			}
			for _, k := range []string{"repo", "build_number"} {
				if v, ok := raw.Items[i][k]; !ok || (e.Repo == nil && v != nil) {
					t.Errorf("entry %d: %s is %v (present %v), want it present, null when there is no build", e.ID, k, v, ok)
				}
			}
		}
		// Each run is a freeze and a settlement; the grant names no pipeline.
		if seen["kept"] != 2 || seen["gone"] != 2 || seen["none"] != 1 {
			t.Fatalf("ledger entries by pipeline %v, want 2 of each run and the grant", seen)
		}
	})
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
