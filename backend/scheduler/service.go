package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/billing"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/pipeline/spec"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// Config tunes the scheduler. Zero values take the defaults in NewService.
type Config struct {
	PublicURL         string
	RegistrationToken string        // agents present it to register
	LeaseTTL          time.Duration // 30 s
	HeartbeatInterval time.Duration // 10 s: how often agents renew
	PollTimeout       time.Duration // 30 s: how long a long-poll waits for work
	LogFlushInterval  time.Duration // 1 s
	StarveAfter       time.Duration // 2 min: when a big pipeline that fits nowhere is reserved
	Depth             int           // 50: backfill depth in a team's queue
	// Caps limits pipelines per team per class (class canonical tag → cap); 0 or absent = none.
	Caps map[string]int
	// Classes are the runner classes (spec.DefaultRunnerClasses() when nil).
	Classes []spec.RunnerClass
	// Location is the time zone of cron schedules (UTC+8 when nil).
	Location *time.Location
}

// LogSink stores job logs (package logs).
type LogSink interface {
	Append(ctx context.Context, jobID, offset int64, data []byte) (int64, error)
	Complete(ctx context.Context, jobID int64) error
}

// Billing freezes, ticks and settles what pipelines cost (package billing).
type Billing interface {
	Start(ctx context.Context, r billing.Run, at time.Time) error
	Tick(ctx context.Context) ([]int64, error)
	Settle(ctx context.Context, pipelineID int64, end time.Time) error
	CanStart(ctx context.Context, r billing.Run) error
}

// Service is the scheduler.
type Service struct {
	db     *gorm.DB
	bill   Billing
	rdb    redis.UniversalClient
	queue  *Queue
	builds *build.Service
	repos  *repo.Service
	logs   LogSink
	clock  clock.Clock
	log    *slog.Logger
	cfg    Config
	wake   *wakeup
}

// NewService returns the scheduler and hooks it into the build service, so every queued pipeline
// is enqueued and every queued pipeline shown by the API says why it waits.
func NewService(db *gorm.DB, rdb redis.UniversalClient, builds *build.Service, repos *repo.Service, logs LogSink, bill Billing, clk clock.Clock, log *slog.Logger, cfg Config) *Service {
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 30 * time.Second
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 10 * time.Second
	}
	if cfg.PollTimeout <= 0 {
		cfg.PollTimeout = 30 * time.Second
	}
	if cfg.LogFlushInterval <= 0 {
		cfg.LogFlushInterval = time.Second
	}
	if cfg.StarveAfter <= 0 {
		cfg.StarveAfter = 2 * time.Minute
	}
	if cfg.Depth <= 0 {
		cfg.Depth = 50
	}
	if cfg.Classes == nil {
		cfg.Classes = spec.DefaultRunnerClasses()
	}
	if cfg.Location == nil {
		cfg.Location = time.FixedZone("UTC+8", 8*3600)
	}
	s := &Service{db: db, bill: bill, rdb: rdb, queue: NewQueue(rdb), builds: builds, repos: repos, logs: logs, clock: clk, log: log, cfg: cfg, wake: newWakeup()}
	builds.Enqueue = func(ctx context.Context, p *build.Pipeline) {
		if err := s.Enqueue(ctx, p); err != nil {
			// The reconciler puts it in the queue later; the database already says queued.
			log.WarnContext(ctx, "enqueue failed; the reconciler will retry", "pipeline", p.ID, "err", err)
		}
	}
	builds.Explain = s.Explain
	return s
}

// Queue exposes the Redis queue (benchmarks and tests).
func (s *Service) Queue() *Queue { return s.queue }

// class returns the runner class of a canonical tag.
func (s *Service) class(tag string) (spec.RunnerClass, bool) {
	for _, c := range s.cfg.Classes {
		if len(c.Tags) > 0 && c.Tags[0] == tag {
			return c, true
		}
	}
	return spec.RunnerClass{}, false
}

// gpusOf is how many GPU slots a pipeline of the class takes.
func (s *Service) gpusOf(tag string) int {
	if c, ok := s.class(tag); ok && c.GPU != "" {
		return 1
	}
	return 0
}

// classesFor returns the canonical tags of the classes an agent with these tags serves: every
// class one of whose tags the agent advertises (an L40 host serves …:gpu and …:gpu:L40).
func (s *Service) classesFor(tags []string) []string {
	has := map[string]bool{}
	for _, t := range tags {
		has[t] = true
	}
	var out []string
	for _, c := range s.cfg.Classes {
		for _, t := range c.Tags {
			if has[t] {
				out = append(out, c.Tags[0])
				break
			}
		}
	}
	return out
}

// Enqueue puts a queued pipeline on its class's queue and wakes agents waiting for that class.
func (s *Service) Enqueue(ctx context.Context, p *build.Pipeline) error {
	at := p.CreatedAt
	if p.QueuedAt != nil {
		at = *p.QueuedAt
	}
	if _, err := s.queue.Enqueue(ctx, Entry{PipelineID: p.ID, OrgID: p.OrgID, Class: p.RunnerTag, CPUs: p.CPUs,
		GPUs: s.gpusOf(p.RunnerTag), Enqueued: at}); err != nil {
		return err
	}
	s.notify(ctx, p.RunnerTag)
	return nil
}

// rules returns the dispatch rules of a class.
func (s *Service) rules(class string) Rules {
	return Rules{Depth: s.cfg.Depth, StarveAfter: s.cfg.StarveAfter, Cap: s.cfg.Caps[class]}
}

// wakeup lets long-polls sleep until work may be there: a channel per class, closed (and
// replaced) when that class gets work. Other replicas learn of work through Redis pub/sub.
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

const workChannel = "nimbus:work"

func (s *Service) notify(ctx context.Context, class string) {
	s.wake.fire(class)
	s.rdb.Publish(ctx, workChannel, class)
}

// listen relays other replicas' work notifications to local long-polls until ctx ends.
func (s *Service) listen(ctx context.Context) {
	sub := s.rdb.Subscribe(ctx, workChannel)
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
			s.wake.fire(m.Payload)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

var errLeaseLost = fmt.Errorf("lease lost")
