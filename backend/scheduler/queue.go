package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Queue is the Redis side of scheduling: one queue per runner class, fair across teams and aware
// of capacity. It holds only what the database can rebuild (the reconciler does, see
// Reconcile), so losing Redis delays pipelines by one reconcile interval and loses nothing.
//
// Keys, per class C (the braces are a Redis Cluster hash tag: one class lives on one shard):
//
//	{q:C}:org:<org>   list of entries "<pipeline>:<cpus>:<gpus>:<enqueued unix ms>", FIFO per team
//	{q:C}:ring        list of team ids with waiting entries; each dispatch rotates it by one
//	{q:C}:members     set of queued pipeline ids (no double enqueue, and the reconciler's check)
//	{q:C}:running     hash team → pipelines leased (for per-team concurrency caps)
//	{q:C}:reserve     "<pipeline>:<cpus>:<gpus>" of a big pipeline that waited too long (see below)
//	{q:C}:cache       hash pipeline → repo id, for the queued pipelines that use caches (rule 5)
//	{q:C}:warm:<repo> hash agent → "<free cpus>:<free gpus>:<until unix ms>": agents holding the
//	                  repo's caches that wait in a long-poll of C now (Waiting, StopWaiting)
//	{q:C}:handover:<pipeline>  when a cold agent first left that pipeline to a warm one (unix ms)
//
// The dispatch rule, in one Lua script so it is atomic across replicas:
//
//  1. Round robin over teams: the team at the head of the ring is tried first and moves to the
//     tail, so with N teams waiting a team's next pipeline waits for at most N-1 dispatches to
//     other teams, however many pipelines those teams queued.
//  2. Inside a team, FIFO with backfill: the first of the team's oldest Depth entries that fits
//     the agent's free cores and GPUs is taken. A small pipeline is never stuck behind a big one
//     that fits nowhere right now.
//  3. No starvation of big pipelines: an entry skipped because it did not fit, after waiting
//     longer than StarveAfter, becomes the class's reservation. While a reservation exists, an
//     agent with enough free capacity takes it before anything else, and an agent whose total
//     capacity could hold it but whose free capacity cannot receives nothing from this class:
//     it drains until the big pipeline fits. Agents too small for it keep serving small work.
//  4. A team at its concurrency cap for the class is skipped.
//  5. Cache affinity: a pipeline that uses caches, about to go to an agent that does not hold
//     its repo's, is left (skipped like one that does not fit) when another agent that holds
//     them waits in a long-poll of the class with room for it. The caller wakes that agent,
//     which takes it. The hand-over is bounded: from the first time a cold agent left the
//     pipeline, cold agents leave it for at most Rules.HandOver, then take it whoever waits
//     (the warm agent may have taken other work, been drained by a reservation, or never heard
//     the wake-up because its server died). Reservations (rule 3) are exempt: a starving
//     pipeline has waited enough.
//  6. A team runner (Poller.OnlyOrg) takes only its own team's entries, FIFO with backfill,
//     within its team's cap; the ring and the reservation are left as they are. A team's own
//     tags have queues of their own ("team:<org>:<tag>", teams.go), where it is the only team.
//  7. An entry younger than Rules.MinAge is left in backfill (a GPU host's dispatch of a CPU
//     class: CPU agents take it first); the answer says when the youngest such entry comes of
//     age, and the poll looks again then. Reservations are exempt, as in rule 5.
//
// The cache hash is apart from the entries, whose format stays as it was: a replica of the
// previous release, during a rolling upgrade, still parses every entry.
type Queue struct {
	rdb redis.UniversalClient
}

// NewQueue returns the queue on rdb.
func NewQueue(rdb redis.UniversalClient) *Queue { return &Queue{rdb: rdb} }

// Entry is one queued pipeline.
type Entry struct {
	PipelineID int64
	OrgID      int64
	Class      string
	CPUs       int
	GPUs       int
	Enqueued   time.Time
	// Cache is the repo whose caches the pipeline uses; "" when it uses none.
	Cache string
}

