package billing_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/nimbus-build/nimbus/backend/billing"
)

// The Stripe API is stripe-mock (e2e/testenv.sh starts it); webhook deliveries are built and
// signed here with the test secret, as Stripe would sign them.

func TestTopupCreatesOneCustomerAndACheckoutSession(t *testing.T) {
	t.Parallel()
	w := newHTWorld(t, htOptions{stripe: true})
	if s := w.summary(); !s.Topups.Enabled {
		t.Fatal("top-ups disabled with a Stripe key configured")
	}
	var out struct {
		CheckoutURL string `json:"checkout_url"`
		SessionID   string `json:"session_id"`
		Amount      string `json:"amount"`
		Currency    string `json:"currency"`
	}
	w.json("billing", "POST", htBase+"/topups", map[string]string{"amount": "100.00"}, http.StatusCreated, &out)
	if !strings.HasPrefix(out.CheckoutURL, "https://") || !strings.HasPrefix(out.SessionID, "cs_") || out.Amount != "100.0000" || out.Currency != "CNY" {
		t.Fatalf("top-up %+v", out)
	}
	customer := w.account().StripeCustomerID
	if !strings.HasPrefix(customer, "cus_") {
		t.Fatalf("customer %q", customer)
	}
	form := w.stripe.lastForm("POST /v1/checkout/sessions")
	want := map[string]string{
		"mode":                                             "payment",
		"customer":                                         customer,
		"line_items[0][price_data][currency]":              "cny",
		"line_items[0][price_data][unit_amount]":           "10000",
		"line_items[0][quantity]":                          "1",
		"metadata[nimbus_account_id]":                      strconv.FormatInt(w.account().ID, 10),
		"payment_intent_data[metadata][nimbus_account_id]": strconv.FormatInt(w.account().ID, 10),
		"success_url":                                      "http://127.0.0.1:8080/orgs/acme/billing?topup=success&session_id={CHECKOUT_SESSION_ID}",
		"cancel_url":                                       "http://127.0.0.1:8080/orgs/acme/billing?topup=cancelled",
	}
	for k, v := range want {
		if got := form.Get(k); got != v {
			t.Errorf("checkout session %s = %q, want %q", k, got, v)
		}
	}
	// The second top-up reuses the customer.
	w.json("owner", "POST", htBase+"/topups", map[string]string{"amount": "10"}, http.StatusCreated, &out)
	if w.account().StripeCustomerID != customer || w.stripe.count("POST /v1/customers") != 1 || w.stripe.count("POST /v1/checkout/sessions") != 2 {
		t.Fatalf("customer %s → %s; calls %v", customer, w.account().StripeCustomerID, w.stripe.calls)
	}
	// Bad amounts and callers never reach Stripe.
	for _, c := range []struct {
		who, amount string
		want        int
	}{
		{"billing", "9.99", 422}, {"billing", "100000.01", 422}, {"billing", "10.001", 422}, {"billing", "abc", 422},
		{"billing", "", 422}, {"developer", "100", 403}, {"outsider", "100", 404}, {"", "100", 401},
	} {
		if r := w.do(c.who, "POST", htBase+"/topups", map[string]string{"amount": c.amount}); r.Status != c.want {
			t.Errorf("top-up of %q as %q: %d, want %d: %s", c.amount, c.who, r.Status, c.want, r.Body)
		}
	}
	if n := w.stripe.count("POST /v1/checkout/sessions"); n != 2 {
		t.Errorf("%d checkout sessions, want 2", n)
	}
	// Admin grants work beside Stripe.
	w.grant("1")
}

// htEvent is a Stripe event of typ about object.
func htEvent(id, typ string, object map[string]any) []byte {
	b, err := json.Marshal(map[string]any{"id": id, "object": "event", "type": typ, "api_version": "2023-10-16",
		"created": time.Now().Unix(), "livemode": false, "data": map[string]any{"object": object}})
	if err != nil {
		panic(err)
	}
	return b
}

// htSession is a Checkout Session of the acme account for amount fen.
func (w *htWorld) htSession(id, paymentIntent, status string, amount int64) map[string]any {
	return map[string]any{"id": id, "object": "checkout.session", "mode": "payment", "payment_status": status, "status": "complete",
		"amount_total": amount, "currency": "cny", "payment_intent": paymentIntent, "customer": "cus_test",
		"metadata": map[string]string{"nimbus_account_id": strconv.FormatInt(w.account().ID, 10)}}
}

