package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestAfter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		p    Policy
		n    int
		want time.Duration
	}{
		{"first", Policy{Initial: 30 * time.Second, Max: time.Hour}, 1, 30 * time.Second},
		{"below one counts as one", Policy{Initial: 30 * time.Second, Max: time.Hour}, 0, 30 * time.Second},
		{"doubles", Policy{Initial: 30 * time.Second, Max: time.Hour}, 3, 2 * time.Minute},
		{"last below the cap", Policy{Initial: 30 * time.Second, Max: time.Hour}, 7, 32 * time.Minute},
		{"capped", Policy{Initial: 30 * time.Second, Max: time.Hour}, 8, time.Hour},
		{"capped for ever", Policy{Initial: 30 * time.Second, Max: time.Hour}, 1000, time.Hour},
		{"no cap", Policy{Initial: time.Second}, 5, 16 * time.Second},
		{"no cap stops before it overflows", Policy{Initial: time.Second}, 200, time.Second << 32},
		{"linear", Policy{Initial: time.Second, Linear: true}, 3, 3 * time.Second},
		{"linear capped", Policy{Initial: time.Second, Max: 2 * time.Second, Linear: true}, 3, 2 * time.Second},
	} {
		if got := tc.p.After(tc.n); got != tc.want {
			t.Errorf("%s: After(%d) = %s, want %s", tc.name, tc.n, got, tc.want)
		}
	}
}

func TestNext(t *testing.T) {
	t.Parallel()
	p := Policy{Initial: 250 * time.Millisecond, Max: 5 * time.Second}
	for _, tc := range []struct {
		prev, want time.Duration
	}{
		{0, 250 * time.Millisecond},
		{250 * time.Millisecond, 500 * time.Millisecond},
		{100 * time.Millisecond, 250 * time.Millisecond}, // never below Initial
		{4 * time.Second, 5 * time.Second},
		{5 * time.Second, 5 * time.Second},
	} {
		if got := p.Next(tc.prev); got != tc.want {
			t.Errorf("Next(%s) = %s, want %s", tc.prev, got, tc.want)
		}
	}
}

func TestJitterStaysWithinItsFraction(t *testing.T) {
	t.Parallel()
	p := Policy{Initial: time.Second, Max: 8 * time.Second, Jitter: 0.2}
	seen := map[time.Duration]bool{}
	for range 200 {
		d := p.After(2)
		if d < 1600*time.Millisecond || d > 2400*time.Millisecond {
			t.Fatalf("After(2) = %s, want 2s ± 20%%", d)
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Fatal("jitter never changed the wait")
	}
}

func TestSleep(t *testing.T) {
	t.Parallel()
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) || time.Since(start) > time.Second {
		t.Fatalf("Sleep on an ended context: %v after %s", err, time.Since(start))
	}
}
