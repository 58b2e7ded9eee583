package outbox

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/internal/backoff"
)

// receiver counts the sends of each ref and answers with the error set for it.
type receiver struct {
	mu    sync.Mutex
	sends map[int64]int
	fail  error
}

func (r *receiver) handle(_ context.Context, m Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sends[m.Ref]++
	return r.fail
}

func (r *receiver) answer(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = err
}

func (r *receiver) count(ref int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sends[ref]
}

type world struct {
	t     *testing.T
	db    *gorm.DB
	clock *clock.Fake
	recv  *receiver
}

func newWorld(t *testing.T, db *gorm.DB) *world {
	return &world{t: t, db: db, clock: clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), recv: &receiver{sends: map[int64]int{}}}
}

// server is one server's outbox on the shared database: "test" messages wait 1 min doubling
// to 8 min, and 3 failed attempts make them dead.
func (w *world) server() *Outbox {
	o := New(Config{DB: w.db, Clock: w.clock, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Lease: time.Minute})
	o.Register("test", Kind{Handle: w.recv.handle, Retry: backoff.Policy{Initial: time.Minute, Max: 8 * time.Minute}, MaxAttempts: 3})
	return o
}

func (w *world) enqueue(ref int64) {
	w.t.Helper()
	err := w.db.Transaction(func(tx *gorm.DB) error { return Enqueue(context.Background(), tx, "test", ref, w.clock.Now()) })
	if err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) deliver(o *Outbox) int {
	w.t.Helper()
	n, err := o.Deliver(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

func (w *world) message(o *Outbox, ref int64) Message {
	w.t.Helper()
	m, err := o.Lookup(context.Background(), "test", ref)
	if err != nil {
		w.t.Fatal(err)
	}
	return m
}

func TestEnqueueInTheEventsTransaction(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		w := newWorld(t, db)
		o := w.server()
		// An event rolled back leaves no message.
		boom := errors.New("the event failed")
		err := db.Transaction(func(tx *gorm.DB) error {
			if err := Enqueue(context.Background(), tx, "test", 1, w.clock.Now()); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatal(err)
		}
		if n := w.deliver(o); n != 0 || w.recv.count(1) != 0 {
			t.Fatalf("a rolled-back event was sent (%d)", n)
		}
		// The same event enqueued twice is sent once.
		w.enqueue(2)
		w.enqueue(2)
		if n := w.deliver(o); n != 1 || w.recv.count(2) != 1 {
			t.Fatalf("delivered %d, sends %d", n, w.recv.count(2))
		}
		if m := w.message(o, 2); m.Status != StatusDelivered || m.Attempts != 1 || m.DeliveredAt == nil {
			t.Fatalf("message %+v", m)
		}
		if n := w.deliver(o); n != 0 || w.recv.count(2) != 1 {
			t.Fatal("a delivered message was sent again")
		}
	})
}

func TestLaterBacksOffAndDiesAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		w := newWorld(t, db)
		o := w.server()
		w.recv.answer(errors.New("503"))
		w.enqueue(1)
		w.deliver(o)
		if m := w.message(o, 1); m.Status != StatusPending || m.Attempts != 1 || m.LastError != "503" || !m.DueAt.Equal(w.clock.Now().Add(time.Minute)) {
			t.Fatalf("after one failure: %+v", m)
		}
		if w.deliver(o); w.recv.count(1) != 1 {
			t.Fatal("retried before its backoff was over")
		}
		w.clock.Advance(time.Minute)
		w.deliver(o)
		if m := w.message(o, 1); m.Attempts != 2 || !m.DueAt.Equal(w.clock.Now().Add(2*time.Minute)) {
			t.Fatalf("the second wait does not double: %+v", m)
		}
		w.clock.Advance(2 * time.Minute)
		w.deliver(o)
		if m := w.message(o, 1); m.Status != StatusDead || m.Attempts != 3 || w.recv.count(1) != 3 {
			t.Fatalf("after MaxAttempts: %+v, %d sends", m, w.recv.count(1))
		}
		w.clock.Advance(time.Hour)
		if w.deliver(o); w.recv.count(1) != 3 {
			t.Fatal("a dead message was sent")
		}
	})
}

