package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/agent/internal/fakeserver"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// fast keeps retry tests quick while still exercising the backoff.
var fast = Options{Retry: Retry{Initial: time.Millisecond, Max: 5 * time.Millisecond, GiveUpAfter: 2 * time.Second}}

// scripted answers the statuses in order (the last one repeats) and counts the attempts.
func scripted(t *testing.T, statuses ...int) (*Client, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		st := statuses[min(i, len(statuses)-1)]
		switch {
		case st == http.StatusConflict:
			w.WriteHeader(st)
			w.Write([]byte(`{"error":{"code":"lease_lost","message":"reaped"}}`))
		case st == 490: // a 409 with another code
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"error":{"code":"conflict","message":"other"}}`))
		case st >= 400:
			w.WriteHeader(st)
			w.Write([]byte(`{"error":{"code":"x","message":"status"}}`))
		default:
			w.Write([]byte(`{"expiresAt":"2030-01-01T00:00:00Z"}`))
		}
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, "tok", fast)
	if err != nil {
		t.Fatal(err)
	}
	return c, &n
}

func TestRetryClassifier(t *testing.T) {
	tests := []struct {
		name     string
		statuses []int
		attempts int32
		ok       bool
		is       error
	}{
		{"success at once", []int{200}, 1, true, nil},
		{"5xx are retried", []int{500, 502, 503, 200}, 4, true, nil},
		{"429 is retried", []int{429, 200}, 2, true, nil},
		{"400 is final", []int{400, 200}, 1, false, nil},
		{"404 is final", []int{404, 200}, 1, false, nil},
		{"401 is final and says so", []int{401, 200}, 1, false, ErrUnauthenticated},
		{"409 lease_lost is final and says so", []int{409, 200}, 1, false, ErrLeaseLost},
		{"a 409 with another code is not lease_lost", []int{490, 200}, 1, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, n := scripted(t, tt.statuses...)
			_, err := c.Renew(context.Background(), "l1")
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok=%v", err, tt.ok)
			}
			if got := n.Load(); got != tt.attempts {
				t.Fatalf("%d attempts, want %d", got, tt.attempts)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Fatalf("err = %v, want errors.Is %v", err, tt.is)
			}
			if tt.is == nil && (errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrUnauthenticated)) {
				t.Fatalf("err = %v matches a sentinel it should not", err)
			}
			var api *APIError
			if !tt.ok && !errors.As(err, &api) {
				t.Fatalf("err = %v is not an *APIError", err)
			}
		})
	}
}

func TestRetryGivesUpOnPersistentFailure(t *testing.T) {
	c, n := scripted(t, 503)
	c.retry.GiveUpAfter = time.Second // room for several 5 ms-capped retries on a loaded machine
	start := time.Now()
	_, err := c.Renew(context.Background(), "l1")
	var api *APIError
	if !errors.As(err, &api) || api.Status != 503 || n.Load() < 3 {
		t.Fatalf("err = %v after %d attempts", err, n.Load())
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("gave up after %v, want about 1 s (not the minute of the default policy)", took)
	}
}

func TestNetworkErrorsAreRetried(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			// The connection dies without an answer, as when a proxy or the server crashes.
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "tok", fast)
	if err := c.Event(context.Background(), "l1", protocol.Event{Kind: protocol.EventPipelineStarted}); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 3 {
		t.Fatalf("%d attempts, want 3", n.Load())
	}

	url := srv.URL
	srv.Close() // nothing listens there any more: connection refused until the policy gives up
	c, _ = New(url, "tok", Options{Retry: Retry{Initial: time.Millisecond, Max: 2 * time.Millisecond, GiveUpAfter: 50 * time.Millisecond}})
	if _, err := c.Renew(context.Background(), "l1"); err == nil || !strings.Contains(err.Error(), "gave up") {
		t.Fatalf("err = %v", err)
	}
}

func TestRetryAfterIsHonouredAndCapped(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", "3600") // capped at Retry.Max
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "tok", Options{Retry: Retry{Initial: time.Millisecond, Max: 150 * time.Millisecond, GiveUpAfter: 5 * time.Second}})
	start := time.Now()
	if err := c.Finish(context.Background(), "l1", protocol.FinishRequest{Status: "success"}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 150*time.Millisecond || took > 2*time.Second {
		t.Fatalf("waited %v, want the capped 150ms", took)
	}
}

func TestCancelStopsBackoff(t *testing.T) {
	c, _ := scripted(t, 503)
	c.retry = Retry{Initial: time.Hour, Max: time.Hour, GiveUpAfter: 10 * time.Hour}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Renew(ctx, "l1")
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Fatalf("err = %v after %v", err, time.Since(start))
	}
}

func TestBadServerURL(t *testing.T) {
	for _, u := range []string{"", "ftp://x", "127.0.0.1:8080", "http://"} {
		if _, err := New(u, "", Options{}); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
}

// TestRoundTrip goes through every call against the fake control plane over real HTTP.
func TestRoundTrip(t *testing.T) {
	srv := fakeserver.New(t)
	ctx := context.Background()
	anon, err := New(srv.URL, "", fast)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := anon.Register(ctx, "wrong", protocol.RegisterRequest{Name: "a"}); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("register with a bad token: %v", err)
	}
	reg, err := anon.Register(ctx, srv.RegistrationToken, protocol.RegisterRequest{Name: "a", CPUs: 4, Tags: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	if reg.Token != srv.AgentToken || reg.HeartbeatInterval.Std() != 200*time.Millisecond {
		t.Fatalf("register answer %+v", reg)
	}
	if got := srv.Registrations(); len(got) != 1 || got[0].CPUs != 4 {
		t.Fatalf("server saw %+v", got)
	}
	c := anon.WithToken(reg.Token)
	if _, err := anon.Poll(ctx, protocol.PollRequest{FreeCPUs: 1}); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("WithToken changed the original client: %v", err)
	}

	lease, err := c.Poll(ctx, protocol.PollRequest{FreeCPUs: 4})
	if err != nil || lease != nil {
		t.Fatalf("empty poll: %v %v", lease, err)
	}
	srv.Enqueue(protocol.Lease{ID: "lease/1", PipelineID: 7, Jobs: []protocol.JobRef{{ID: 11}}})
	lease, err = c.Poll(ctx, protocol.PollRequest{FreeCPUs: 4, Running: []string{"x"}})
	if err != nil || lease == nil || lease.ID != "lease/1" || lease.PipelineID != 7 {
		t.Fatalf("poll: %+v %v", lease, err)
	}
	if p := srv.Polls(); len(p) != 2 || p[1].Running[0] != "x" {
		t.Fatalf("polls %+v", p)
	}

	if r, err := c.Renew(ctx, lease.ID); err != nil || r.Cancel || r.ExpiresAt.IsZero() {
		t.Fatalf("renew: %+v %v", r, err)
	}
	code := 3
	if err := c.Event(ctx, lease.ID, protocol.Event{Kind: protocol.EventJobFinished, JobID: 11, Status: "failed", ExitCode: &code}); err != nil {
		t.Fatal(err)
	}
	if off, err := c.AppendLog(ctx, lease.ID, 11, 0, []byte("hello ")); err != nil || off != 6 {
		t.Fatalf("append: %d %v", off, err)
	}
	if off, err := c.AppendLog(ctx, lease.ID, 11, 3, []byte("lo world")); err != nil || off != 11 {
		t.Fatalf("overlapping append: %d %v", off, err)
	}
	if off, err := c.AppendLog(ctx, lease.ID, 11, 20, []byte("gap")); err != nil || off != 11 {
		t.Fatalf("append past a gap: %d %v", off, err)
	}
	srv.CancelLease(lease.ID, "user")
	if r, err := c.Renew(ctx, lease.ID); err != nil || !r.Cancel || r.Reason != "user" {
		t.Fatalf("renew after cancel: %+v %v", r, err)
	}
	if err := c.Finish(ctx, lease.ID, protocol.FinishRequest{Status: "cancelled"}); err != nil {
		t.Fatal(err)
	}
	got := srv.Get(lease.ID)
	if string(got.Logs[11]) != "hello world" || got.Finish.Status != "cancelled" || len(got.Events) != 1 ||
		*got.Events[0].ExitCode != 3 || got.Renews != 2 {
		t.Fatalf("server record %+v logs %q", got, got.Logs[11])
	}

	srv.LoseLease(lease.ID)
	if _, err := c.Renew(ctx, lease.ID); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("renew of a lost lease: %v", err)
	}
	if _, err := c.AppendLog(ctx, lease.ID, 11, 11, []byte("x")); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("log on a lost lease: %v", err)
	}
}
