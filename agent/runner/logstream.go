package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nimbus-build/nimbus/agent/client"
)

const (
	// maxChunk bounds one log append, so a burst of output becomes several requests of a size
	// every proxy accepts.
	maxChunk = 1 << 20
	// maxUnacked bounds what a job's log keeps in memory while the server does not take it;
	// beyond it new output is dropped and counted, and a note says so once shipping resumes.
	maxUnacked = 64 << 20
)

// logStream ships one job's log to the server. Writes only append to memory; a goroutine sends
// what is new, starting from the offset the server acknowledged last. A failed send changes
// nothing, so the next one resends the same bytes from the same offset: the server keeps what it
// already has, and nothing is lost or doubled.
//
// When to send: a job's first output, and output after a quiet spell, go at once (people watch
// the first second of every job); output that comes while the last send is less than an interval
// old waits for the interval, so a chatty job makes one request per interval, not one per line.
// A failed send is retried an interval later.
//
// When the job ends, finish asks for one last send; the job's job_finished waits for it in the
// run's outbox. What is still unsent keeps being retried until the run abandons the stream.
type logStream struct {
	api      API
	leaseID  string
	jobID    int64
	interval time.Duration
	onLost   func() // the server answered lease_lost
	log      *slog.Logger

	mu      sync.Mutex
	buf     []byte // bytes not yet acknowledged; buf[0] is at offset acked
	acked   int64
	dropped int64 // bytes refused because buf was full
	broken  bool  // the server lost bytes it had acknowledged: nothing can be appended any more

	ctx     context.Context // ends on abandon (or with the run's reports), cutting a send short
	abandon context.CancelFunc
	closing atomic.Bool
	closed  chan struct{} // closed by finish: a batching wait ends
	kick    chan struct{}
	done    chan struct{} // closed when the loop has ended
}

func newLogStream(parent context.Context, api API, leaseID string, jobID int64, interval time.Duration, onLost func(), log *slog.Logger) *logStream {
	ctx, cancel := context.WithCancel(parent)
	s := &logStream{api: api, leaseID: leaseID, jobID: jobID, interval: interval, onLost: onLost, log: log,
		ctx: ctx, abandon: cancel, closed: make(chan struct{}), kick: make(chan struct{}, 1), done: make(chan struct{})}
	go s.loop()
	return s
}

// Write implements io.Writer; it never blocks on the network.
func (s *logStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.buf)+len(p) > maxUnacked {
		s.dropped += int64(len(p))
		return len(p), nil
	}
	if s.dropped > 0 {
		s.buf = fmt.Appendf(s.buf, "\n[nimbus] %d bytes of output were dropped while the server did not accept the log\n", s.dropped)
		s.dropped = 0
	}
	s.buf = append(s.buf, p...)
	s.nudge()
	return len(p), nil
}

// nudge wakes the loop without waiting.
func (s *logStream) nudge() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// loop sends when there is something new (see the type's comment for when), and ends after
// finish as soon as the server holds everything.
func (s *logStream) loop() {
	defer close(s.done)
	var last time.Time // the last send's start
	var retry *time.Timer
	var retryC <-chan time.Time
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.kick:
		case <-retryC:
			retryC = nil
		}
		if wait := s.interval - time.Since(last); wait > 0 && !s.closing.Load() {
			// Under load: batch what comes until the interval is over.
			t := time.NewTimer(wait)
			select {
			case <-s.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			case <-s.closed:
				t.Stop()
			}
		}
		last = time.Now()
		err := s.flush(s.ctx)
		switch {
		case errors.Is(err, client.ErrLeaseLost) || s.ctx.Err() != nil:
			return
		case s.closing.Load() && s.pending() == 0:
			return
		case err != nil || s.pending() > 0:
			if err != nil {
				// The client has already backed off; an interval later the same bytes go again.
				s.log.Warn("log upload failed; will resend", "job_id", s.jobID, "err", err)
			}
			if retry == nil {
				retry = time.NewTimer(s.interval)
			} else {
				retry.Reset(s.interval)
			}
			retryC = retry.C
		}
	}
}

// finish says no more bytes will come and asks for a send now.
func (s *logStream) finish() {
	if s.closing.CompareAndSwap(false, true) {
		close(s.closed)
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// wait waits until the server holds the whole log (after finish), or d has passed; it reports
// whether everything was shipped.
func (s *logStream) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.done:
		return s.pending() == 0
	case <-t.C:
		return false
	}
}

// pending is the number of bytes the server does not hold yet, 0 when it never will.
func (s *logStream) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken {
		return 0
	}
	return len(s.buf)
}

// flush sends everything not yet acknowledged, in chunks, until the server holds it all.
func (s *logStream) flush(ctx context.Context) error {
	// Only the bytes there when the send began: what a job writes meanwhile waits for the next
	// interval with the rest of its burst (it went at once when it came in during a send).
	s.mu.Lock()
	upTo := s.acked + int64(len(s.buf))
	s.mu.Unlock()
	for {
		s.mu.Lock()
		if len(s.buf) == 0 || s.broken || s.acked >= upTo {
			s.mu.Unlock()
			return nil
		}
		offset := s.acked
		chunk := append([]byte(nil), s.buf[:min(len(s.buf), maxChunk, int(upTo-s.acked))]...)
		s.mu.Unlock()

		got, err := s.api.AppendLog(ctx, s.leaseID, s.jobID, offset, chunk)
		if err != nil {
			if errors.Is(err, client.ErrLeaseLost) {
				s.onLost()
			}
			return err
		}
		s.mu.Lock()
		progressed := s.ack(offset, got)
		s.mu.Unlock()
		if !progressed {
			return nil // the server took nothing new; try again at the next tick
		}
	}
}

// ack records that the server holds the log up to got, after a send that started at offset.
func (s *logStream) ack(offset, got int64) bool {
	end := s.acked + int64(len(s.buf))
	switch {
	case got >= s.acked && got <= end:
		s.buf = s.buf[got-s.acked:]
		progressed := got > s.acked
		s.acked = got
		return progressed
	case got > end:
		// The server claims more than was ever sent: trust it and go on from there.
		s.log.Warn("server acknowledged log bytes that were never sent", "job_id", s.jobID, "ack", got, "sent_to", end)
		s.buf, s.acked = nil, got
		return false
	default:
		// The server lost bytes it had acknowledged; they are gone from memory too, and it
		// refuses appends past a gap, so nothing more can be shipped for this job.
		s.log.Error("server lost acknowledged log bytes; the rest of this job's log is not shipped",
			"job_id", s.jobID, "ack", got, "had_acked", s.acked, "sent_from", offset)
		s.broken = true
		return false
	}
}