func (e Entry) encode() string {
	return fmt.Sprintf("%d:%d:%d:%d", e.PipelineID, e.CPUs, e.GPUs, e.Enqueued.UnixMilli())
}

func prefix(class string) string { return "{q:" + class + "}" }

// enqueueScript keeps a team's list in queue order (enqueue time, then pipeline id) even when
// entries come back out of order: the reconciler re-enqueues what Redis lost after newer
// pipelines were already queued again. A new pipeline is the newest, so the common case is one
// comparison with the tail and an RPUSH; only a re-enqueue walks the list.
var enqueueScript = redis.NewScript(`
local p = KEYS[1]
if redis.call('SADD', p .. ':members', ARGV[2]) == 0 then return 0 end
if ARGV[5] ~= '' then redis.call('HSET', p .. ':cache', ARGV[2], ARGV[5]) end
local list = p .. ':org:' .. ARGV[1]
local id, at = tonumber(ARGV[2]), tonumber(ARGV[4])
local function later(e)
  local eid, et = string.match(e, '^(%d+):%d+:%d+:(%d+)$')
  eid, et = tonumber(eid), tonumber(et)
  return et > at or (et == at and eid > id)
end
local tail = redis.call('LINDEX', list, -1)
if tail and later(tail) then
  for _, e in ipairs(redis.call('LRANGE', list, 0, -1)) do
    if later(e) then
      redis.call('LINSERT', list, 'BEFORE', e, ARGV[3])
      return 1
    end
  end
end
if redis.call('RPUSH', list, ARGV[3]) == 1 then
  redis.call('RPUSH', p .. ':ring', ARGV[1])
end
return 1
`)

// Enqueue adds a pipeline to its class's queue; it reports false when it was already queued.
func (q *Queue) Enqueue(ctx context.Context, e Entry) (bool, error) {
	n, err := enqueueScript.Run(ctx, q.rdb, []string{prefix(e.Class)}, e.OrgID, e.PipelineID, e.encode(), e.Enqueued.UnixMilli(), e.Cache).Int()
	if err != nil {
		return false, fmt.Errorf("scheduler: enqueue: %w", err)
	}
	return n == 1, nil
}

// Capacity is what an agent can take now (Free) and at most (Total).
type Capacity struct {
	FreeCPUs, TotalCPUs int
	FreeGPUs, TotalGPUs int
}

// Rules tune the dispatch.
type Rules struct {
	Depth       int           // entries of a team's queue considered for backfill
	StarveAfter time.Duration // how long a skipped entry waits before it is reserved
	// Caps is the per-team concurrency cap of the class; 0 = none.
	Cap int
	// HandOver bounds how long cold agents leave a cache-bound pipeline to a waiting warm one
	// (rule 5); 0 turns cache affinity off.
	HandOver time.Duration
	// MinAge leaves entries younger than it to other agents (rule 7): a GPU host that its
	// operator lets serve CPU classes takes a CPU pipeline only once CPU agents, woken at its
	// enqueue, have had that long to take it. 0 = none.
	MinAge time.Duration
}

// Poller is the agent a dispatch is for, as cache affinity sees it. The zero Poller holds no
// caches.
type Poller struct {
	AgentID string
	Caches  []string // repo ids whose caches the agent's host holds
	// OnlyOrg, when not 0, is the team of a team runner: it takes only that team's entries
	// (rule 6).
	OnlyOrg int64
}

// Dispatched is what one dispatch did.
type Dispatched struct {
	PipelineID, OrgID int64 // 0 when nothing was taken (ErrEmpty)
	// HandedOver are the waiting warm agents that cache-bound pipelines were left for: the
	// caller wakes them (Intake.handOver), so they come and take them.
	HandedOver []string
	// Recheck, when not 0, is how long until the first of those hand-overs runs out, or an
	// entry left for its age (Rules.MinAge) is old enough: an agent that got nothing
	// dispatches again then, and takes what is left.
	Recheck time.Duration
}

