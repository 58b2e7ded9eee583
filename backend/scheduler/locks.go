package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Pipeline locks (`lock:` of a pipeline, ../../shared/cnb-reference.md §2.6) are taken when an
// agent's dispatch claims the pipeline, before billing freezes anything and before any agent
// hears of it:
//
//   - the lock is free (or this pipeline holds it): the pipeline runs and holds it until it ends
//     in any way (Finish, the reaper, a billing refusal: see releaseLocks), or until `expires`;
//   - busy, `cancel-in-progress`: the holder is asked to stop (cancelled) and this pipeline takes
//     the lock at once;
//   - busy, `wait`: the pipeline is parked: back to queued, on no class queue, in the lock's
//     wait list in its queue order, so waiting holds no agent, freezes nothing and costs
//     nothing. `cancel-in-wait` first cancels the pipelines already waiting. When the lock is
//     freed the oldest waiter goes back on its class queue; the reconciler's tick also frees
//     locks whose holder is gone, promotes waiters of free (or expired) locks and fails waiters
//     past `timeout`;
//   - busy otherwise: the pipeline fails at once, naming the holder.
//
// Redis holds the locks, so they hold across replicas; keys are per repository, so a lock never
// crosses repositories. A lock's value names its holder ("<pipeline>/<scope>", then a line to
// show people), and only that holder's release deletes it. If Redis loses its data, locks
// are lost with it (pipelines already running keep running) and parked pipelines go back on
// their queues through the reconciler, then wait again if the lock was taken meanwhile.
type Locks struct {
	rdb redis.UniversalClient
}

// lockRef names one lock: a key within a repository.
type lockRef struct {
	RepoID int64
	Key    string
}

func (r lockRef) redisKey() string {
	return "{lock:" + strconv.FormatInt(r.RepoID, 10) + ":" + r.Key + "}"
}
func (r lockRef) waitKey() string { return r.redisKey() + ":wait" }
func (r lockRef) member() string  { return strconv.FormatInt(r.RepoID, 10) + "\t" + r.Key }

func parseLockRef(m string) (lockRef, bool) {
	repo, key, ok := strings.Cut(m, "\t")
	id, err := strconv.ParseInt(repo, 10, 64)
	return lockRef{RepoID: id, Key: key}, ok && err == nil
}

// lockIndex lists the locks that have wait lists, for the reconciler.
const lockIndex = "nimbus:lockwaits"

// heldKey lists the locks one pipeline took, so its end releases them all.
func heldKey(pipelineID int64) string { return "nimbus:lockheld:" + strconv.FormatInt(pipelineID, 10) }

// lockHolder is who holds a lock: a pipeline, for itself (Scope "") or one of its stages or jobs.
type lockHolder struct {
	PipelineID int64
	Scope      string
	Display    string    // "build #3 (pipeline deploy)"
	Expires    time.Time // set by Acquire and Take
}

func (h lockHolder) id() string { return strconv.FormatInt(h.PipelineID, 10) + "/" + h.Scope }

// value is what the lock's key holds: the holder, when the hold expires (the scheduler's clock
// decides, not Redis's TTL: the embedded server's keys do not expire on their own, and tests
// move a fake clock), and what people see.
func (h lockHolder) value() string {
	return h.id() + "\n" + strconv.FormatInt(h.Expires.UnixMilli(), 10) + "\n" + h.Display
}

func parseHolder(v string) lockHolder {
	id, rest, _ := strings.Cut(v, "\n")
	exp, display, _ := strings.Cut(rest, "\n")
	pid, scope, _ := strings.Cut(id, "/")
	n, _ := strconv.ParseInt(pid, 10, 64)
	ms, _ := strconv.ParseInt(exp, 10, 64)
	return lockHolder{PipelineID: n, Scope: scope, Display: display, Expires: time.UnixMilli(ms)}
}

