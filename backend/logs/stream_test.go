package logs_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/logs"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// collect reads data events until they hold n bytes of text, and returns the text and the last
// event id. Every event must be valid UTF-8, and ids must grow.
func collect(t *testing.T, events <-chan event, n int) (string, int64) {
	t.Helper()
	var got string
	var id int64
	for len(got) < n {
		ev, ok := next(t, events)
		if !ok {
			t.Fatalf("stream ended after %q, want %d bytes", got, n)
		}
		if ev.Name != "" {
			t.Fatalf("event %q after %q, want %d bytes of data", ev.Name, got, n)
		}
		if !utf8.ValidString(ev.Data) {
			t.Fatalf("event data %q splits a character", ev.Data)
		}
		got += ev.Data
		next, err := strconv.ParseInt(ev.ID, 10, 64)
		if err != nil || next <= id {
			t.Fatalf("event id %q after %d", ev.ID, id)
		}
		id = next
	}
	return got, id
}

// collectLog is collect for text without carriage returns, whose ids count its bytes from start.
func collectLog(t *testing.T, events <-chan event, start int64, want string) {
	t.Helper()
	got, id := collect(t, events, len(want))
	if got != want || id != start+int64(len(want)) {
		t.Fatalf("data %q up to id %d, want %q up to %d", got, id, want, start+int64(len(want)))
	}
}

// TestStreamJoinMidLogThenLive: a viewer on one replica joins a running job's log in the middle,
// gets the rest of what is stored, then what another replica appends, live through Redis (the
// poll interval is an hour, so nothing else could deliver it), and finally the end event.
func TestStreamJoinMidLogThenLive(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		rdb := newRedis(t)
		viewer := newService(db, rdb, logs.Config{})
		agent := newService(db, rdb, logs.Config{})
		job := newJob(t, db)
		appendAll := func(parts ...string) {
			t.Helper()
			for _, p := range parts {
				size, _ := agent.Size(ctx, job)
				if _, err := agent.Append(ctx, job, size, []byte(p)); err != nil {
					t.Fatal(err)
				}
			}
		}
		appendAll("line 1\n", "\x1b[31mred line 2\x1b[0m\n", "line 3 with no end")

		srv, done := server(t, viewer, logs.HandlerConfig{Heartbeat: time.Hour, Poll: time.Hour})
		events, _ := openStream(t, fmt.Sprintf("%s/api/v1/jobs/%d/log/stream", srv.URL, job), "7")
		stored := "\x1b[31mred line 2\x1b[0m\nline 3 with no end"
		collectLog(t, events, 7, stored)

		// Live: colours, a progress bar's carriage returns, and a character split by two appends.
		tick := "✓"
		appendAll(", the end\n\x1b[1;32mbold green\x1b[0m\n", "50%\r100%\n", "naïve "+tick[:1])
		appendAll(tick[1:] + "\n")
		want := ", the end\n\x1b[1;32mbold green\x1b[0m\n50%\x1b[1G100%\nnaïve ✓\n"
		size, _ := agent.Size(ctx, job)
		if got, id := collect(t, events, len(want)); got != want || id != size {
			t.Fatalf("live part = %q up to id %d, want %q up to %d", got, id, want, size)
		}

		if err := agent.Complete(ctx, job); err != nil {
			t.Fatal(err)
		}
		ev, ok := next(t, events)
		if !ok || ev.Name != "end" || ev.ID != strconv.FormatInt(size, 10) ||
			ev.Data != fmt.Sprintf(`{"size":%d,"truncated":false}`, size) {
			t.Fatalf("last event = %+v, %v; want the end at %d", ev, ok, size)
		}
		if ev, ok := next(t, events); ok {
			t.Fatalf("event after the end: %+v", ev)
		}
		waitDone(t, done)
	})
}

func waitDone(t *testing.T, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream handler did not return")
	}
}

