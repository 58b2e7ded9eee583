package scheduler

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/runnerclass"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Intake is where queued pipelines enter the scheduler: it puts each on its class's Redis queue
// and wakes the long-polls waiting for that class, on this replica directly and on the others
// through Redis pub/sub. The build service calls it (as build.Queue) for every pipeline it
// queues; it is made before the build service and the scheduler, which both hold it, so neither
// needs the other to exist first.
type Intake struct {
	rdb     redis.UniversalClient
	queue   *Queue
	classes classes
	wake    *wakeup
}

// NewIntake returns the intake on rdb for the runner classes (runnerclass.Defaults() when
// nil).
func NewIntake(rdb redis.UniversalClient, runnerClasses []runnerclass.Class) *Intake {
	if runnerClasses == nil {
		runnerClasses = runnerclass.Defaults()
	}
	return &Intake{rdb: rdb, queue: NewQueue(rdb), classes: classes(runnerClasses), wake: newWakeup()}
}

var (
	_ build.Queue  = (*Intake)(nil)
	_ build.Agents = (*Intake)(nil)
)

// Enqueue puts a queued pipeline on its class's queue and wakes agents waiting for that class.
func (in *Intake) Enqueue(ctx context.Context, p *build.Pipeline) error {
	class := in.queueClass(p.OrgID, p.RunnerTag)
	if _, err := in.queue.Enqueue(ctx, Entry{PipelineID: p.ID, OrgID: p.OrgID, Class: class, CPUs: p.CPUs,
		GPUs: in.classes.gpusOf(p.RunnerTag), Enqueued: p.QueuedSince(), Cache: cacheRepo(p)}); err != nil {
		return err
	}
	in.notify(ctx, class)
	return nil
}

// StopRequested wakes the control long-polls of the agents, on this replica directly and on
// the others through Redis pub/sub: a cancel or a termination reaches the agent in
// milliseconds, whichever replica its control poll is held by.
func (in *Intake) StopRequested(ctx context.Context, agentIDs []string) {
	for _, id := range agentIDs {
		in.wake.fire(stopKey(id))
		in.rdb.Publish(ctx, stopChannel, id)
	}
}

// cacheRepo is the repo whose caches a pipeline uses: its plan's CNB_REPO_ID (the key agents
// keep caches under) when the plan's docker.volumes has a cache, else "". A data volume is no
// cache (the engine makes it afresh for each pipeline), so a plan with only those has no
// preference. Only plans that spell "volumes" are decoded, so the enqueue of the others costs no
// JSON parsing. A pipeline enqueued without its plan (the reconciler and the reaper load rows
// without it) gets no affinity either: it goes to the first agent that fits, as before.
func cacheRepo(p *build.Pipeline) string {
	if !strings.Contains(p.Plan, `"volumes"`) {
		return ""
	}
	var plan struct {
		Volumes  []protocol.Volume `json:"volumes"`
		Builtins map[string]string `json:"builtins"`
	}
	if err := json.Unmarshal([]byte(p.Plan), &plan); err != nil {
		return ""
	}
	if !slices.ContainsFunc(plan.Volumes, func(v protocol.Volume) bool { return v.Type != protocol.VolumeData }) {
		return ""
	}
	if id := plan.Builtins["CNB_REPO_ID"]; isRepoID(id) {
		return id
	}
	if p.RepoID > 0 {
		return strconv.FormatInt(p.RepoID, 10)
	}
	return ""
}