var dispatchScript = redis.NewScript(`
local p = KEYS[1]
local freeC, totalC = tonumber(ARGV[1]), tonumber(ARGV[2])
local freeG, totalG = tonumber(ARGV[3]), tonumber(ARGV[4])
local depth, starve, now, cap = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local me, handover, only, minage = ARGV[9], tonumber(ARGV[10]), ARGV[11], tonumber(ARGV[12])
local mine = {}
for i = 13, #ARGV do mine[ARGV[i]] = true end
local woken, soonest = {}, handover
local aged = -1 -- 7. how long until the youngest entry left for its age is old enough

local function parse(e)
  local id, c, g, t = string.match(e, '^(%d+):(%d+):(%d+):(%d+)$')
  return id, tonumber(c), tonumber(g), tonumber(t)
end

local function take(org, e, id)
  local list = p .. ':org:' .. org
  redis.call('LREM', list, 1, e)
  redis.call('SREM', p .. ':members', id)
  if redis.call('LLEN', list) == 0 then redis.call('LREM', p .. ':ring', 0, org) end
  if redis.call('HDEL', p .. ':cache', id) == 1 then redis.call('DEL', p .. ':handover:' .. id) end
  redis.call('HINCRBY', p .. ':running', org, 1)
  local out = {id, org, soonest}
  for _, a in ipairs(woken) do table.insert(out, a) end
  return out
end

-- 5. Cache affinity: whether to leave a pipeline that fits this agent to a warm one.
local function leave(id, c, g)
  if handover <= 0 then return false end
  local repo = redis.call('HGET', p .. ':cache', id)
  if not repo or mine[repo] then return false end
  local warm = p .. ':warm:' .. repo
  local waiters = redis.call('HGETALL', warm)
  local found = {}
  for i = 1, #waiters, 2 do
    local wc, wg, till = string.match(waiters[i + 1], '^(%d+):(%d+):(%d+)$')
    if not till or tonumber(till) <= now then
      redis.call('HDEL', warm, waiters[i]) -- its poll ended without saying so (a server died)
    elseif waiters[i] ~= me and c <= tonumber(wc) and g <= tonumber(wg) then
      table.insert(found, waiters[i])
    end
  end
  if #found == 0 then return false end
  local key = p .. ':handover:' .. id
  local first = tonumber(redis.call('GET', key) or '')
  if not first then
    first = now
    redis.call('SET', key, now, 'PX', 10 * handover)
  end
  if now - first >= handover then return false end
  soonest = math.min(soonest, first + handover - now)
  for _, a in ipairs(found) do table.insert(woken, a) end
  return true
end

-- 6. A team runner takes its own team's entries only, in their order (backfill as in rule 2);
-- it neither rotates the ring nor takes or honours a reservation: its host is not the
-- platform's to drain.
if only ~= '' then
  local running = tonumber(redis.call('HGET', p .. ':running', only) or '0')
  if cap == 0 or running < cap then
    for _, e in ipairs(redis.call('LRANGE', p .. ':org:' .. only, 0, depth - 1)) do
      local id, c, g = parse(e)
      if c <= freeC and g <= freeG then return take(only, e, id) end
    end
  end
  return {}
end

-- 3. A reservation comes first.
local res = redis.call('GET', p .. ':reserve')
if res then
  local org, e = string.match(res, '^(%d+)|(.+)$')
  local id, c, g = parse(e)
  if redis.call('SISMEMBER', p .. ':members', id) == 0 then
    redis.call('DEL', p .. ':reserve')
  elseif c <= freeC and g <= freeG then
    redis.call('DEL', p .. ':reserve')
    return take(org, e, id)
  elseif c <= totalC and g <= totalG then
    return {}
  end
end

-- 1. Round robin over teams.
local teams = redis.call('LLEN', p .. ':ring')
for i = 1, teams do
  local org = redis.call('LMOVE', p .. ':ring', p .. ':ring', 'LEFT', 'RIGHT')
  if not org then break end
  local running = tonumber(redis.call('HGET', p .. ':running', org) or '0')
  if cap == 0 or running < cap then
    local entries = redis.call('LRANGE', p .. ':org:' .. org, 0, depth - 1)
    for _, e in ipairs(entries) do
      local id, c, g, t = parse(e)
      -- 2. Backfill: the first that fits (and is not left to a warm agent, rule 5, or to
      -- agents of its own kind, rule 7).
      if c <= freeC and g <= freeG then
        if minage > 0 and now - t < minage then
          local left = minage - (now - t)
          if aged < 0 or left < aged then aged = left end
        elseif not leave(id, c, g) then
          return take(org, e, id)
        end
      elseif now - t > starve and not redis.call('GET', p .. ':reserve') then
        redis.call('SET', p .. ':reserve', org .. '|' .. e)
      end
    end
  end
end
if #woken == 0 and aged < 0 then return {} end
local recheck = aged
if #woken > 0 and (aged < 0 or soonest < aged) then recheck = soonest end
local out = {0, 0, recheck}
for _, a in ipairs(woken) do table.insert(out, a) end
return out
`)

