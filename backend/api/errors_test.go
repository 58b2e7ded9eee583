package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/internal/userpath"
)

func TestFailWritesEnvelope(t *testing.T) {
	gin.SetMode(gin.TestMode)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		name      string
		err       error
		status    int
		code, msg string
		details   map[string]any // when set, the envelope's details must be these
	}{
		{"api error", fault.NotFound("repo %q not found", "a/b"), 404, fault.CodeNotFound, `repo "a/b" not found`, nil},
		{"wrapped api error", fmt.Errorf("loading: %w", fault.Conflict("taken")), 409, fault.CodeConflict, "taken", nil},
		{"plain error hides its text", errors.New("pq: connection refused at 10.0.0.1"), 500, fault.CodeInternal, "internal error", nil},
		// A path the path rule refuses, however deep a service found it, names the path and the
		// reason; the services need not convert it.
		{"path refused by the path rule", fmt.Errorf("put secret file: %w", userpath.Check("/etc/x.yml")), 400, fault.CodeBadRequest,
			`path "/etc/x.yml" starts with "/" (paths are relative)`,
			map[string]any{"path": "/etc/x.yml", "reason": `starts with "/" (paths are relative)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(w)
			c.Request = httptest.NewRequest(http.MethodGet, "/x", nil)
			Fail(c, log, tt.err)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d", w.Code, tt.status)
			}
			var env struct {
				Error struct {
					Code, Message string
					Details       map[string]any
				} `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil {
				t.Fatalf("body %q: %v", w.Body.String(), err)
			}
			if env.Error.Code != tt.code || env.Error.Message != tt.msg {
				t.Fatalf("envelope %+v", env.Error)
			}
			if tt.details != nil && !reflect.DeepEqual(env.Error.Details, tt.details) {
				t.Fatalf("details %v, want %v", env.Error.Details, tt.details)
			}
		})
	}
}

// A request whose client went away is no server error. The defect: an agent restarting its
// control long-poll (by design, whenever its running set changes) made the handler fail with
// context.Canceled, which Fail logged at ERROR as "request failed" and answered 500; a healthy
// fleet logged about 10 such lines per 200 pipelines. A real failure while the client is still
// there stays an ERROR.
func TestFailQuietWhenClientGone(t *testing.T) {
	gin.SetMode(gin.TestMode)
	for _, tt := range []struct {
		name      string
		gone      bool
		err       error
		status    int
		errorLine bool
	}{
		{"client gone, context error", true, fmt.Errorf("poll: %w", context.Canceled), StatusClientClosed, false},
		{"client gone, the database's own words", true, errors.New("sql: interrupted (9)"), StatusClientClosed, false},
		{"client there, context error of the server's own", false, fmt.Errorf("lookup: %w", context.DeadlineExceeded), 500, true},
		{"client there, plain error", false, errors.New("pq: connection refused"), 500, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logged strings.Builder
			log := slog.New(slog.NewJSONHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.gone {
				cancel()
			}
			w := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(w)
			c.Request = httptest.NewRequest(http.MethodPost, "/api/v1/agent/control", nil).WithContext(ctx)
			Fail(c, log, tt.err)
			if c.Writer.Status() != tt.status {
				t.Fatalf("status %d, want %d", c.Writer.Status(), tt.status)
			}
			if got := strings.Contains(logged.String(), `"level":"ERROR"`); got != tt.errorLine {
				t.Fatalf("ERROR line logged: %v, want %v:\n%s", got, tt.errorLine, logged.String())
			}
			if !tt.errorLine && !strings.Contains(logged.String(), "abandoned by its client") {
				t.Fatalf("the abandoned request left no DEBUG line:\n%s", logged.String())
			}
		})
	}
}

// Each fault kind has the one status it was answered with before kinds existed, and Fail writes
// it with the fault's own code and details: the envelope on the wire did not change.
func TestFailMapsEveryKind(t *testing.T) {
	gin.SetMode(gin.TestMode)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	want := map[fault.Kind]int{
		fault.KindInternal: 500, fault.KindBadRequest: 400, fault.KindInvalid: 422,
		fault.KindUnauthenticated: 401, fault.KindForbidden: 403, fault.KindNotFound: 404,
		fault.KindConflict: 409, fault.KindTooLarge: 413, fault.KindRangeNotSatisfiable: 416,
		fault.KindRateLimited: 429, fault.KindUpstreamFailed: 502, fault.KindUnavailable: 503,
	}
	for k := fault.KindInternal; k <= fault.KindUnavailable; k++ {
		status, ok := want[k]
		if !ok {
			t.Fatalf("kind %v has no status in this test", k)
		}
		w := httptest.NewRecorder()
		c, _ := gin.CreateTestContext(w)
		c.Request = httptest.NewRequest(http.MethodGet, "/x", nil)
		e := fault.New(k, "some_code", "a %s", k)
		e.Details = map[string]any{"field": "name"}
		Fail(c, log, e)
		if w.Code != status || Status(k) != status {
			t.Errorf("kind %v answered %d (Status says %d), want %d", k, w.Code, Status(k), status)
		}
		if got := w.Body.String(); got != fmt.Sprintf(`{"error":{"code":"some_code","message":"a %s","details":{"field":"name"}}}`, k) {
			t.Errorf("kind %v: body %s", k, got)
		}
	}
}
