package billing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	stripe "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/checkout/session"
	"github.com/stripe/stripe-go/v76/customer"
	"github.com/stripe/stripe-go/v76/webhook"
	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/store"
)

// Top-ups go through Stripe Checkout:
//
//	POST …/billing/topups   the account gets its Stripe customer (once, lazily), a Checkout
//	                        Session in payment mode is created for the amount, its URL returned
//	webhook                 checkout.session.completed (or async_payment_succeeded) with
//	                        payment_status "paid" credits the amount, keyed by the session id;
//	                        charge.refunded debits what was refunded since the last delivery
//
// Stripe delivers events at least once and in any order, so every effect is keyed: a repeated
// delivery hits the ledger's idempotency key and changes nothing. A refund that arrives before
// the payment it refunds was credited is answered 409, which makes Stripe deliver it again later
// (it retries for days); by then the payment is credited and the refund applies on top, so the
// result does not depend on the order.

// StripeConfig configures top-ups.
type StripeConfig struct {
	SecretKey     string // "" = top-ups disabled
	WebhookSecret string // "" = every webhook delivery is refused
	APIURL        string // "" = Stripe's own API
	Min, Max      Amount // bounds of one top-up
	PublicURL     string // where the Checkout success and cancel pages send the customer back
	// HTTPClient talks to the Stripe API; nil = one with a 30 s timeout.
	HTTPClient *http.Client
}

// Stripe creates Checkout Sessions and applies Stripe's webhook events to the ledger.
type Stripe struct {
	svc       *Service
	cfg       StripeConfig
	customers customer.Client
	sessions  session.Client
	log       *slog.Logger
}

// Metadata keys Nimbus sets on its Checkout Sessions and their payments.
const (
	metaAccount = "nimbus_account_id"
	metaOrg     = "nimbus_org"
)