// TestStreamEnds: a stream stops promptly however it ends, and only a complete log gets an end
// event.
func TestStreamEnds(t *testing.T) {
	cases := []struct {
		name    string
		end     func(svc *logs.Service, job int64, cancel context.CancelFunc, drain chan struct{}) error
		wantEnd bool
	}{
		{"the client goes away", func(_ *logs.Service, _ int64, cancel context.CancelFunc, _ chan struct{}) error {
			cancel()
			return nil
		}, false},
		{"the server drains", func(_ *logs.Service, _ int64, _ context.CancelFunc, drain chan struct{}) error {
			close(drain)
			return nil
		}, false},
		{"the log completes", func(svc *logs.Service, job int64, _ context.CancelFunc, _ chan struct{}) error {
			return svc.Complete(context.Background(), job)
		}, true},
	}
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		svc := newService(db, newRedis(t), logs.Config{})
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				job := newJob(t, db)
				if _, err := svc.Append(context.Background(), job, 0, []byte("running\n")); err != nil {
					t.Fatal(err)
				}
				drain := make(chan struct{})
				srv, done := server(t, svc, logs.HandlerConfig{
					Draining:  func() <-chan struct{} { return drain },
					Heartbeat: time.Hour, Poll: time.Hour,
				})
				events, cancel := openStream(t, fmt.Sprintf("%s/api/v1/jobs/%d/log/stream", srv.URL, job), "")
				collectLog(t, events, 0, "running\n")
				if err := tc.end(svc, job, cancel, drain); err != nil {
					t.Fatal(err)
				}
				waitDone(t, done)
				var names []string
				for ev := range events {
					names = append(names, ev.Name)
				}
				if gotEnd := len(names) == 1 && names[0] == "end"; gotEnd != tc.wantEnd {
					t.Fatalf("events after the data: %q; want an end event: %v", names, tc.wantEnd)
				}
			})
		}
	})
}

// TestStreamWithoutRedis: with Redis unreachable, appends are still stored and streams still
// deliver them by polling; heartbeats keep the idle stream open meanwhile.
func TestStreamWithoutRedis(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
		t.Cleanup(func() { down.Close() })
		svc := newService(db, down, logs.Config{})
		job := newJob(t, db)
		srv, _ := server(t, svc, logs.HandlerConfig{Heartbeat: 20 * time.Millisecond, Poll: 50 * time.Millisecond})
		events, _ := openStream(t, fmt.Sprintf("%s/api/v1/jobs/%d/log/stream", srv.URL, job), "")

		for ev := range events {
			if ev.Comment == "heartbeat" {
				break
			}
		}
		if _, err := svc.Append(ctx, job, 0, []byte("stored anyway\n")); err != nil {
			t.Fatal(err)
		}
		collectLog(t, events, 0, "stored anyway\n")
		if err := svc.Complete(ctx, job); err != nil {
			t.Fatal(err)
		}
		if ev, ok := next(t, events); !ok || ev.Name != "end" {
			t.Fatalf("last event = %+v, %v", ev, ok)
		}
	})
}

func TestStreamRequests(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		svc := newService(db, newRedis(t), logs.Config{})
		job, other := newJob(t, db), newJob(t, db)
		if _, err := svc.Append(context.Background(), job, 0, []byte("0123456789")); err != nil {
			t.Fatal(err)
		}
		if err := svc.Complete(context.Background(), job); err != nil {
			t.Fatal(err)
		}
		srv, _ := server(t, svc, logs.HandlerConfig{}, other)
		cases := []struct {
			name, path, lastEventID string
			status                  int
			body                    string
		}{
			{"from ?offset=", fmt.Sprintf("%d/log/stream?offset=4", job), "", 200,
				"id: 10\ndata: 456789\n\nevent: end\nid: 10\ndata: {\"size\":10,\"truncated\":false}\n\n"},
			{"Last-Event-ID wins over ?offset=", fmt.Sprintf("%d/log/stream?offset=4", job), "8", 200,
				"id: 10\ndata: 89\n\nevent: end\nid: 10\ndata: {\"size\":10,\"truncated\":false}\n\n"},
			{"at the end of a complete log", fmt.Sprintf("%d/log/stream", job), "10", 200,
				"event: end\nid: 10\ndata: {\"size\":10,\"truncated\":false}\n\n"},
			{"past the end", fmt.Sprintf("%d/log/stream", job), "11", 416, ""},
			{"a bad offset", fmt.Sprintf("%d/log/stream?offset=x", job), "", 400, ""},
			{"a job the caller may not see", fmt.Sprintf("%d/log/stream", other), "", 404, ""},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp, body := get(t, srv.URL+"/api/v1/jobs/"+tc.path, "Last-Event-ID", tc.lastEventID)
				if resp.StatusCode != tc.status || (tc.status == 200 && string(body) != tc.body) {
					t.Fatalf("%d %q, want %d %q", resp.StatusCode, body, tc.status, tc.body)
				}
			})
		}
	})
}