// isRepoID says whether s looks like a repo id (a positive decimal number): only those name
// Redis keys, whatever an agent sends.
func isRepoID(s string) bool {
	if s == "" || len(s) > 19 || s[0] == '0' {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// pollCaches is the agent's list of cached repos as the scheduler uses it: repo ids only, each
// once, at most protocol.MaxPollCaches.
func pollCaches(list []string) []string {
	var out []string
	for _, id := range list {
		if len(out) == protocol.MaxPollCaches {
			break
		}
		if isRepoID(id) && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// handOver wakes the long-polls of the warm agents a cold agent's dispatch left pipelines for,
// on this replica directly and on the others through the work channel (whose listeners fire
// whatever key it carries).
func (in *Intake) handOver(ctx context.Context, agentIDs []string) {
	for _, id := range agentIDs {
		in.wake.fire(handOverKey(id))
		in.rdb.Publish(ctx, workChannel, handOverKey(id))
	}
}

// handOverKey is the wake-up key of an agent's work long-poll, for a hand-over.
func handOverKey(agentID string) string { return "handover " + agentID }

// stopKey is the wake-up key of an agent's control long-poll (class tags never start so).
func stopKey(agentID string) string { return "stop " + agentID }

const (
	workChannel = "nimbus:work"
	stopChannel = "nimbus:stop"
)

func (in *Intake) notify(ctx context.Context, class string) {
	in.wake.fireOne(class)
	in.rdb.Publish(ctx, workChannel, class)
}

// listen relays other replicas' work (classes and hand-overs) and stop notifications to local
// long-polls until ctx ends.
func (in *Intake) listen(ctx context.Context) {
	sub := in.rdb.Subscribe(ctx, workChannel, stopChannel)
	defer sub.Close()
	ch := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			switch {
			case m.Channel == stopChannel:
				in.wake.fire(stopKey(m.Payload))
			case strings.HasPrefix(m.Payload, "handover "):
				in.wake.fire(m.Payload)
			default:
				in.wake.fireOne(m.Payload) // a class: one poller of this replica takes the turn
			}
		}
	}
}

// wakeup lets long-polls sleep until something may be there. Two kinds of keys:
//
//   - Broadcast keys (stopKey and handOverKey of an agent): a channel per key, closed (and
//     replaced) when that agent must stop something or a pipeline was left for it.
//   - Class keys: one turn per notification. The pollers waiting for a class queue up (queue),
//     and a notification (fireOne) wakes only the one that has waited longest, not all of them:
//     with a thousand idle agents a broadcast made a thousand dispatches race for each new
//     pipeline, and the winner's place among them was the enqueue-to-lease latency
//     (BenchmarkReplicas). A woken poller that takes nothing while its class still has work
//     (the entry does not fit it, its team is capped) passes the turn on (pass) to the next
//     poller that has not had it, so each notification is tried by every waiting poller at
//     most once; one whose poll ends without looking passes it on too.
type wakeup struct {
	mu    sync.Mutex
	ch    map[string]chan struct{}
	turns map[string][]*waiter
}

// waiter is a poller queued for a class key.
type waiter struct {
	id string     // the agent: a turn goes to each agent at most once
	ch chan *turn // buffered: one turn at most, since delivering it takes the waiter off the queue
}

// turn is one notification of a class key making its way through the waiting pollers.
type turn struct {
	key   string
	tried map[string]bool
}

func newWakeup() *wakeup {
	return &wakeup{ch: map[string]chan struct{}{}, turns: map[string][]*waiter{}}
}

func (w *wakeup) wait(class string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.ch[class]
	if !ok {
		c = make(chan struct{})
		w.ch[class] = c
	}
	return c
}

func (w *wakeup) fire(class string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, ok := w.ch[class]; ok {
		close(c)
		delete(w.ch, class)
	}
}

// queue puts the poller id in line for the next turn of key.
func (w *wakeup) queue(key, id string) *waiter {
	wt := &waiter{id: id, ch: make(chan *turn, 1)}
	w.mu.Lock()
	w.turns[key] = append(w.turns[key], wt)
	w.mu.Unlock()
	return wt
}

// leave takes the waiter out of key's line; it returns the turn it was given and has not
// used, if any (the caller passes it on).
func (w *wakeup) leave(key string, wt *waiter) *turn {
	w.mu.Lock()
	defer w.mu.Unlock()
	list := w.turns[key]
	for i, x := range list {
		if x == wt {
			w.turns[key] = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(w.turns[key]) == 0 {
		delete(w.turns, key)
	}
	select {
	case t := <-wt.ch:
		return t
	default:
		return nil
	}
}

// fireOne gives a new turn of key to the poller that has waited longest.
func (w *wakeup) fireOne(key string) { w.pass(&turn{key: key, tried: map[string]bool{}}) }

// pass gives the turn to the longest-waiting poller of its key that has not had it; it reports
// false when there is none (the turn ends).
func (w *wakeup) pass(t *turn) bool {
	if t == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	list := w.turns[t.key]
	for i, wt := range list {
		if t.tried[wt.id] {
			continue
		}
		t.tried[wt.id] = true
		w.turns[t.key] = append(list[:i:i], list[i+1:]...)
		if len(w.turns[t.key]) == 0 {
			delete(w.turns, t.key)
		}
		wt.ch <- t // never blocks: a waiter gets one turn, then is off the line
		return true
	}
	return false
}

// classes are the runner classes the scheduler serves.
type classes []runnerclass.Class

// class returns the runner class of a canonical tag.
func (cs classes) class(tag string) (runnerclass.Class, bool) {
	for _, c := range cs {
		if len(c.Tags) > 0 && c.Tags[0] == tag {
			return c, true
		}
	}
	return runnerclass.Class{}, false
}

// largest is the most cores a pipeline of any class may ask for: what a whole-host agent
// offers when it runs nothing (Agent.WholeHost).
func (cs classes) largest() int {
	n := runnerclass.MaxTeamCPUs
	for _, c := range cs {
		n = max(n, c.MaxCPUs, c.FixedCPUs)
	}
	return n
}

// gpusOf is how many GPU slots a pipeline of the class takes.
func (cs classes) gpusOf(tag string) int {
	if c, ok := cs.class(tag); ok && c.GPU != "" {
		return 1
	}
	return 0
}

// servedBy returns the canonical tags of the classes an agent with these tags serves: every
// class one of whose tags the agent advertises (an L40 host serves …:gpu and …:gpu:L40).
func (cs classes) servedBy(tags []string) []string {
	has := map[string]bool{}
	for _, t := range tags {
		has[t] = true
	}
	var out []string
	for _, c := range cs {
		for _, t := range c.Tags {
			if has[t] {
				out = append(out, c.Tags[0])
				break
			}
		}
	}
	return out
}