// NewStripe returns the top-up service; without a secret key it only validates amounts and
// answers that top-ups are disabled.
func NewStripe(svc *Service, cfg StripeConfig, log *slog.Logger) (*Stripe, error) {
	if cfg.Min <= 0 || cfg.Max < cfg.Min {
		return nil, fmt.Errorf("billing: top-up bounds %s..%s: want 0 < min <= max", cfg.Min.Display(), cfg.Max.Display())
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	bc := &stripe.BackendConfig{
		HTTPClient: cfg.HTTPClient,
		// Errors come back to us and are logged with the request; stripe-go's own logger
		// would write to stderr around our structured log.
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	}
	if cfg.APIURL != "" {
		bc.URL = stripe.String(strings.TrimRight(cfg.APIURL, "/"))
	}
	// A client instance per service, never stripe-go's package-level key: tests run several
	// configurations in one process.
	backend := stripe.GetBackendWithConfig(stripe.APIBackend, bc)
	return &Stripe{svc: svc, cfg: cfg, log: log,
		customers: customer.Client{B: backend, Key: cfg.SecretKey},
		sessions:  session.Client{B: backend, Key: cfg.SecretKey}}, nil
}

// Enabled reports whether top-ups can be made.
func (st *Stripe) Enabled() bool { return st.cfg.SecretKey != "" }

// Bounds returns the smallest and largest top-up.
func (st *Stripe) Bounds() (Amount, Amount) { return st.cfg.Min, st.cfg.Max }

// zeroDecimal are the currencies Stripe counts in whole units (no minor unit).
var zeroDecimal = map[string]bool{"BIF": true, "CLP": true, "DJF": true, "GNF": true, "JPY": true, "KMF": true,
	"KRW": true, "MGA": true, "PYG": true, "RWF": true, "UGX": true, "VND": true, "VUV": true, "XAF": true, "XOF": true, "XPF": true}

// minorUnit is how many Amount units make one of the currency's minor units (one fen of CNY).
func minorUnit(currency string) Amount {
	if zeroDecimal[strings.ToUpper(currency)] {
		return Scale
	}
	return Scale / 100
}

// CheckTopup validates a top-up amount: within the bounds and payable in the currency's minor
// units (Stripe charges whole fen, not fractions of one).
func (st *Stripe) CheckTopup(currency string, amount Amount) error {
	if amount < st.cfg.Min || amount > st.cfg.Max {
		return fault.Invalid("amount", "a top-up is from %s to %s %s", st.cfg.Min.Display(), st.cfg.Max.Display(), currency)
	}
	if amount%minorUnit(currency) != 0 {
		return fault.Invalid("amount", "%s amounts have at most %d decimals", currency, decimalsOf(currency))
	}
	return nil
}

func decimalsOf(currency string) int {
	if zeroDecimal[strings.ToUpper(currency)] {
		return 0
	}
	return 2
}

// Checkout is a created Checkout Session.
type Checkout struct {
	SessionID string
	URL       string
}

// ErrStripeUnavailable means the Stripe API failed or did not answer.
var ErrStripeUnavailable = fault.Unavailable("Stripe did not answer; try again in a moment")

// Checkout creates a Checkout Session that pays amount into account a (of org orgName).
func (st *Stripe) Checkout(ctx context.Context, a *Account, orgName string, amount Amount) (*Checkout, error) {
	// The amount is checked first: its rules hold whether or not Stripe is configured.
	if err := st.CheckTopup(a.Currency, amount); err != nil {
		return nil, err
	}
	if !st.Enabled() {
		return nil, fault.Conflict("top-ups are disabled: no Stripe key configured (a platform admin can still grant credit)")
	}
	cust, err := st.customerOf(ctx, a, orgName)
	if err != nil {
		return nil, err
	}
	id := strconv.FormatInt(a.ID, 10)
	back := st.cfg.PublicURL + "/orgs/" + url.PathEscape(orgName) + "/billing?topup="
	params := &stripe.CheckoutSessionParams{
		Mode:              stripe.String(string(stripe.CheckoutSessionModePayment)),
		Customer:          stripe.String(cust),
		ClientReferenceID: stripe.String(id),
		LineItems: []*stripe.CheckoutSessionLineItemParams{{
			PriceData: &stripe.CheckoutSessionLineItemPriceDataParams{
				Currency:    stripe.String(strings.ToLower(a.Currency)),
				UnitAmount:  stripe.Int64(int64(amount / minorUnit(a.Currency))),
				ProductData: &stripe.CheckoutSessionLineItemPriceDataProductDataParams{Name: stripe.String("Nimbus balance top-up: " + orgName)},
			},
			Quantity: stripe.Int64(1),
		}},
		// Stripe fills in {CHECKOUT_SESSION_ID}, so the page can show which payment came back.
		SuccessURL:        stripe.String(back + "success&session_id={CHECKOUT_SESSION_ID}"),
		CancelURL:         stripe.String(back + "cancelled"),
		PaymentIntentData: &stripe.CheckoutSessionPaymentIntentDataParams{},
	}
	params.Context = ctx
	params.AddMetadata(metaAccount, id)
	params.AddMetadata(metaOrg, orgName)
	// The payment carries the account too, so a refund of its charge finds the account even
	// when the customer was changed in Stripe's dashboard.
	params.PaymentIntentData.AddMetadata(metaAccount, id)
	s, err := st.sessions.New(params)
	if err != nil {
		st.log.ErrorContext(ctx, "stripe: create checkout session", "account", a.ID, "err", err)
		return nil, fmt.Errorf("%w (%w)", ErrStripeUnavailable, err)
	}
	if s.URL == "" {
		return nil, fmt.Errorf("billing: stripe checkout session %s has no URL", s.ID)
	}
	return &Checkout{SessionID: s.ID, URL: s.URL}, nil
}

// customerOf returns the account's Stripe customer, creating it on the first top-up. Two
// concurrent first top-ups send the same Stripe idempotency key, so Stripe creates one customer,
// and the conditional update below keeps whichever id was stored first.
func (st *Stripe) customerOf(ctx context.Context, a *Account, orgName string) (string, error) {
	if a.StripeCustomerID != "" {
		return a.StripeCustomerID, nil
	}
	params := &stripe.CustomerParams{Name: stripe.String(orgName), Description: stripe.String("Nimbus team " + orgName)}
	params.Context = ctx
	params.AddMetadata(metaAccount, strconv.FormatInt(a.ID, 10))
	params.AddMetadata(metaOrg, orgName)
	// The account's creation time tells apart two installations that share a Stripe account.
	params.SetIdempotencyKey(fmt.Sprintf("nimbus-customer-%d-%d", a.ID, a.CreatedAt.UnixNano()))
	c, err := st.customers.New(params)
	if err != nil {
		st.log.ErrorContext(ctx, "stripe: create customer", "account", a.ID, "err", err)
		return "", fmt.Errorf("%w (%w)", ErrStripeUnavailable, err)
	}
	db := st.svc.db.WithContext(ctx)
	res := db.Model(&Account{}).Where("id = ? AND stripe_customer_id = ?", a.ID, "").Update("stripe_customer_id", c.ID)
	if res.Error != nil {
		return "", fmt.Errorf("billing: store stripe customer of account %d: %w", a.ID, res.Error)
	}
	if res.RowsAffected == 0 {
		var stored Account
		if err := db.Take(&stored, a.ID).Error; err != nil {
			return "", fmt.Errorf("billing: account %d: %w", a.ID, err)
		}
		c.ID = stored.StripeCustomerID
	}
	a.StripeCustomerID = c.ID
	return c.ID, nil
}

// stripeID is a reference to another Stripe object: its id, or the object itself when expanded.
type stripeID string

func (id *stripeID) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*id = stripeID(s)
		return nil
	}
	var obj struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return fmt.Errorf("stripe reference: %w", err)
	}
	*id = stripeID(obj.ID)
	return nil
}

