package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Locker is the part of the server's API that holds the locks of stages and jobs
// (protocol/locks.go). The agent's client implements it; a runner whose API does not fails
// stages and jobs with a lock.
type Locker interface {
	Lock(ctx context.Context, leaseID string, req protocol.LockRequest) (protocol.LockResponse, error)
	Unlock(ctx context.Context, leaseID string, req protocol.LockRequest) error
}

// holdLock takes lk for scope (a stage or job of this pipeline) and returns its release. A busy
// lock is an error at once, or, with lk.Wait, after lk.Timeout (an hour when 0) of asking again
// every WaitPollInterval; note tells people that it waits and for whom. Waiting for a stage's
// or job's lock happens inside a running pipeline, so unlike a pipeline's own lock (which the
// scheduler holds before any agent is involved) it is run time.
func (x *run) holdLock(ctx context.Context, lk *protocol.Lock, scope string, note func(format string, args ...any)) (func(), error) {
	lc, ok := x.cfg.API.(Locker)
	if !ok {
		return nil, fmt.Errorf("lock %q: this agent cannot take locks", lk.Key)
	}
	// Masked once (reports.go), so the release names the lock the take named.
	req := maskReport(protocol.LockRequest{Key: lk.Key, Scope: scope, Expires: lk.Expires}, x.secretList())
	timeout := lk.Timeout.Std()
	if timeout <= 0 {
		timeout = time.Hour
	}
	deadline := time.Now().Add(timeout)
	waited := false
	for {
		res, err := lc.Lock(ctx, x.lease.ID, req)
		if err != nil {
			return nil, err
		}
		if res.Acquired {
			if waited {
				note("lock %q: taken", lk.Key)
			}
			return func() { x.releaseLock(lc, req) }, nil
		}
		if !lk.Wait {
			return nil, fmt.Errorf("lock %q is held by %s (this %s does not wait: lock.wait is false)", lk.Key, res.Holder, scope)
		}
		if !waited {
			note("waiting for lock %q held by %s", lk.Key, res.Holder)
			waited = true
		}
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("gave up waiting for lock %q after %s (lock.timeout)", lk.Key, timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(x.cfg.WaitPollInterval, time.Until(deadline)+time.Millisecond)):
		}
	}
}

// releaseLock gives a lock back when its stage or job ends, even if the run is being stopped;
// the server releases what a pipeline still holds when it ends, so a failure here only delays
// the next holder until then.
func (x *run) releaseLock(lc Locker, req protocol.LockRequest) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := lc.Unlock(ctx, x.lease.ID, req); err != nil {
		x.cfg.Log.Warn("release a lock; the server frees it when the pipeline ends", "lease", x.lease.ID, "lock", req.Key, "err", err)
	}
}
