package api

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/nimbus-build/nimbus/backend/fault"
)

func TestRoutesWriteReturnedErrorsAndStopTheChain(t *testing.T) {
	gin.SetMode(gin.TestMode)
	e := gin.New()
	rs := NewRoutes(e, slog.New(slog.NewTextHandler(io.Discard, nil)))
	reached := false
	guard := func(c *gin.Context) error {
		if c.Query("ok") == "" {
			return fault.Forbidden("no")
		}
		c.Next()
		return nil
	}
	rs.GET("/guarded", guard, func(c *gin.Context) error {
		reached = true
		return JSON(c, http.StatusOK, map[string]int{"n": 1})
	})
	rs.POST("/boom", func(c *gin.Context) error { return errors.New("disk on fire") })
	rs.DELETE("/gone", func(c *gin.Context) error { return NoContent(c) })
	items := []int64{1, 2, 3, 4, 5}
	rs.GET("/all", func(c *gin.Context) error {
		return ListAll(c, func() ([]int64, error) { return items, nil }, func(n int64) int64 { return n })
	})
	rs.GET("/paged", func(c *gin.Context) error {
		return ListPage(c, func(p Page) ([]int64, error) { return items[:min(len(items), p.Limit+1)], nil }, func(n int64) int64 { return n })
	})

	do := func(method, path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest(method, path, nil))
		return w
	}
	if w := do("GET", "/guarded"); w.Code != 403 || !strings.Contains(w.Body.String(), `"code":"forbidden"`) || reached {
		t.Fatalf("guard failure: %d %s reached=%v", w.Code, w.Body, reached)
	}
	if w := do("GET", "/guarded?ok=1"); w.Code != 200 || w.Body.String() != `{"n":1}` || !reached {
		t.Fatalf("guard pass: %d %s", w.Code, w.Body)
	}
	if w := do("POST", "/boom"); w.Code != 500 || strings.Contains(w.Body.String(), "fire") {
		t.Fatalf("plain error: %d %s", w.Code, w.Body)
	}
	if w := do("DELETE", "/gone"); w.Code != 204 {
		t.Fatalf("no content: %d", w.Code)
	}
	if w := do("GET", "/all?limit=2"); w.Code != 200 || !strings.Contains(w.Body.String(), `"items":[1,2]`) || !strings.Contains(w.Body.String(), "next_cursor") {
		t.Fatalf("list all: %d %s", w.Code, w.Body)
	}
	if w := do("GET", "/paged?limit=10"); w.Code != 200 || w.Body.String() != `{"items":[1,2,3,4,5]}` {
		t.Fatalf("list page: %d %s", w.Code, w.Body)
	}
	if w := do("GET", "/paged?limit=0"); w.Code != 400 {
		t.Fatalf("bad limit: %d %s", w.Code, w.Body)
	}
}