// The few fields of the event objects that matter here; the rest of Stripe's payload is not
// bound, so a newer API version's changes elsewhere cannot break parsing.
type checkoutSessionObject struct {
	ID            string            `json:"id"`
	Mode          string            `json:"mode"`
	PaymentStatus string            `json:"payment_status"`
	AmountTotal   int64             `json:"amount_total"`
	Currency      string            `json:"currency"`
	PaymentIntent stripeID          `json:"payment_intent"`
	Metadata      map[string]string `json:"metadata"`
}

type chargeObject struct {
	ID             string            `json:"id"`
	AmountRefunded int64             `json:"amount_refunded"`
	Currency       string            `json:"currency"`
	Customer       stripeID          `json:"customer"`
	PaymentIntent  stripeID          `json:"payment_intent"`
	Metadata       map[string]string `json:"metadata"`
}

// HandleWebhook verifies one delivery of Stripe's webhook and applies it. It returns a 400 for a
// payload that is not Stripe's (bad or missing signature), a 409 for a refund whose payment is
// not credited yet (Stripe delivers it again later), and nil for everything to acknowledge,
// including events Nimbus does not use.
func (st *Stripe) HandleWebhook(ctx context.Context, payload []byte, signature string) error {
	if st.cfg.WebhookSecret == "" {
		return fault.BadRequest("Stripe webhooks are not accepted: no NIMBUS_STRIPE_WEBHOOK_SECRET is configured")
	}
	// The API version of the events is the webhook endpoint's, set in Stripe's dashboard; the
	// fields read here are the same in every version, so a mismatch is no reason to refuse.
	ev, err := webhook.ConstructEventWithOptions(payload, signature, st.cfg.WebhookSecret,
		webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true})
	if err != nil {
		return fault.BadRequest("invalid Stripe webhook: %v", err)
	}
	if ev.Data == nil {
		return fault.BadRequest("invalid Stripe webhook: the event has no data")
	}
	log := st.log.With("stripe_event", ev.ID, "type", ev.Type)
	switch ev.Type {
	case "checkout.session.completed", "checkout.session.async_payment_succeeded":
		var s checkoutSessionObject
		if err := json.Unmarshal(ev.Data.Raw, &s); err != nil {
			return fault.BadRequest("invalid Stripe webhook: checkout session: %v", err)
		}
		return st.credit(ctx, log, &s)
	case "charge.refunded":
		var ch chargeObject
		if err := json.Unmarshal(ev.Data.Raw, &ch); err != nil {
			return fault.BadRequest("invalid Stripe webhook: charge: %v", err)
		}
		return st.refund(ctx, log, &ch)
	}
	log.DebugContext(ctx, "stripe: event ignored")
	return nil
}

