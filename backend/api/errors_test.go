package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/agent/userpath"
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
		{"api error", NotFound("repo %q not found", "a/b"), 404, CodeNotFound, `repo "a/b" not found`, nil},
		{"wrapped api error", fmt.Errorf("loading: %w", Conflict("taken")), 409, CodeConflict, "taken", nil},
		{"plain error hides its text", errors.New("pq: connection refused at 10.0.0.1"), 500, CodeInternal, "internal error", nil},
		// A path the path rule refuses, however deep a service found it, names the path and the
		// reason; the services need not convert it.
		{"path refused by the path rule", fmt.Errorf("put secret file: %w", userpath.Check("/etc/x.yml")), 400, CodeBadRequest,
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
