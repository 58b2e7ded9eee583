package runner

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/agent/client"
	"github.com/nimbus-build/nimbus/agent/internal/fakeserver"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

func TestLogsSurviveServerErrorsWithoutLossOrDuplicates(t *testing.T) {
	eachExecutor(t, func(t *testing.T, h *harness) {
		var before, after atomic.Int32
		// Every fourth append is lost before it is stored, every fourth after (the answer is
		// lost): both make the agent send the same offset again.
		h.srv.LogFault = func(n int) fakeserver.Fault {
			switch n % 4 {
			case 1:
				after.Add(1)
				return fakeserver.FaultAfter
			case 2:
				before.Add(1)
				return fakeserver.FaultBefore
			}
			return fakeserver.FaultNone
		}
		job := script("noisy", `for b in $(seq 1 10); do seq $((b*100-99)) $((b*100)); sleep 0.05; done`)
		res, rec := h.run(t, lease("logs", plan(serial("s", job))))
		if res.Status != StatusSuccess {
			t.Fatalf("result %+v", res)
		}
		want, err := exec.Command("seq", "1", "1000").Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := logOf(rec, jobID(0, 0)); got != string(want) {
			t.Fatalf("stored log differs: %d bytes, want %d\n%.300q", len(got), len(want), got)
		}
		if before.Load() < 2 || after.Load() < 2 {
			t.Fatalf("too few faults to prove anything: %d before, %d after", before.Load(), after.Load())
		}
	})
}

func TestSecretsAreMaskedAcrossChunks(t *testing.T) {
	eachExecutor(t, func(t *testing.T, h *harness) {
		var appends atomic.Int32
		h.srv.LogFault = func(int) fakeserver.Fault { appends.Add(1); return fakeserver.FaultNone }
		// The secret is printed in two writes far enough apart (400 ms, flushes every 100 ms)
		// that its halves would travel in different chunks if nothing held the first back.
		job := script("leaky", `printf 'key: s3cr'; sleep 0.4; printf 'et-value\n'; echo "token=$CNB_TOKEN"; echo "##[set-output k=s3cret-value]"`)
		job.Exports = map[string]string{"k": "LEAKED", "stdout": "OUT"}
		l := lease("mask", plan(serial("s", job)))
		l.Secrets = map[string]string{"API_KEY": "s3cret-value"}
		l.JobToken = "job-token-0123456789"
		l.Env["CNB_TOKEN"] = l.JobToken
		_, rec := h.run(t, l)
		got := logOf(rec, jobID(0, 0))
		if want := "key: ***\ntoken=***\n##[set-output k=***]\n"; got != want {
			t.Fatalf("log %q, want %q", got, want)
		}
		if appends.Load() < 2 {
			t.Fatalf("the log travelled in %d chunk(s); the test needs at least 2", appends.Load())
		}
		ev := rec.JobFinished(t, jobID(0, 0))
		if ev.Exports["LEAKED"] != "***" || strings.Contains(ev.Exports["OUT"], "s3cret") || strings.Contains(ev.Exports["OUT"], l.JobToken) {
			t.Fatalf("exports reported unmasked: %v", ev.Exports)
		}
	})
}

func TestALogOutageDoesNotHoldThePipelineUp(t *testing.T) {
	h := newHarness(t, "shell")
	h.srv.LogFault = func(int) fakeserver.Fault { return fakeserver.FaultBefore } // the log store is down
	start := time.Now()
	res, rec := h.run(t, lease("log-outage", plan(serial("s", script("a", "echo a"), script("b", "echo b")))))
	took := time.Since(start)
	if res.Status != StatusSuccess || len(rec.Logs[jobID(0, 0)]) != 0 {
		t.Fatalf("result %+v, logs %v", res, rec.Logs)
	}
	// Each job waits 10 flush intervals for its log, the run 30 more: 5 s at 100 ms, not the
	// client's minute of retries per append. The bound leaves a loaded machine room and still
	// fails that minute.
	if want := 50 * h.srv.Intervals.LogFlushInterval.Std(); took > want+15*time.Second {
		t.Fatalf("took %v, want at most about %v", took, want)
	}
	if st, _ := status(t, rec, jobID(0, 1)); st != StatusSuccess {
		t.Fatalf("second job %s", st)
	}
}

