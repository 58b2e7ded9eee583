package scheduler

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/pipeline/spec"
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

// NewIntake returns the intake on rdb for the runner classes (spec.DefaultRunnerClasses() when
// nil).
func NewIntake(rdb redis.UniversalClient, runnerClasses []spec.RunnerClass) *Intake {
	if runnerClasses == nil {
		runnerClasses = spec.DefaultRunnerClasses()
	}
	return &Intake{rdb: rdb, queue: NewQueue(rdb), classes: classes(runnerClasses), wake: newWakeup()}
}

var (
	_ build.Queue  = (*Intake)(nil)
	_ build.Agents = (*Intake)(nil)
)

// Enqueue puts a queued pipeline on its class's queue and wakes agents waiting for that class.
func (in *Intake) Enqueue(ctx context.Context, p *build.Pipeline) error {
	if _, err := in.queue.Enqueue(ctx, Entry{PipelineID: p.ID, OrgID: p.OrgID, Class: p.RunnerTag, CPUs: p.CPUs,
		GPUs: in.classes.gpusOf(p.RunnerTag), Enqueued: p.QueuedSince()}); err != nil {
		return err
	}
	in.notify(ctx, p.RunnerTag)
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

// stopKey is the wake-up key of an agent's control long-poll (class tags never start so).
func stopKey(agentID string) string { return "stop " + agentID }

const (
	workChannel = "nimbus:work"
	stopChannel = "nimbus:stop"
)

func (in *Intake) notify(ctx context.Context, class string) {
	in.wake.fire(class)
	in.rdb.Publish(ctx, workChannel, class)
}

// listen relays other replicas' work and stop notifications to local long-polls until ctx
// ends.
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
			if m.Channel == stopChannel {
				in.wake.fire(stopKey(m.Payload))
			} else {
				in.wake.fire(m.Payload)
			}
		}
	}
}

// wakeup lets long-polls sleep until something may be there: a channel per key (a class, or
// stopKey of an agent), closed (and replaced) when that class gets work or that agent must
// stop something.
type wakeup struct {
	mu sync.Mutex
	ch map[string]chan struct{}
}

func newWakeup() *wakeup { return &wakeup{ch: map[string]chan struct{}{}} }

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

// classes are the runner classes the scheduler serves.
type classes []spec.RunnerClass

// class returns the runner class of a canonical tag.
func (cs classes) class(tag string) (spec.RunnerClass, bool) {
	for _, c := range cs {
		if len(c.Tags) > 0 && c.Tags[0] == tag {
			return c, true
		}
	}
	return spec.RunnerClass{}, false
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
