package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
)

func TestFailWritesEnvelope(t *testing.T) {
	gin.SetMode(gin.TestMode)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		name      string
		err       error
		status    int
		code, msg string
	}{
		{"api error", NotFound("repo %q not found", "a/b"), 404, CodeNotFound, `repo "a/b" not found`},
		{"wrapped api error", fmt.Errorf("loading: %w", Conflict("taken")), 409, CodeConflict, "taken"},
		{"plain error hides its text", errors.New("pq: connection refused at 10.0.0.1"), 500, CodeInternal, "internal error"},
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
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil {
				t.Fatalf("body %q: %v", w.Body.String(), err)
			}
			if env.Error.Code != tt.code || env.Error.Message != tt.msg {
				t.Fatalf("envelope %+v", env.Error)
			}
		})
	}
}