// accountByID returns the account a metadata value names, or nil when there is none.
func (st *Stripe) accountByID(ctx context.Context, raw string) (*Account, error) {
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		return nil, nil
	}
	var a Account
	err = st.svc.db.WithContext(ctx).Take(&a, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("billing: account %d: %w", id, err)
	}
	return &a, nil
}

// credit pays a completed Checkout Session into its account, once: the ledger key is the
// session's id, whichever of its events (completed, async_payment_succeeded, or a redelivery)
// gets here first.
func (st *Stripe) credit(ctx context.Context, log *slog.Logger, s *checkoutSessionObject) error {
	if s.PaymentStatus != "paid" {
		// Delayed payment methods complete unpaid; async_payment_succeeded follows when paid.
		log.InfoContext(ctx, "stripe: checkout session completed unpaid; waiting for its payment", "session", s.ID, "payment_status", s.PaymentStatus)
		return nil
	}
	a, err := st.accountByID(ctx, s.Metadata[metaAccount])
	if err != nil {
		return err
	}
	if a == nil {
		log.WarnContext(ctx, "stripe: paid checkout session names no Nimbus account; ignored", "session", s.ID)
		return nil
	}
	if !strings.EqualFold(s.Currency, a.Currency) {
		log.ErrorContext(ctx, "stripe: paid checkout session in another currency than the account's; not credited, settle it by hand",
			"session", s.ID, "currency", s.Currency, "account", a.ID, "account_currency", a.Currency)
		return nil
	}
	amount := Amount(s.AmountTotal) * minorUnit(a.Currency)
	if amount <= 0 {
		return nil
	}
	// The note names the payment intent: a refund's charge is linked to its top-up by it.
	note := fmt.Sprintf("Stripe Checkout %s (payment %s)", s.ID, s.PaymentIntent)
	err = st.svc.Credit(ctx, a.ID, KindTopup, BookStripe, amount, "stripe:checkout:"+s.ID, note)
	if errors.Is(err, ErrDuplicate) {
		log.InfoContext(ctx, "stripe: checkout session already credited", "session", s.ID)
		return nil
	}
	if err != nil {
		return fmt.Errorf("billing: credit stripe checkout %s: %w", s.ID, err)
	}
	log.InfoContext(ctx, "stripe: top-up credited", "session", s.ID, "account", a.ID, "amount", amount.Display())
	return nil
}

