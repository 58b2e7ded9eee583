package app

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nimbus-build/nimbus/backend/billing"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/scheduler"
)

// The scheduler reads billing's refusals only through the meter: each "cannot pay" becomes its
// end reason and the sentence people read, and any other failure passes untouched (the
// scheduler then retries rather than failing the pipeline).
func TestMeterRefusals(t *testing.T) {
	reset := errors.New("billing: connection reset")
	for _, tc := range []struct {
		name   string
		err    error
		reason string
		detail string
	}{
		{"balance", fmt.Errorf("%w: the first 5-minute window costs 0.6667 CNY, the balance is 0.0000 CNY", billing.ErrInsufficientBalance),
			build.ReasonInsufficientBalance, "the first 5-minute window costs 0.6667 CNY, the balance is 0.0000 CNY"},
		{"bare balance", billing.ErrInsufficientBalance, build.ReasonInsufficientBalance, ""},
		{"cap", fmt.Errorf("%w: 100.0000 CNY this month", billing.ErrSpendingCap), build.ReasonSpendingCap, "100.0000 CNY this month"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r *scheduler.Refusal
			if err := refused(tc.err); !errors.As(err, &r) || r.Reason != tc.reason || r.Detail != tc.detail {
				t.Fatalf("refused(%v) = %#v, want reason %q detail %q", tc.err, err, tc.reason, tc.detail)
			}
		})
	}
	if err := refused(reset); err != reset {
		t.Fatalf("another failure became %v", err)
	}
	if err := refused(nil); err != nil {
		t.Fatalf("nil became %v", err)
	}
}

// build shows billing's zero for a pipeline billing does not answer for; the two must agree.
func TestNoCostIsBillingsZero(t *testing.T) {
	if got := billing.Amount(0).Display(); got != build.NoCost {
		t.Fatalf("billing displays zero as %q, build.NoCost is %q", got, build.NoCost)
	}
}