func TestPermanentAndNotYet(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		w := newWorld(t, db)
		o := w.server()
		w.recv.answer(Permanent(errors.New("gone")))
		w.enqueue(1)
		w.deliver(o)
		if m := w.message(o, 1); m.Status != StatusDead || m.Attempts != 1 || m.LastError != "gone" {
			t.Fatalf("a permanent failure: %+v", m)
		}
		w.recv.answer(NotYet(30*time.Second, "settling"))
		w.enqueue(2)
		w.deliver(o)
		if m := w.message(o, 2); m.Status != StatusPending || m.Attempts != 0 || !m.DueAt.Equal(w.clock.Now().Add(30*time.Second)) {
			t.Fatalf("not yet: %+v", m)
		}
		w.recv.answer(nil)
		w.clock.Advance(30 * time.Second)
		if n := w.deliver(o); n != 1 {
			t.Fatalf("delivered %d after the wait", n)
		}
	})
}

func TestRequeue(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		w := newWorld(t, db)
		o := w.server()
		w.recv.answer(Permanent(errors.New("410 Gone")))
		w.enqueue(1)
		w.deliver(o)
		dead := w.message(o, 1)
		if dead.Status != StatusDead {
			t.Fatalf("%+v", dead)
		}
		ctx := context.Background()
		w.recv.answer(nil)
		w.clock.Advance(time.Hour)
		if err := o.Requeue(ctx, dead.ID); err != nil {
			t.Fatal(err)
		}
		if m := w.message(o, 1); m.Status != StatusPending || m.Attempts != 0 || !m.DueAt.Equal(w.clock.Now()) {
			t.Fatalf("requeued: %+v", m)
		}
		if n := w.deliver(o); n != 1 || w.recv.count(1) != 2 {
			t.Fatalf("delivered %d, sends %d", n, w.recv.count(1))
		}
		// Only a dead message goes back: a delivered one is never sent again.
		if err := o.Requeue(ctx, dead.ID); !errors.Is(err, ErrNotDead) {
			t.Fatalf("requeue of a delivered message: %v", err)
		}
		if n := w.deliver(o); n != 0 || w.recv.count(1) != 2 {
			t.Fatal("a delivered message was sent again")
		}
	})
}

// Two servers read the same due message; one claim wins and one send happens. A server whose
// lease ran out mid-send cannot record over the server that claimed the message after it.
func TestFencedClaim(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		w := newWorld(t, db)
		a, b := w.server(), w.server()
		ctx := context.Background()
		w.enqueue(1)
		read := w.message(a, 1) // both servers read the row as it is now
		ma, mb := read, read
		now := w.clock.Now()
		okA, err := a.claim(ctx, &ma, now)
		if err != nil {
			t.Fatal(err)
		}
		okB, err := b.claim(ctx, &mb, now)
		if err != nil {
			t.Fatal(err)
		}
		if !okA || okB {
			t.Fatalf("claims: a %v, b %v; want only a", okA, okB)
		}
		if n := w.deliver(b); n != 0 || w.recv.count(1) != 0 {
			t.Fatal("b sent a message a holds")
		}

		// a stalls past its lease; b claims the message again and delivers it; a's late
		// answer records nothing.
		w.clock.Advance(2 * time.Minute)
		if n := w.deliver(b); n != 1 {
			t.Fatalf("b delivered %d after a's lease ran out", n)
		}
		w.recv.answer(errors.New("late failure"))
		if delivered, err := a.handle(ctx, ma, w.clock.Now()); err != nil || delivered {
			t.Fatalf("a's late outcome: %v, %v", delivered, err)
		}
		if m := w.message(a, 1); m.Status != StatusDelivered || m.Attempts != 1 || m.LastError != "" {
			t.Fatalf("a's late failure overwrote b's delivery: %+v", m)
		}
	})
}

// Two servers deliver the same batch at once: every message is sent exactly once.
func TestConcurrentServersSendEachMessageOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		w := newWorld(t, db)
		for ref := range int64(20) {
			w.enqueue(ref)
		}
		servers := []*Outbox{w.server(), w.server()}
		var wg sync.WaitGroup
		for _, o := range servers {
			wg.Go(func() {
				if _, err := o.Deliver(context.Background()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for ref := range int64(20) {
			if n := w.recv.count(ref); n != 1 {
				t.Errorf("message %d sent %d times", ref, n)
			}
		}
	})
}