// lockLua reads a lock's value: its holder's id and expiry (ms), or nothing when free or expired
// at ARGV[1] (now, ms).
const lockLua = `
local function holder(v, now)
  if not v then return nil end
  local id, exp = string.match(v, '^([^\n]*)\n(%d+)\n')
  if not id or tonumber(exp) <= tonumber(now) then return nil end
  return id
end
`

// acquireScript takes a free (or expired) lock, or says it is held already by this holder (1) or
// by another (0, with its value).
var acquireScript = redis.NewScript(lockLua + `
local v = redis.call('GET', KEYS[1])
local id = holder(v, ARGV[1])
if not id then
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
  return {1, ''}
end
if id == ARGV[2] then
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
  return {1, v}
end
return {0, v}
`)

// takeScript sets the lock whatever holds it and returns what held it (” when free or expired).
var takeScript = redis.NewScript(lockLua + `
local v = redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
if not holder(v, ARGV[1]) then return '' end
return v
`)

// releaseScript deletes the lock when its holder's id starts with ARGV[1].
var releaseScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`)

// heldTTL outlives any holder: nothing runs longer than 18 hours.
const heldTTL = 19 * time.Hour

// Acquire takes the lock for h until now+ttl unless another holds it; it returns whether h
// holds it now and, when not, who does.
func (l *Locks) Acquire(ctx context.Context, r lockRef, h lockHolder, now time.Time, ttl time.Duration) (bool, lockHolder, error) {
	h.Expires = now.Add(ttl)
	res, err := acquireScript.Run(ctx, l.rdb, []string{r.redisKey()}, now.UnixMilli(), h.id(), h.value(), redisTTL(ttl)).Slice()
	if err != nil {
		return false, lockHolder{}, fmt.Errorf("scheduler: lock %q: %w", r.Key, err)
	}
	if n, _ := res[0].(int64); n == 0 {
		v, _ := res[1].(string)
		return false, parseHolder(v), nil
	}
	return true, h, l.held(ctx, r, h)
}

// Take gives the lock to h whatever holds it, and returns the previous holder (ok false: none).
func (l *Locks) Take(ctx context.Context, r lockRef, h lockHolder, now time.Time, ttl time.Duration) (lockHolder, bool, error) {
	h.Expires = now.Add(ttl)
	v, err := takeScript.Run(ctx, l.rdb, []string{r.redisKey()}, now.UnixMilli(), h.value(), redisTTL(ttl)).Text()
	if err != nil {
		return lockHolder{}, false, fmt.Errorf("scheduler: lock %q: %w", r.Key, err)
	}
	return parseHolder(v), v != "", l.held(ctx, r, h)
}

// redisTTL is the key's TTL in Redis, only to collect it: a minute past the hold.
func redisTTL(ttl time.Duration) int64 { return (ttl + time.Minute).Milliseconds() }

func (l *Locks) held(ctx context.Context, r lockRef, h lockHolder) error {
	key := heldKey(h.PipelineID)
	if err := l.rdb.SAdd(ctx, key, r.member()).Err(); err != nil {
		return fmt.Errorf("scheduler: lock %q: %w", r.Key, err)
	}
	return l.rdb.Expire(ctx, key, heldTTL).Err()
}

// Holder returns who holds a lock at now (ok false: nobody, or the hold expired).
func (l *Locks) Holder(ctx context.Context, r lockRef, now time.Time) (lockHolder, bool, error) {
	v, err := l.rdb.Get(ctx, r.redisKey()).Result()
	if errors.Is(err, redis.Nil) {
		return lockHolder{}, false, nil
	}
	if err != nil {
		return lockHolder{}, false, err
	}
	h := parseHolder(v)
	if !now.Before(h.Expires) {
		return lockHolder{}, false, nil
	}
	return h, true, nil
}

// Release frees a lock if h holds it; it reports whether it did.
func (l *Locks) Release(ctx context.Context, r lockRef, h lockHolder) (bool, error) {
	n, err := releaseScript.Run(ctx, l.rdb, []string{r.redisKey()}, h.id()+"\n").Int()
	return n == 1, err
}

// ReleaseAll frees every lock the pipeline or its stages and jobs hold and returns them.
func (l *Locks) ReleaseAll(ctx context.Context, pipelineID int64) ([]lockRef, error) {
	key := heldKey(pipelineID)
	members, err := l.rdb.SMembers(ctx, key).Result()
	if err != nil || len(members) == 0 {
		return nil, err
	}
	var freed []lockRef
	for _, m := range members {
		r, ok := parseLockRef(m)
		if !ok {
			continue
		}
		n, err := releaseScript.Run(ctx, l.rdb, []string{r.redisKey()}, strconv.FormatInt(pipelineID, 10)+"/").Int()
		if err != nil {
			return freed, err
		}
		if n == 1 {
			freed = append(freed, r)
		}
	}
	return freed, l.rdb.Del(ctx, key).Err()
}

// lockWaiter is a parked pipeline in a lock's wait list.
type lockWaiter struct {
	PipelineID int64
	Deadline   time.Time // when it gives up
	member     string
}

// Wait puts a parked pipeline in the lock's wait list, in queue order.
func (l *Locks) Wait(ctx context.Context, r lockRef, pipelineID int64, queuedAt, deadline time.Time) error {
	m := strconv.FormatInt(pipelineID, 10) + ":" + strconv.FormatInt(deadline.UnixMilli(), 10)
	if err := l.rdb.ZAdd(ctx, r.waitKey(), redis.Z{Score: float64(queuedAt.UnixMilli()), Member: m}).Err(); err != nil {
		return err
	}
	return l.rdb.SAdd(ctx, lockIndex, r.member()).Err()
}

// Waiters lists a lock's wait list, oldest first.
func (l *Locks) Waiters(ctx context.Context, r lockRef) ([]lockWaiter, error) {
	ms, err := l.rdb.ZRange(ctx, r.waitKey(), 0, -1).Result()
	if err != nil {
		return nil, err
	}
	out := make([]lockWaiter, 0, len(ms))
	for _, m := range ms {
		id, dl, _ := strings.Cut(m, ":")
		pid, err1 := strconv.ParseInt(id, 10, 64)
		ms, err2 := strconv.ParseInt(dl, 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, lockWaiter{PipelineID: pid, Deadline: time.UnixMilli(ms), member: m})
	}
	return out, nil
}

// Unwait takes a waiter off the wait list; it reports whether this call did (one promoter wins).
func (l *Locks) Unwait(ctx context.Context, r lockRef, w lockWaiter) (bool, error) {
	n, err := l.rdb.ZRem(ctx, r.waitKey(), w.member).Result()
	return n == 1, err
}

// WaitLists lists the locks with wait lists, dropping the index entries of empty ones.
func (l *Locks) WaitLists(ctx context.Context) ([]lockRef, error) {
	ms, err := l.rdb.SMembers(ctx, lockIndex).Result()
	if err != nil {
		return nil, err
	}
	var out []lockRef
	for _, m := range ms {
		r, ok := parseLockRef(m)
		if !ok {
			l.rdb.SRem(ctx, lockIndex, m)
			continue
		}
		n, err := l.rdb.ZCard(ctx, r.waitKey()).Result()
		if err != nil {
			return nil, err
		}
		if n == 0 {
			l.rdb.SRem(ctx, lockIndex, m)
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// lockWaitPrefix starts the reason of a parked pipeline: `waiting for lock "key" held by …`.
const lockWaitPrefix = build.ReasonLockWaitPrefix

// lockWaitReason is a parked pipeline's reason as it stands now: its lock's current holder (the
// stored reason names the holder it first met).
func (s *Service) lockWaitReason(ctx context.Context, p build.Pipeline) string {
	key, err := strconv.QuotedPrefix(strings.TrimPrefix(p.Reason, lockWaitPrefix))
	if err != nil {
		return p.Reason
	}
	key, _ = strconv.Unquote(key)
	h, held, err := s.locks.Holder(ctx, lockRef{RepoID: p.RepoID, Key: key}, s.clock.Now())
	switch {
	case err != nil:
		return p.Reason
	case held:
		return fmt.Sprintf("%s%q held by %s", lockWaitPrefix, key, h.Display)
	}
	return fmt.Sprintf("%s%q: it is free, so this pipeline runs next", lockWaitPrefix, key)
}

// pipelineLock is the pipeline's own lock (nil: none). Only plans that spell "lock" are decoded.
func pipelineLock(p *build.Pipeline) *protocol.Lock {
	if !strings.Contains(p.Plan, `"lock"`) {
		return nil
	}
	var plan struct {
		Lock *protocol.Lock `json:"lock"`
	}
	if json.Unmarshal([]byte(p.Plan), &plan) != nil {
		return nil
	}
	return plan.Lock
}

// lockDurations are a lock's expiry and wait timeout, with CNB's defaults (an hour each).
func lockDurations(lk *protocol.Lock) (expires, timeout time.Duration) {
	expires, timeout = lk.Expires.Std(), lk.Timeout.Std()
	if expires <= 0 {
		expires = time.Hour
	}
	if timeout <= 0 {
		timeout = time.Hour
	}
	return expires, timeout
}

// takeLock applies the pipeline's lock to a pipeline just claimed (see the comment on Locks). It
// reports whether the pipeline may go on to run; when not, it has been parked or ended here.
func (s *Service) takeLock(ctx context.Context, p *build.Pipeline, lk *protocol.Lock) (bool, error) {
	run, err := s.builds.RunInfo(ctx, p)
	if err != nil {
		return false, err
	}
	r := lockRef{RepoID: p.RepoID, Key: lk.Key}
	me := lockHolder{PipelineID: p.ID, Display: fmt.Sprintf("build #%d (pipeline %s)", run.BuildNumber, p.Name)}
	expires, timeout := lockDurations(lk)
	now := s.clock.Now()
	got, holder, err := s.locks.Acquire(ctx, r, me, now, expires)
	if err != nil || got {
		return got, err
	}
	switch {
	case lk.CancelInProgress:
		prev, had, err := s.locks.Take(ctx, r, me, now, expires)
		if err != nil {
			return false, err
		}
		if had && prev.PipelineID != p.ID {
			reason := fmt.Sprintf("%s: lock %q was taken by %s (cancel-in-progress)", build.ReasonCancelled, lk.Key, me.Display)
			if err := s.builds.RequestStop(ctx, prev.PipelineID, reason); err != nil {
				return false, err
			}
			s.log.InfoContext(ctx, "lock taken over", "lock", lk.Key, "pipeline", p.ID, "cancelled", prev.PipelineID)
		}
		return true, nil
	case lk.Wait:
		if lk.CancelInWait {
			s.cancelWaiters(ctx, r, me)
		}
		if err := s.locks.Wait(ctx, r, p.ID, p.QueuedSince(), now.Add(timeout)); err != nil {
			return false, err
		}
		reason := fmt.Sprintf("%s%q held by %s", lockWaitPrefix, lk.Key, holder.Display)
		parked, err := s.builds.Park(ctx, p, reason)
		if err != nil {
			return false, err
		}
		if !parked {
			// Cancelled since the claim: it ends so, before any agent heard of it.
			if _, err := s.builds.End(ctx, p, build.StatusCancelled, build.ReasonCancelled); err != nil {
				return false, err
			}
			return false, nil
		}
		s.log.InfoContext(ctx, "pipeline waits for a lock", "lock", lk.Key, "pipeline", p.ID, "holder", holder.PipelineID)
		// The holder may have ended between the attempt and the wait list: nobody would wake us.
		if _, held, err := s.locks.Holder(ctx, r, s.clock.Now()); err == nil && !held {
			s.promote(ctx, r)
		}
		return false, nil
	default:
		reason := fmt.Sprintf("lock %q is held by %s (this pipeline does not wait: lock.wait is false)", lk.Key, holder.Display)
		if _, err := s.builds.Refuse(ctx, p, reason); err != nil {
			return false, err
		}
		return false, nil
	}
}

// cancelWaiters cancels every pipeline waiting for the lock (cancel-in-wait: the newest waiter
// is the one that matters).
func (s *Service) cancelWaiters(ctx context.Context, r lockRef, newer lockHolder) {
	s.takeWaiters(ctx, r, func(w lockWaiter) bool {
		reason := fmt.Sprintf("%s: %s waits for lock %q (cancel-in-wait)", build.ReasonCancelled, newer.Display, r.Key)
		if _, err := s.builds.Drop(ctx, w.PipelineID, build.StatusCancelled, reason); err != nil {
			s.log.WarnContext(ctx, "cancel a lock waiter", "pipeline", w.PipelineID, "err", err)
		}
		return false
	})
}

// releaseLocks frees what an ended (or re-queued) pipeline held and wakes the next waiter of each.
func (s *Service) releaseLocks(ctx context.Context, p *build.Pipeline) {
	freed, err := s.locks.ReleaseAll(ctx, p.ID)
	if err != nil {
		// The reconciler frees locks whose holder is gone; expiry bounds the rest.
		s.log.WarnContext(ctx, "release locks", "pipeline", p.ID, "err", err)
	}
	for _, r := range freed {
		s.promote(ctx, r)
	}
}

// promote puts the oldest pipeline still waiting for a free lock back on its class queue and
// returns it (0: none). It takes the lock when it is dispatched (and waits again if another took
// it first).
func (s *Service) promote(ctx context.Context, r lockRef) int64 {
	var promoted int64
	s.takeWaiters(ctx, r, func(w lockWaiter) bool {
		q, err := s.builds.QueuedPipeline(ctx, w.PipelineID)
		if err != nil {
			s.log.WarnContext(ctx, "promote a lock waiter", "pipeline", w.PipelineID, "err", err)
			return false
		}
		if q == nil {
			return false // cancelled while it waited
		}
		if err := s.in.Enqueue(ctx, q); err != nil {
			s.log.WarnContext(ctx, "promote a lock waiter; the reconciler re-queues it", "pipeline", w.PipelineID, "err", err)
		}
		promoted = w.PipelineID
		return true
	})
	return promoted
}

// takeWaiters takes the lock's waiters off its wait list, oldest first, and hands each to fn
// until fn says it is done. A waiter another replica took first is skipped.
func (s *Service) takeWaiters(ctx context.Context, r lockRef, fn func(lockWaiter) (done bool)) {
	ws, err := s.locks.Waiters(ctx, r)
	if err != nil {
		s.log.WarnContext(ctx, "lock waiters", "lock", r.Key, "err", err)
		return
	}
	for _, w := range ws {
		if ok, err := s.locks.Unwait(ctx, r, w); err != nil || !ok {
			continue
		}
		if fn(w) {
			return
		}
	}
}

// Lock takes a lock for a stage or job of the agent's running pipeline (protocol/locks.go).
func (s *Service) Lock(ctx context.Context, a *Agent, leaseID string, req protocol.LockRequest) (protocol.LockResponse, error) {
	p, r, me, err := s.agentLock(ctx, a, leaseID, req)
	if err != nil {
		return protocol.LockResponse{}, err
	}
	expires := req.Expires.Std()
	if expires <= 0 {
		expires = time.Hour
	}
	run, err := s.builds.RunInfo(ctx, p)
	if err != nil {
		return protocol.LockResponse{}, err
	}
	me.Display = fmt.Sprintf("build #%d (pipeline %s, %s)", run.BuildNumber, p.Name, req.Scope)
	got, holder, err := s.locks.Acquire(ctx, r, me, s.clock.Now(), expires)
	if err != nil {
		return protocol.LockResponse{}, err
	}
	if got {
		return protocol.LockResponse{Acquired: true}, nil
	}
	return protocol.LockResponse{Holder: holder.Display}, nil
}

// Unlock releases a stage's or job's lock; one it does not hold is left alone.
func (s *Service) Unlock(ctx context.Context, a *Agent, leaseID string, req protocol.LockRequest) error {
	_, r, me, err := s.agentLock(ctx, a, leaseID, req)
	if err != nil {
		return err
	}
	freed, err := s.locks.Release(ctx, r, me)
	if err != nil {
		return err
	}
	if freed {
		s.promote(ctx, r)
	}
	return nil
}

// agentLock checks a lock request of an agent against its lease.
func (s *Service) agentLock(ctx context.Context, a *Agent, leaseID string, req protocol.LockRequest) (*build.Pipeline, lockRef, lockHolder, error) {
	switch {
	case req.Key == "" || len(req.Key) > 500:
		return nil, lockRef{}, lockHolder{}, fault.Invalid("key", "key must be 1 to 500 characters")
	case req.Scope == "" || len(req.Scope) > 300 || strings.ContainsAny(req.Scope, "\r\n"):
		return nil, lockRef{}, lockHolder{}, fault.Invalid("scope", "scope must be 1 to 300 characters on one line")
	case req.Expires < 0:
		return nil, lockRef{}, lockHolder{}, fault.Invalid("expires", "expires must not be negative")
	}
	p, err := s.builds.Leased(ctx, a.ID, leaseID)
	if err != nil {
		return nil, lockRef{}, lockHolder{}, err
	}
	return p, lockRef{RepoID: p.RepoID, Key: req.Key}, lockHolder{PipelineID: p.ID, Scope: req.Scope}, nil
}

// lockTick is the reconciler's part for locks: it fails waiters past their timeout, frees locks
// whose holder no longer runs, promotes a waiter of every free lock, and returns the pipelines
// that still wait (the reconciler must not put them back on their queues).
func (s *Service) lockTick(ctx context.Context) (map[int64]bool, error) {
	refs, err := s.locks.WaitLists(ctx)
	if err != nil || len(refs) == 0 {
		return nil, err
	}
	parked := map[int64]bool{}
	now := s.clock.Now()
	for _, r := range refs {
		ws, err := s.locks.Waiters(ctx, r)
		if err != nil {
			return parked, err
		}
		for _, w := range ws {
			if now.Before(w.Deadline) {
				parked[w.PipelineID] = true
				continue
			}
			if ok, err := s.locks.Unwait(ctx, r, w); err != nil || !ok {
				continue
			}
			reason := fmt.Sprintf("gave up waiting for lock %q (lock.timeout)", r.Key)
			if _, err := s.builds.Drop(ctx, w.PipelineID, build.StatusFailed, reason); err != nil {
				s.log.WarnContext(ctx, "fail a lock waiter", "pipeline", w.PipelineID, "err", err)
			}
		}
		h, held, err := s.locks.Holder(ctx, r, now)
		if err != nil {
			return parked, err
		}
		if held {
			// Read after the holder: a pipeline that took the lock was claimed (running) before.
			hs, err := s.builds.Held(ctx)
			if err != nil {
				return parked, err
			}
			if slices.ContainsFunc(hs, func(x build.Held) bool { return x.ID == h.PipelineID }) {
				continue
			}
			// Its holder ended without releasing it (a replica died between the two).
			if _, err := s.locks.Release(ctx, r, h); err != nil {
				return parked, err
			}
		}
		if id := s.promote(ctx, r); id != 0 {
			delete(parked, id)
		}
	}
	return parked, nil
}