// scriptedAPI answers log appends from a script, to drive the stream through error paths that
// a well-behaved server never takes.
type scriptedAPI struct {
	mu      sync.Mutex
	stored  []byte
	answers []func(stored []byte, offset int64, data []byte) (int64, []byte, error)
	calls   int
	offsets []int64
}

func (s *scriptedAPI) Renew(context.Context, string) (protocol.RenewResponse, error) {
	return protocol.RenewResponse{}, nil
}
func (s *scriptedAPI) Event(context.Context, string, protocol.Event) error { return nil }
func (s *scriptedAPI) Finish(context.Context, string, protocol.FinishRequest) error {
	return nil
}

func (s *scriptedAPI) AppendLog(_ context.Context, _ string, _ int64, offset int64, data []byte) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.offsets = append(s.offsets, offset)
	answer := storeAll
	if len(s.answers) > 0 {
		answer, s.answers = s.answers[0], s.answers[1:]
	}
	ack, stored, err := answer(s.stored, offset, data)
	s.stored = stored
	return ack, err
}

// storeAll is a correct server.
func storeAll(stored []byte, offset int64, data []byte) (int64, []byte, error) {
	if offset <= int64(len(stored)) && offset+int64(len(data)) > int64(len(stored)) {
		stored = append(stored, data[int64(len(stored))-offset:]...)
	}
	return int64(len(stored)), stored, nil
}

func TestLogStreamResendsFromTheAckedOffset(t *testing.T) {
	fail := func(stored []byte, _ int64, _ []byte) (int64, []byte, error) {
		return 0, stored, errors.New("connection reset")
	}
	half := func(stored []byte, offset int64, data []byte) (int64, []byte, error) {
		return storeAll(stored, offset, data[:len(data)/2])
	}
	api := &scriptedAPI{answers: []func([]byte, int64, []byte) (int64, []byte, error){fail, half, fail}}
	s := newLogStream(context.Background(), api, "l", 1, time.Hour, func() {}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	// Buffered without Write's nudge: the stream's own loop would send at once (its first send
	// has no interval to wait for) and race the flushes below for the scripted answers.
	s.mu.Lock()
	s.buf = append(s.buf, "0123456789"...)
	s.mu.Unlock()
	if err := s.flush(context.Background()); err == nil {
		t.Fatal("the first flush hit an error and must say so")
	}
	// The server keeps half, then the send of the rest fails: the stream stays at the ack.
	if err := s.flush(context.Background()); err == nil || string(api.stored) != "01234" || s.acked != 5 {
		t.Fatalf("after a partial ack: %v, stored %q, acked %d", err, api.stored, s.acked)
	}
	if err := s.flush(context.Background()); err != nil || string(api.stored) != "0123456789" {
		t.Fatalf("resend: %v, stored %q", err, api.stored)
	}
	s.Write([]byte("abc"))
	s.finish()
	if !s.wait(5 * time.Second) {
		t.Fatal("the last bytes were not shipped after finish")
	}
	if want := []int64{0, 0, 5, 5, 10}; !slices.Equal(api.offsets, want) {
		t.Fatalf("sent at offsets %v, want %v", api.offsets, want)
	}
	if string(api.stored) != "0123456789abc" {
		t.Fatalf("stored %q", api.stored)
	}
}

func TestLogStreamStopsOnLeaseLost(t *testing.T) {
	lost := &client.APIError{Status: 409, Code: protocol.ErrCodeLeaseLost}
	api := &scriptedAPI{answers: []func([]byte, int64, []byte) (int64, []byte, error){
		func(stored []byte, _ int64, _ []byte) (int64, []byte, error) { return 0, stored, lost },
	}}
	var called atomic.Bool
	s := newLogStream(context.Background(), api, "l", 1, time.Hour, func() { called.Store(true) }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.Write([]byte("x"))
	s.finish()
	s.wait(5 * time.Second)
	select {
	case <-s.done:
	default:
		t.Fatal("the stream goes on after lease_lost")
	}
	if !called.Load() || api.calls != 1 {
		t.Fatalf("onLost %v, %d calls", called.Load(), api.calls)
	}
}