// htCharge is a charge of payment intent pi with refunded fen refunded so far.
func htCharge(id, paymentIntent string, refunded int64, metadata map[string]string, customer string) map[string]any {
	return map[string]any{"id": id, "object": "charge", "amount": 10000, "amount_refunded": refunded, "refunded": refunded == 10000,
		"currency": "cny", "payment_intent": paymentIntent, "customer": customer, "metadata": metadata}
}

// deliver posts a webhook delivery signed with secret ("" = no Stripe-Signature header).
func (w *htWorld) deliver(payload []byte, secret string) *htResp {
	w.t.Helper()
	var headers []string
	if secret != "" {
		signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: secret})
		headers = []string{"Stripe-Signature", signed.Header}
	}
	return w.do("", "POST", "/api/v1/billing/stripe/webhook", string(payload), headers...)
}

// acked delivers a correctly signed payload and expects 200.
func (w *htWorld) acked(payload []byte) {
	w.t.Helper()
	if r := w.deliver(payload, htWebhookSecret); r.Status != http.StatusOK {
		w.t.Fatalf("delivery %.80s: %d %s", payload, r.Status, r.Body)
	}
}

func (w *htWorld) balance() string {
	w.t.Helper()
	return w.account().Balance.Display()
}

func (w *htWorld) txns() int64 {
	w.t.Helper()
	var n int64
	if err := w.app.DB.Model(&billing.Txn{}).Count(&n).Error; err != nil {
		w.t.Fatal(err)
	}
	return n
}

func TestStripeWebhookCreditsEachPaidSessionOnce(t *testing.T) {
	t.Parallel()
	htEachDialect(t, htOptions{stripe: true}, func(t *testing.T, w *htWorld) {
		paid := htEvent("evt_1", "checkout.session.completed", w.htSession("cs_1", "pi_1", "paid", 10000))
		w.acked(paid)
		if b := w.balance(); b != "100.0000" {
			t.Fatalf("balance after the payment: %s", b)
		}
		// The same delivery again, and another event of the same session: nothing more.
		w.acked(paid)
		w.acked(htEvent("evt_2", "checkout.session.async_payment_succeeded", w.htSession("cs_1", "pi_1", "paid", 10000)))
		if b := w.balance(); b != "100.0000" {
			t.Fatalf("balance after redeliveries: %s", b)
		}
		// A delayed payment method: completed unpaid, credited when its payment succeeds.
		w.acked(htEvent("evt_3", "checkout.session.completed", w.htSession("cs_2", "pi_2", "unpaid", 5000)))
		if b := w.balance(); b != "100.0000" {
			t.Fatalf("an unpaid session was credited: %s", b)
		}
		w.acked(htEvent("evt_4", "checkout.session.async_payment_succeeded", w.htSession("cs_2", "pi_2", "paid", 5000)))
		if b := w.balance(); b != "150.0000" {
			t.Fatalf("balance after the delayed payment: %s", b)
		}
		// Events Nimbus does not use, and sessions of no Nimbus account, are acknowledged.
		before := w.txns()
		w.acked(htEvent("evt_5", "customer.created", map[string]any{"id": "cus_x", "object": "customer"}))
		stranger := w.htSession("cs_3", "pi_3", "paid", 7000)
		stranger["metadata"] = map[string]string{}
		w.acked(htEvent("evt_6", "checkout.session.completed", stranger))
		// Bad signatures: another secret, none, a payload changed after signing.
		other := htEvent("evt_7", "checkout.session.completed", w.htSession("cs_4", "pi_4", "paid", 9900))
		for name, r := range map[string]*htResp{
			"another secret": w.deliver(other, "whsec_someone_else"),
			"no signature":   w.deliver(other, ""),
			"garbage header": w.do("", "POST", "/api/v1/billing/stripe/webhook", string(other), "Stripe-Signature", "t=1,v1=00"),
			"tampered": w.do("", "POST", "/api/v1/billing/stripe/webhook", strings.Replace(string(other), "9900", "99000", 1),
				"Stripe-Signature", webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: other, Secret: htWebhookSecret}).Header),
		} {
			if r.Status != http.StatusBadRequest || envelopeCode(t, r) != "bad_request" {
				t.Errorf("%s: %d %s", name, r.Status, r.Body)
			}
		}
		// A signature older than Stripe's tolerance (5 minutes) is a replay.
		old := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: other, Secret: htWebhookSecret, Timestamp: time.Now().Add(-time.Hour)})
		if r := w.do("", "POST", "/api/v1/billing/stripe/webhook", string(other), "Stripe-Signature", old.Header); r.Status != http.StatusBadRequest {
			t.Errorf("an hour-old signature: %d %s", r.Status, r.Body)
		}
		if n := w.txns(); n != before || w.balance() != "150.0000" {
			t.Fatalf("ignored or refused deliveries wrote %d transactions; balance %s", n-before, w.balance())
		}
	})
}

