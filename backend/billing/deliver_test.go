package billing_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/billing"
	"github.com/nimbus-build/nimbus/backend/outbox"
)

// htHook is an alert webhook on loopback that records what it receives.
type htHook struct {
	mu     sync.Mutex
	got    []billing.AlertJSON
	status int
}

func newHTHook(t *testing.T) (*htHook, *httptest.Server) {
	h := &htHook{status: http.StatusNoContent}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var a billing.AlertJSON
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&a) != nil {
			t.Errorf("alert webhook got %s %s %s", r.Method, r.URL, r.Header.Get("Content-Type"))
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.got = append(h.got, a)
		rw.WriteHeader(h.status)
	}))
	t.Cleanup(srv.Close)
	return h, srv
}

func (h *htHook) received() []billing.AlertJSON {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]billing.AlertJSON(nil), h.got...)
}

func (h *htHook) answer(status int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.status = status
}

// notice records a notification of acme created at the clock's time minus age.
func (w *htWorld) notice(key string, age time.Duration) {
	w.t.Helper()
	n := billing.Notification{AccountID: w.account().ID, Kind: "test", DedupeKey: key, Message: "note " + key,
		CreatedAt: w.clock.Now().UTC().Add(-age)}
	// Recorded as notify does: the notification and its outbox message in one transaction.
	err := w.app.DB.Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&n).Error; err != nil {
			return err
		}
		return outbox.Enqueue(w.ctx, tx, billing.KindAlert, n.ID, n.CreatedAt)
	})
	if err != nil {
		w.t.Fatal(err)
	}
}

// restartedAlerts is the outbox of a server started anew on the same database, with its alert
// sender registered: nothing of the first server's memory is left.
func (w *htWorld) restartedAlerts() *outbox.Outbox {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	box := outbox.New(outbox.Config{DB: w.app.DB, Clock: w.clock, Log: log})
	billing.NewAlertSender(w.app.DB, w.clock, log, box, billing.AlertSenderConfig{AllowPrivate: true})
	return box
}

