package logs_test

import (
	"bufio"
	"context"
	"fmt"
	"github.com/nimbus-build/nimbus/backend/redisconn/redistest"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/build/buildtest"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/logs"
)

var discard = slog.New(slog.DiscardHandler)

// newRedis returns the test Redis when one is available (required under CI=true), else an
// embedded one. Log channels are per job id, and every test database numbers its jobs from 1, so
// tests sharing the real server may see each other's notifications: harmless, a notification
// only makes a stream re-read the database.
func newRedis(t testing.TB) redis.UniversalClient { return redistest.Shared(t) }

func newService(db *gorm.DB, rdb redis.UniversalClient, cfg logs.Config) *logs.Service {
	return logs.NewService(db, rdb, clock.NewFake(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)), discard, cfg)
}

// newJob inserts the rows a job hangs from — an org and a repo with plain SQL of their
// migrations' columns, a running build, pipeline and stage through buildtest — and the job, and
// returns the job's id.
func newJob(t testing.TB, db *gorm.DB) int64 {
	t.Helper()
	job, _ := newJobOf(t, db)
	return job
}

// newJobOf is newJob that also returns the job's repo.
func newJobOf(t testing.TB, db *gorm.DB) (job, repo int64) {
	t.Helper()
	now := time.Now().UTC()
	insert := func(sql string, args ...any) int64 {
		var id int64
		if err := db.Raw(sql+" RETURNING id", args...).Scan(&id).Error; err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return id
	}
	org := insert("INSERT INTO orgs (name, created_at, updated_at) VALUES (?, ?, ?)", fmt.Sprintf("team-%d", rand.Int64()), now, now)
	repo = insert("INSERT INTO repos (org_id, name, visibility, default_branch, created_at, updated_at) VALUES (?, 'app', 'private', 'main', ?, ?)", org, now, now)
	seeded, err := buildtest.Seed(db, buildtest.Running{RepoID: repo, OrgID: org, Number: 1, Commit: "abc"})
	if err != nil {
		t.Fatal(err)
	}
	return seeded.JobID, repo
}

// logText returns n bytes of a plausible training log: timestamps, ANSI colours, numbers.
func logText(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	var b strings.Builder
	for b.Len() < n {
		fmt.Fprintf(&b, "2026-05-01T12:%02d:%02d.%03dZ \x1b[32mINFO\x1b[0m epoch=%d step=%d loss=%.4f lr=%.2e tput=%d samples/s\n",
			r.IntN(60), r.IntN(60), r.IntN(1000), r.IntN(100), r.IntN(1e6), r.Float64()*4, r.Float64()*1e-3, r.IntN(50000))
	}
	return []byte(b.String()[:n])
}

// readAll returns the whole stored log.
func readAll(t testing.TB, svc *logs.Service, jobID int64) string {
	t.Helper()
	b, err := svc.Read(context.Background(), jobID, 0, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// server serves the log routes under /api/v1 over real HTTP. It reports every finished request
// on the returned channel, so tests can see a handler return. Job ids in forbidden are refused
// the way the real wiring refuses another team's job.
func server(t *testing.T, svc *logs.Service, cfg logs.HandlerConfig, forbidden ...int64) (*httptest.Server, <-chan struct{}) {
	t.Helper()
	gin.SetMode(gin.TestMode)
	cfg.Authorize = func(c *gin.Context, jobID int64) error {
		for _, id := range forbidden {
			if id == jobID {
				return fault.NotFound("job not found")
			}
		}
		return nil
	}
	h, err := logs.NewHandler(svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 100)
	e := gin.New()
	e.Use(func(c *gin.Context) {
		c.Next()
		select {
		case done <- struct{}{}:
		default: // a test that watches for returns makes few requests
		}
	})
	h.Routes(e, e.Group("/api/v1"))
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return srv, done
}

// get sends a GET with one optional header (name and value; none when value is empty) and
// returns the response with its whole body.
func get(t *testing.T, url, name, value string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if value != "" {
		req.Header.Set(name, value)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// event is one Server-Sent Event, or a comment.
type event struct {
	ID, Name, Data string
	Comment        string
}

// readEvents parses an SSE body as EventSource does (lines end in "\n": the server never sends
// "\r") and sends each event and comment on the returned channel, which closes at the end of
// the body.
func readEvents(body io.Reader) <-chan event {
	ch := make(chan event, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(body)
		sc.Buffer(nil, 4<<20)
		var ev event
		var data []string
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				if data != nil {
					ev.Data = strings.Join(data, "\n")
					ch <- ev
				}
				ev, data = event{}, nil
				continue
			}
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "":
				ch <- event{Comment: value}
			case "id":
				ev.ID = value
			case "event":
				ev.Name = value
			case "data":
				data = append(data, value)
			}
		}
	}()
	return ch
}

// openStream starts a stream request; cancel ends it from the client's side.
func openStream(t *testing.T, url string, lastEventID string) (<-chan event, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return readEvents(resp.Body), cancel
}

// next returns the next event that is not a comment, failing after a few seconds.
func next(t *testing.T, events <-chan event) (event, bool) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if ok && ev.Comment != "" {
				continue
			}
			return ev, ok
		case <-timeout:
			t.Fatal("no event within 10 s")
			return event{}, false
		}
	}
}