func TestStripeRefundsInAnyOrder(t *testing.T) {
	t.Parallel()
	htEachDialect(t, htOptions{stripe: true}, func(t *testing.T, w *htWorld) {
		meta := map[string]string{"nimbus_account_id": strconv.FormatInt(w.account().ID, 10)}
		// The refund arrives before the payment is credited: 409, so Stripe delivers it again.
		early := htEvent("evt_r1", "charge.refunded", htCharge("ch_1", "pi_1", 3000, meta, "cus_test"))
		if r := w.deliver(early, htWebhookSecret); r.Status != http.StatusConflict {
			t.Fatalf("refund before the credit: %d %s", r.Status, r.Body)
		}
		if n := w.txns(); n != 0 {
			t.Fatalf("the early refund wrote %d transactions", n)
		}
		w.acked(htEvent("evt_p1", "checkout.session.completed", w.htSession("cs_1", "pi_1", "paid", 10000)))
		w.acked(early) // Stripe's retry
		w.acked(early)
		if b := w.balance(); b != "70.0000" {
			t.Fatalf("balance after refunding 30: %s", b)
		}
		// A second partial refund (cumulative 50), then the older state delivered late.
		w.acked(htEvent("evt_r2", "charge.refunded", htCharge("ch_1", "pi_1", 5000, meta, "cus_test")))
		w.acked(early)
		if b := w.balance(); b != "50.0000" {
			t.Fatalf("balance after refunding 50 in all: %s", b)
		}
		// The account is found by its Stripe customer when the charge has no metadata.
		if err := w.app.DB.Model(&billing.Account{}).Where("id = ?", w.account().ID).Update("stripe_customer_id", "cus_acme").Error; err != nil {
			t.Fatal(err)
		}
		w.acked(htEvent("evt_r3", "charge.refunded", htCharge("ch_1", "pi_1", 6000, nil, "cus_acme")))
		if b := w.balance(); b != "40.0000" {
			t.Fatalf("balance after a refund found by customer: %s", b)
		}
		// Charges that are no Nimbus top-up are acknowledged and ignored.
		before := w.txns()
		w.acked(htEvent("evt_r4", "charge.refunded", htCharge("ch_9", "pi_9", 100, nil, "cus_unknown")))
		if w.txns() != before {
			t.Fatal("a stranger's refund was booked")
		}
		var ledger struct {
			Items []billing.EntryJSON `json:"items"`
		}
		w.json("owner", "GET", htBase+"/ledger", nil, http.StatusOK, &ledger)
		var got []string
		for _, e := range ledger.Items {
			got = append(got, e.Kind+" "+e.BalanceChange)
		}
		if strings.Join(got, ", ") != "refund -10.00000000, refund -20.00000000, refund -30.00000000, topup 100.00000000" {
			t.Fatalf("ledger %v", got)
		}
	})
}

func TestStripeWebhookWithoutSecretRefusesEverything(t *testing.T) {
	t.Parallel()
	w := newHTWorld(t, htOptions{})
	r := w.deliver(htEvent("evt_1", "checkout.session.completed", w.htSession("cs_1", "pi_1", "paid", 10000)), htWebhookSecret)
	if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "NIMBUS_STRIPE_WEBHOOK_SECRET") || w.txns() != 0 {
		t.Fatalf("webhook without a secret: %d %s", r.Status, r.Body)
	}
}

// lastForm is the form body of the last call to the Stripe API.
func (c *htCounter) lastForm(call string) url.Values {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, err := url.ParseQuery(c.bodies[call])
	if err != nil {
		panic(fmt.Sprintf("form of %s: %v", call, err))
	}
	return v
}

// keepBody records a request's body and gives it back to the request.
func (c *htCounter) keepBody(r *http.Request) {
	if r.Body == nil {
		return
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	r.Body = io.NopCloser(strings.NewReader(string(b)))
	c.bodies[r.Method+" "+r.URL.Path] = string(b)
}
