package scheduler

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

func lockedPipeline(lock string) string {
	return `
main:
  push:
    - name: train
      runner: { tags: cnb:arch:amd64, cpus: 4 }
      lock: ` + lock + `
      stages:
        - name: train
          script: echo a
`
}

// pushLeased pushes cnb and polls once: the lease (nil when none) and the new pipeline's id.
func (f *fixture) pushAndPoll(a *Agent, cnb string) (*protocol.Lease, int64) {
	f.t.Helper()
	bs := f.push("main", cnb)
	var p build.Pipeline
	if err := f.db.Omit("plan").Where("build_id = ?", bs[0].ID).Take(&p).Error; err != nil {
		f.t.Fatal(err)
	}
	return f.poll(a, 8), p.ID
}

func (f *fixture) finish(a *Agent, l *protocol.Lease, status string) {
	f.t.Helper()
	if err := f.agentFinish(context.Background(), a, l.ID, protocol.FinishRequest{Status: status}); err != nil {
		f.t.Fatal(err)
	}
}

func TestLockBusyFailsAtOnceAndFreesOnFinish(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond})
		a := f.agent("a", 16)
		first, _ := f.pushAndPoll(a, lockedPipeline("true"))
		if first == nil {
			t.Fatal("the first pipeline did not run")
		}
		busy, id := f.pushAndPoll(a, lockedPipeline("true"))
		if busy != nil {
			t.Fatalf("a second holder of lock main-train ran: %+v", busy)
		}
		p := f.pipeline(id)
		if p.Status != build.StatusFailed || !strings.Contains(p.Reason, `lock "main-train" is held by build #1 (pipeline train)`) || p.StartedAt != nil {
			t.Fatalf("the busy pipeline: %s %q started %v", p.Status, p.Reason, p.StartedAt)
		}
		// It never ran: no host, and its stage is skipped like its job, not a green success.
		var stages []build.Stage
		db.Where("pipeline_id = ?", id).Find(&stages)
		if p.Host != "" || len(stages) != 1 || stages[0].Status != build.StatusSkipped {
			t.Fatalf("the refused pipeline names host %q; its stages: %+v", p.Host, stages)
		}
		f.finish(a, first, "success")
		if next, _ := f.pushAndPoll(a, lockedPipeline("true")); next == nil {
			t.Fatal("the lock was not freed when its holder finished")
		}
	})
}

func TestLockWaitParksFreeOfChargeThenRunsInOrder(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond})
		ctx := context.Background()
		a := f.agent("a", 16)
		wait := lockedPipeline("{ key: gpu-box, wait: true, timeout: 10m }")
		holder, _ := f.pushAndPoll(a, wait)
		if holder == nil {
			t.Fatal("the first pipeline did not run")
		}
		second, secondID := f.pushAndPoll(a, wait)
		third, thirdID := f.pushAndPoll(a, wait)
		if second != nil || third != nil {
			t.Fatalf("waiters ran while the lock was held: %+v %+v", second, third)
		}
		for _, id := range []int64{secondID, thirdID} {
			p := f.pipeline(id)
			if p.Status != build.StatusQueued || p.StartedAt != nil || p.AgentID != "" {
				t.Fatalf("waiter %d: %s started %v agent %q", id, p.Status, p.StartedAt, p.AgentID)
			}
			if why := f.sched.Reasons(ctx, []build.Pipeline{p})[id]; why != `waiting for lock "gpu-box" held by build #1 (pipeline train)` {
				t.Fatalf("waiter %d's reason: %q", id, why)
			}
		}
		// The reconciler leaves waiters off the queues.
		if n, err := f.sched.Reconcile(ctx); err != nil || n != 0 {
			t.Fatalf("reconcile re-queued %d (%v)", n, err)
		}
		if l := f.poll(a, 16); l != nil {
			t.Fatalf("a waiter was leased while the lock was held: %+v", l)
		}

		// The holder ends: the oldest waiter runs, the other still waits.
		f.finish(a, holder, "failed")
		next := f.poll(a, 16)
		if next == nil || next.PipelineID != secondID {
			t.Fatalf("after the holder ended: %+v, want pipeline %d", next, secondID)
		}
		if l := f.poll(a, 16); l != nil {
			t.Fatalf("the third pipeline ran beside the second: %+v", l)
		}
		if why := f.sched.Reasons(ctx, []build.Pipeline{f.pipeline(thirdID)})[thirdID]; !strings.Contains(why, "held by build #2") {
			t.Fatalf("the third waits for %q", why)
		}

		// Past its timeout a waiter fails.
		f.clock.Advance(11 * time.Minute)
		f.sched.Renew(ctx, a, next.ID)
		if _, err := f.sched.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		if p := f.pipeline(thirdID); p.Status != build.StatusFailed || !strings.Contains(p.Reason, `gave up waiting for lock "gpu-box"`) {
			t.Fatalf("the timed-out waiter: %s %q", p.Status, p.Reason)
		}
	})
}