// refund debits what a charge has had refunded beyond what earlier deliveries debited.
// Stripe's amount_refunded is cumulative, so a delivery of an older state (out of order, or
// again) finds nothing left to debit.
func (st *Stripe) refund(ctx context.Context, log *slog.Logger, ch *chargeObject) error {
	a, err := st.accountByID(ctx, ch.Metadata[metaAccount])
	if err != nil {
		return err
	}
	if a == nil && ch.Customer != "" {
		var byCustomer Account
		err := st.svc.db.WithContext(ctx).Where("stripe_customer_id = ?", string(ch.Customer)).Take(&byCustomer).Error
		if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
			return fmt.Errorf("billing: account of stripe customer %s: %w", ch.Customer, err)
		}
		if err == nil {
			a = &byCustomer
		}
	}
	if a == nil || ch.PaymentIntent == "" {
		log.InfoContext(ctx, "stripe: refunded charge is not a Nimbus top-up; ignored", "charge", ch.ID)
		return nil
	}
	if !strings.EqualFold(ch.Currency, a.Currency) {
		log.ErrorContext(ctx, "stripe: refunded charge in another currency than the account's; not debited", "charge", ch.ID)
		return nil
	}
	refunded := Amount(ch.AmountRefunded) * minorUnit(a.Currency)
	debited, err := st.svc.refundCharge(ctx, a.ID, ch.ID, string(ch.PaymentIntent), refunded)
	if errors.Is(err, errNotCredited) {
		log.WarnContext(ctx, "stripe: refund of a payment not credited yet; Stripe will deliver it again", "charge", ch.ID)
		return fault.Conflict("charge %s refunds payment %s, which is not credited yet; deliver the event again later", ch.ID, ch.PaymentIntent)
	}
	if err != nil {
		return err
	}
	if debited > 0 {
		log.InfoContext(ctx, "stripe: refund debited", "charge", ch.ID, "account", a.ID, "amount", debited.Display())
	}
	return nil
}

// errNotCredited: the refunded payment has no top-up in the ledger (yet).
var errNotCredited = errors.New("billing: the refunded payment is not credited")

// refundCharge brings the refunds of one Stripe charge of the account up to refunded (the
// charge's cumulative amount_refunded) and returns the amount it debited now. Under the account
// lock it adds up what earlier deliveries debited, so concurrent or reordered deliveries never
// debit a unit twice; each level of refunded has its own ledger key.
func (s *Service) refundCharge(ctx context.Context, accountID int64, chargeID, paymentIntent string, refunded Amount) (Amount, error) {
	now := s.clock.Now().UTC()
	var debit Amount
	err := store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		debit = 0
		a, err := lockAccount(tx, accountID)
		if err != nil {
			return err
		}
		var txns []Txn
		if err := tx.Where("account_id = ? AND kind IN ?", accountID, []string{KindTopup, KindRefund}).Find(&txns).Error; err != nil {
			return err
		}
		credited, done := false, Amount(0)
		prefix := "stripe:refund:" + chargeID + ":"
		for _, t := range txns {
			switch {
			case t.Kind == KindTopup && strings.HasSuffix(t.Note, "(payment "+paymentIntent+")"):
				credited = true
			case t.Kind == KindRefund && strings.HasPrefix(t.IdempotencyKey, prefix):
				done += t.Amount
			}
		}
		if !credited {
			return errNotCredited
		}
		if refunded <= done {
			return nil
		}
		debit = refunded - done
		legs, fromBalance := refundLegs(accountID, a.Balance, debit)
		t := &Txn{AccountID: accountID, Kind: KindRefund, IdempotencyKey: fmt.Sprintf("%s%d", prefix, refunded), Amount: debit,
			Note: fmt.Sprintf("Stripe refund of charge %s (payment %s)", chargeID, paymentIntent)}
		if err := post(tx, t, legs, now); err != nil {
			return err
		}
		a.Balance -= fromBalance
		return s.alerts(tx, a, now)
	})
	if errors.Is(err, ErrDuplicate) {
		return 0, nil
	}
	return debit, err
}

// refundLegs takes amount back to the stripe book: from the balance as far as it goes, the rest
// (money already spent) written off, so that no account goes below zero.
func refundLegs(accountID int64, balance, amount Amount) ([]leg, Amount) {
	fromBalance := min(amount, max(balance, 0))
	legs := []leg{{accountID, BookAvailable, -fromBalance}, {0, BookStripe, amount}}
	if fromBalance < amount {
		legs = append(legs, leg{0, BookWriteoff, -(amount - fromBalance)})
	}
	return legs, fromBalance
}