// ErrEmpty means nothing in the queue fits the agent right now.
var ErrEmpty = errors.New("scheduler: no queued pipeline fits")

// Dispatch takes the next pipeline of class that fits capacity, by the rules above, for the
// agent who. The caller must then claim the pipeline in the database; if that fails (cancelled
// meanwhile) it simply dispatches again. With ErrEmpty, HandedOver may still name agents to wake.
func (q *Queue) Dispatch(ctx context.Context, class string, who Poller, c Capacity, r Rules, now time.Time) (Dispatched, error) {
	args := make([]any, 0, 12+len(who.Caches))
	only := ""
	if who.OnlyOrg != 0 {
		only = strconv.FormatInt(who.OnlyOrg, 10)
	}
	args = append(args, c.FreeCPUs, c.TotalCPUs, c.FreeGPUs, c.TotalGPUs, max(r.Depth, 1), r.StarveAfter.Milliseconds(),
		now.UnixMilli(), r.Cap, who.AgentID, r.HandOver.Milliseconds(), only, r.MinAge.Milliseconds())
	for _, repo := range who.Caches {
		args = append(args, repo)
	}
	res, err := dispatchScript.Run(ctx, q.rdb, []string{prefix(class)}, args...).Slice()
	if err != nil {
		return Dispatched{}, fmt.Errorf("scheduler: dispatch: %w", err)
	}
	var d Dispatched
	if len(res) < 3 {
		return d, ErrEmpty
	}
	d.PipelineID, _ = strconv.ParseInt(fmt.Sprint(res[0]), 10, 64)
	d.OrgID, _ = strconv.ParseInt(fmt.Sprint(res[1]), 10, 64)
	ms, _ := strconv.ParseInt(fmt.Sprint(res[2]), 10, 64)
	d.Recheck = time.Duration(ms) * time.Millisecond
	for _, a := range res[3:] {
		if id := fmt.Sprint(a); !slices.Contains(d.HandedOver, id) {
			d.HandedOver = append(d.HandedOver, id)
		}
	}
	if d.PipelineID == 0 {
		return d, ErrEmpty
	}
	return d, nil
}

// waitScript records one agent in the warm hashes (KEYS, one per repo, of one class) and keeps
// each hash at least ARGV[3] ms: a poll that ends without StopWaiting (its server died) is
// dropped by its until time, and the hash by this expiry once nobody waits any more.
var waitScript = redis.NewScript(`
for _, k in ipairs(KEYS) do
  redis.call('HSET', k, ARGV[1], ARGV[2])
  if redis.call('PTTL', k) < tonumber(ARGV[3]) then redis.call('PEXPIRE', k, ARGV[3]) end
end
return 1
`)