// deliverAlerts runs one round of the server's outbox for alerts, as its sender loop does.
func (w *htWorld) deliverAlerts() int {
	w.t.Helper()
	n, err := w.app.Outbox.Deliver(w.ctx, billing.KindAlert)
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

func TestAlertsAreDeliveredToTheWebhook(t *testing.T) {
	t.Parallel()
	htEachDialect(t, htOptions{privateWebhooks: true}, func(t *testing.T, w *htWorld) {
		hook, srv := newHTHook(t)
		w.grant("20")
		w.json("billing", "PUT", htBase+"/settings", map[string]any{"alert_webhook_url": srv.URL + "/hook?token=s3cret",
			"low_balance_threshold": "50"}, http.StatusOK, nil)
		if n := w.deliverAlerts(); n != 1 {
			t.Fatalf("delivered %d, want the low-balance alert", n)
		}
		got := hook.received()
		if len(got) != 1 || got[0].Kind != "low_balance" || got[0].Org != "acme" || got[0].ID == 0 || got[0].Message == "" {
			t.Fatalf("webhook received %+v", got)
		}
		var list struct {
			Items []billing.NotificationJSON `json:"items"`
		}
		w.json("owner", "GET", htBase+"/notifications", nil, http.StatusOK, &list)
		if len(list.Items) != 1 || !list.Items[0].Delivered {
			t.Fatalf("notifications %+v", list.Items)
		}
		if n := w.deliverAlerts(); n != 0 || len(hook.received()) != 1 {
			t.Fatalf("a delivered alert was sent again (%d)", n)
		}

		// A failing webhook keeps the alert undelivered and is left alone for a while.
		hook.answer(http.StatusInternalServerError)
		w.notice("t1", 0)
		if n := w.deliverAlerts(); n != 0 || len(hook.received()) != 2 {
			t.Fatalf("failing webhook: delivered %d, received %d", n, len(hook.received()))
		}
		if n := w.deliverAlerts(); n != 0 || len(hook.received()) != 2 {
			t.Fatal("a failing webhook was tried again at once")
		}
		hook.answer(http.StatusOK)
		w.clock.Advance(2 * time.Minute)
		if n := w.deliverAlerts(); n != 1 || len(hook.received()) != 3 {
			t.Fatalf("after the backoff: delivered %d, received %d", n, len(hook.received()))
		}
		// Alerts older than a day are news to nobody.
		w.notice("t2", 25*time.Hour)
		if n := w.deliverAlerts(); n != 0 {
			t.Fatalf("an alert of yesterday was delivered")
		}
	})
}

func TestAlertsNeverReachPrivateAddressesByDefault(t *testing.T) {
	t.Parallel()
	w := newHTWorld(t, htOptions{})
	hook, srv := newHTHook(t)
	// Set behind the API's back: the API refuses loopback URLs already.
	if err := w.app.DB.Model(&billing.Account{}).Where("id = ?", w.account().ID).Update("alert_webhook_url", srv.URL+"/hook").Error; err != nil {
		t.Fatal(err)
	}
	w.notice("p1", 0)
	if n := w.deliverAlerts(); n != 0 || len(hook.received()) != 0 {
		t.Fatalf("an alert went to %s: delivered %d", srv.URL, n)
	}
	var n billing.Notification
	if err := w.app.DB.Where("dedupe_key = ?", "p1").Take(&n).Error; err != nil || n.Delivered {
		t.Fatalf("notification %+v %v", n, err)
	}
}

// A server that dies while it sends an alert (the receiver is down behind a proxy that holds
// the request) loses nothing: the server started again on the same database delivers the
// alert once the dead one's claim has run out. Before the outbox the claim was the
// notification's delivered flag, so the alert was marked delivered and never sent.
func TestAlertsSurviveARestart(t *testing.T) {
	t.Parallel()
	htEachDialect(t, htOptions{privateWebhooks: true}, func(t *testing.T, w *htWorld) {
		arrived, release := make(chan struct{}), make(chan struct{})
		var mu sync.Mutex
		var got []billing.AlertJSON
		first := true
		srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			var a billing.AlertJSON
			if err := json.NewDecoder(r.Body).Decode(&a); err != nil {
				t.Errorf("alert webhook: %v", err)
			}
			mu.Lock()
			if first {
				first = false
				mu.Unlock()
				close(arrived)
				<-release
				rw.WriteHeader(http.StatusBadGateway)
				return
			}
			got = append(got, a)
			mu.Unlock()
			rw.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(srv.Close)
		if err := w.app.DB.Model(&billing.Account{}).Where("id = ?", w.account().ID).Update("alert_webhook_url", srv.URL+"/hook").Error; err != nil {
			t.Fatal(err)
		}
		w.notice("r1", 0)

		dead := make(chan struct{})
		go func() {
			defer close(dead)
			w.app.Outbox.Deliver(w.ctx, billing.KindAlert) // the server that dies mid-send
		}()
		<-arrived
		// That server is gone; a new one starts on the same database and, a while later,
		// delivers what the dead one had in hand.
		restarted := w.restartedAlerts()
		w.clock.Advance(2 * time.Minute)
		n, err := restarted.Deliver(w.ctx, billing.KindAlert)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		received := len(got)
		mu.Unlock()
		close(release)
		<-dead
		if n != 1 || received != 1 {
			t.Fatalf("the restarted server delivered %d (the receiver got %d), want the alert", n, received)
		}
		var note billing.Notification
		if err := w.app.DB.Where("dedupe_key = ?", "r1").Take(&note).Error; err != nil || !note.Delivered {
			t.Fatalf("notification %+v %v", note, err)
		}
		// The dead server's late answer undoes nothing, and nothing is sent again.
		w.clock.Advance(time.Hour)
		if n, err := restarted.Deliver(w.ctx, billing.KindAlert); n != 0 || err != nil {
			t.Fatalf("sent again: %d %v", n, err)
		}
	})
}

// An alert recorded while the account has no webhook URL reaches the URL set later (within
// the alerts' day).
func TestAlertsReachAWebhookSetLater(t *testing.T) {
	t.Parallel()
	htEachDialect(t, htOptions{privateWebhooks: true}, func(t *testing.T, w *htWorld) {
		hook, srv := newHTHook(t)
		w.notice("l1", 0)
		if n := w.deliverAlerts(); n != 0 || len(hook.received()) != 0 {
			t.Fatalf("delivered %d without a URL", n)
		}
		w.json("billing", "PUT", htBase+"/settings", map[string]any{"alert_webhook_url": srv.URL + "/hook"}, http.StatusOK, nil)
		w.clock.Advance(time.Minute)
		if n := w.deliverAlerts(); n != 1 {
			t.Fatalf("delivered %d once the URL was set", n)
		}
		if got := hook.received(); len(got) != 1 || got[0].Message != "note l1" {
			t.Fatalf("webhook received %+v", got)
		}
	})
}