func TestLockCancelInProgressCancelsTheHolder(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond})
		ctx := context.Background()
		a := f.agent("a", 16)
		cfg := lockedPipeline("{ key: pr, cancel-in-progress: true }")
		first, firstID := f.pushAndPoll(a, cfg)
		second, secondID := f.pushAndPoll(a, cfg)
		if first == nil || second == nil || second.PipelineID != secondID {
			t.Fatalf("leases %+v %+v", first, second)
		}
		r, err := f.sched.Renew(ctx, a, first.ID)
		if err != nil || !r.Cancel {
			t.Fatalf("the first holder was not told to stop: %+v %v", r, err)
		}
		f.finish(a, first, "cancelled")
		if p := f.pipeline(firstID); p.Status != build.StatusCancelled || !strings.Contains(p.Reason, `lock "pr" was taken by build #2`) {
			t.Fatalf("the first pipeline: %s %q", p.Status, p.Reason)
		}
		// Its end did not free the lock its successor holds.
		h, held, err := f.sched.locks.Holder(ctx, lockRef{RepoID: f.repoID, Key: "pr"}, f.clock.Now())
		if err != nil || !held || h.PipelineID != secondID {
			t.Fatalf("holder after the cancel: %+v %v %v", h, held, err)
		}
	})
}

func TestLockCancelInWaitKeepsOnlyTheNewestWaiter(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond})
		a := f.agent("a", 16)
		cfg := lockedPipeline("{ key: deploy, wait: true, cancel-in-wait: true }")
		holder, _ := f.pushAndPoll(a, cfg)
		_, older := f.pushAndPoll(a, cfg)
		_, newer := f.pushAndPoll(a, cfg)
		if p := f.pipeline(older); p.Status != build.StatusCancelled || !strings.Contains(p.Reason, "cancel-in-wait") {
			t.Fatalf("the older waiter: %s %q", p.Status, p.Reason)
		}
		if p := f.pipeline(newer); p.Status != build.StatusQueued {
			t.Fatalf("the newer waiter: %s", p.Status)
		}
		f.finish(a, holder, "success")
		if l := f.poll(a, 16); l == nil || l.PipelineID != newer {
			t.Fatalf("after the holder: %+v, want %d", l, newer)
		}
	})
}

// A holder that ended without releasing (its replica died between the two) does not hold the
// lock forever: the reconciler frees it and the waiter runs.
func TestReconcileFreesALockWhoseHolderIsGone(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond})
		ctx := context.Background()
		a := f.agent("a", 16)
		cfg := lockedPipeline("{ wait: true }")
		holder, holderID := f.pushAndPoll(a, cfg)
		_, waiter := f.pushAndPoll(a, cfg)
		p := f.pipeline(holderID)
		p.LeaseID = holder.ID
		if ok, err := f.builds.End(ctx, &p, build.StatusFailed, "test: ended behind the scheduler's back"); !ok || err != nil {
			t.Fatalf("end: %v %v", ok, err)
		}
		if _, err := f.sched.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		if l := f.poll(a, 16); l == nil || l.PipelineID != waiter {
			t.Fatalf("after the reconcile: %+v, want %d", l, waiter)
		}
	})
}