// Waiting records that the poller, holding the caches of who.Caches, waits in a long-poll of
// class until until with capacity c free: while it does, cold agents leave it the class's
// pipelines of those repos that fit c (rule 5). StopWaiting ends it.
func (q *Queue) Waiting(ctx context.Context, class string, who Poller, c Capacity, now, until time.Time) error {
	if len(who.Caches) == 0 {
		return nil
	}
	keys := make([]string, len(who.Caches))
	for i, repo := range who.Caches {
		keys[i] = warmKey(class, repo)
	}
	keep := until.Sub(now) + time.Minute
	err := waitScript.Run(ctx, q.rdb, keys, who.AgentID, fmt.Sprintf("%d:%d:%d", c.FreeCPUs, c.FreeGPUs, until.UnixMilli()),
		keep.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("scheduler: record a waiting agent: %w", err)
	}
	return nil
}

// StopWaiting removes what Waiting recorded for the poller in the classes.
func (q *Queue) StopWaiting(ctx context.Context, classes []string, who Poller) error {
	if len(who.Caches) == 0 {
		return nil
	}
	pipe := q.rdb.Pipeline()
	for _, class := range classes {
		for _, repo := range who.Caches {
			pipe.HDel(ctx, warmKey(class, repo), who.AgentID)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("scheduler: forget a waiting agent: %w", err)
	}
	return nil
}

func warmKey(class, repo string) string { return prefix(class) + ":warm:" + repo }

// Released tells the queue a team's leased pipeline of class ended (for concurrency caps).
func (q *Queue) Released(ctx context.Context, class string, orgID int64) error {
	n, err := q.rdb.HIncrBy(ctx, prefix(class)+":running", strconv.FormatInt(orgID, 10), -1).Result()
	if err == nil && n < 0 {
		q.rdb.HSet(ctx, prefix(class)+":running", strconv.FormatInt(orgID, 10), 0)
	}
	return err
}

// SetRunning overwrites the per-team running counts of a class from the database's truth.
func (q *Queue) SetRunning(ctx context.Context, class string, counts map[int64]int) error {
	key := prefix(class) + ":running"
	pipe := q.rdb.TxPipeline()
	pipe.Del(ctx, key)
	for org, n := range counts {
		pipe.HSet(ctx, key, strconv.FormatInt(org, 10), n)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// Queued reports which of the pipelines are in class's queue.
func (q *Queue) Queued(ctx context.Context, class string, ids []int64) (map[int64]bool, error) {
	out := make(map[int64]bool, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	members := make([]any, len(ids))
	for i, id := range ids {
		members[i] = id
	}
	res, err := q.rdb.SMIsMember(ctx, prefix(class)+":members", members...).Result()
	if err != nil {
		return nil, fmt.Errorf("scheduler: queued: %w", err)
	}
	for i, in := range res {
		out[ids[i]] = in
	}
	return out, nil
}

// Position returns a queued pipeline's 1-based place in its team's queue of class, and how many
// teams are waiting in the class; 0 when it is not queued.
func (q *Queue) Position(ctx context.Context, class string, orgID, pipelineID int64) (pos int, teams int64, err error) {
	entries, err := q.rdb.LRange(ctx, prefix(class)+":org:"+strconv.FormatInt(orgID, 10), 0, -1).Result()
	if err != nil {
		return 0, 0, err
	}
	want := strconv.FormatInt(pipelineID, 10) + ":"
	for i, e := range entries {
		if strings.HasPrefix(e, want) {
			pos = i + 1
			break
		}
	}
	teams, err = q.rdb.LLen(ctx, prefix(class)+":ring").Result()
	return pos, teams, err
}