func TestLocksAreKeptPerRepository(t *testing.T) {
	ctx := context.Background()
	l := &Locks{rdb: isolatedRedis(t)}
	a, b := lockHolder{PipelineID: 1, Display: "a"}, lockHolder{PipelineID: 2, Display: "b"}
	now := time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		r    lockRef
		h    lockHolder
		want bool
	}{
		{lockRef{RepoID: 1, Key: "k"}, a, true},
		{lockRef{RepoID: 2, Key: "k"}, b, true},  // same key, another repo
		{lockRef{RepoID: 1, Key: "k"}, b, false}, // same repo: busy
		{lockRef{RepoID: 1, Key: "k"}, a, true},  // its holder again
	} {
		got, cur, err := l.Acquire(ctx, c.r, c.h, now, time.Minute)
		if err != nil || got != c.want {
			t.Fatalf("acquire %+v by %d: %v (holder %+v) %v", c.r, c.h.PipelineID, got, cur, err)
		}
	}
	// Only the holder's release frees it, and expiry frees it too.
	if ok, _ := l.Release(ctx, lockRef{RepoID: 1, Key: "k"}, b); ok {
		t.Fatal("another pipeline released the lock")
	}
	if freed, err := l.ReleaseAll(ctx, 1); err != nil || len(freed) != 1 || freed[0].RepoID != 1 {
		t.Fatalf("release all: %+v %v", freed, err)
	}
	// A hold expires at its time, by the caller's clock.
	r := lockRef{RepoID: 9, Key: "short"}
	if got, _, _ := l.Acquire(ctx, r, a, now, time.Minute); !got {
		t.Fatal("acquire")
	}
	if _, held, _ := l.Holder(ctx, r, now.Add(59*time.Second)); !held {
		t.Fatal("the lock expired early")
	}
	if _, held, _ := l.Holder(ctx, r, now.Add(time.Minute)); held {
		t.Fatal("the lock outlived its expiry")
	}
	if got, _, _ := l.Acquire(ctx, r, b, now.Add(time.Minute), time.Minute); !got {
		t.Fatal("an expired lock could not be taken")
	}
}

// The agent's stage and job locks: held per pipeline and scope, released by the agent or at the
// pipeline's end, and refused for a lease the agent does not hold.
func TestAgentLocksForStagesAndJobs(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond})
		ctx := context.Background()
		a, b := f.agent("a", 16), f.agent("b", 16)
		l1, _ := f.pushAndPoll(a, oneJob)
		l2, _ := f.pushAndPoll(b, oneJob)
		stage := protocol.LockRequest{Key: "db", Scope: `stage "migrate"`}
		if res, err := f.sched.Lock(ctx, a, l1.ID, stage); err != nil || !res.Acquired {
			t.Fatalf("lock: %+v %v", res, err)
		}
		if res, err := f.sched.Lock(ctx, a, l1.ID, stage); err != nil || !res.Acquired {
			t.Fatalf("the same holder again: %+v %v", res, err)
		}
		// Another scope of the same pipeline is another holder.
		if res, _ := f.sched.Lock(ctx, a, l1.ID, protocol.LockRequest{Key: "db", Scope: `job "migrate/x"`}); res.Acquired {
			t.Fatal("a job took the lock its own stage holds")
		}
		res, err := f.sched.Lock(ctx, b, l2.ID, protocol.LockRequest{Key: "db", Scope: `job "train/a"`})
		if err != nil || res.Acquired || res.Holder != `build #1 (pipeline train, stage "migrate")` {
			t.Fatalf("a busy lock: %+v %v", res, err)
		}
		if _, err := f.sched.Lock(ctx, a, l2.ID, stage); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("a lock for another agent's lease: %v", err)
		}
		if _, err := f.sched.Lock(ctx, a, l1.ID, protocol.LockRequest{Key: "", Scope: "x"}); err == nil {
			t.Fatal("an empty key was accepted")
		}
		if err := f.sched.Unlock(ctx, a, l1.ID, stage); err != nil {
			t.Fatal(err)
		}
		if res, _ := f.sched.Lock(ctx, b, l2.ID, protocol.LockRequest{Key: "db", Scope: `job "train/a"`}); !res.Acquired {
			t.Fatal("the lock was not freed by its release")
		}
		// The pipeline's end frees what it still holds.
		f.finish(b, l2, "success")
		if h, held, _ := f.sched.locks.Holder(ctx, lockRef{RepoID: f.repoID, Key: "db"}, f.clock.Now()); held {
			t.Fatalf("held after its pipeline ended: %+v", h)
		}
		// An ended pipeline's lease takes nothing any more.
		if _, err := f.sched.Lock(ctx, b, l2.ID, protocol.LockRequest{Key: "db", Scope: `job "train/a"`}); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("a lock for an ended pipeline: %v", err)
		}
	})
}
