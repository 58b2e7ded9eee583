package api

import (
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"
)

// HandlerFunc is a route's handler. It writes its own success response and returns its error
// instead of writing it: Handle turns every error into the envelope, in one place, so no
// handler can forget to stop after a failure or answer an error in a shape of its own.
type HandlerFunc func(c *gin.Context) error

// Handle adapts h to gin. A non-nil error is written with Fail (and the request aborted); nil
// means h has answered.
func Handle(log *slog.Logger, h HandlerFunc) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := h(c); err != nil {
			Fail(c, log, err)
		}
	}
}

// Routes registers HandlerFuncs on a gin router (the engine, a group), each through Handle.
type Routes struct {
	r   gin.IRoutes
	log *slog.Logger
}

// NewRoutes returns Routes that register on r and log internal errors to log.
func NewRoutes(r gin.IRoutes, log *slog.Logger) Routes { return Routes{r: r, log: log} }

func (rs Routes) handlers(hs []HandlerFunc) []gin.HandlerFunc {
	out := make([]gin.HandlerFunc, len(hs))
	for i, h := range hs {
		out[i] = Handle(rs.log, h)
	}
	return out
}

// GET registers handlers for GET path; several run in order, like gin's middleware chain.
func (rs Routes) GET(path string, hs ...HandlerFunc) { rs.r.GET(path, rs.handlers(hs)...) }

// POST registers handlers for POST path.
func (rs Routes) POST(path string, hs ...HandlerFunc) { rs.r.POST(path, rs.handlers(hs)...) }

// PUT registers handlers for PUT path.
func (rs Routes) PUT(path string, hs ...HandlerFunc) { rs.r.PUT(path, rs.handlers(hs)...) }

// PATCH registers handlers for PATCH path.
func (rs Routes) PATCH(path string, hs ...HandlerFunc) { rs.r.PATCH(path, rs.handlers(hs)...) }

// HEAD registers handlers for HEAD path.
func (rs Routes) HEAD(path string, hs ...HandlerFunc) { rs.r.HEAD(path, rs.handlers(hs)...) }

// DELETE registers handlers for DELETE path.
func (rs Routes) DELETE(path string, hs ...HandlerFunc) { rs.r.DELETE(path, rs.handlers(hs)...) }

// JSON writes v with status and returns nil, so a handler can end with `return api.JSON(…)`.
func JSON(c *gin.Context, status int, v any) error {
	c.JSON(status, v)
	return nil
}

// NoContent answers 204 and returns nil.
func NoContent(c *gin.Context) error {
	c.Status(http.StatusNoContent)
	return nil
}

// Done answers a change that returns nothing: 204, or the change's error.
func Done(c *gin.Context, err error) error {
	if err != nil {
		return err
	}
	return NoContent(c)
}

// ListPage answers a list route whose store reads one page at a time: it parses ?limit= and
// ?cursor=, asks fetch for the page (fetch returns up to Limit+1 items, as NewList wants) and
// writes the list with its next cursor.
func ListPage[T any](c *gin.Context, fetch func(Page) ([]T, error), key func(T) int64) error {
	page, err := ParsePage(c)
	if err != nil {
		return err
	}
	items, err := fetch(page)
	if err != nil {
		return err
	}
	return JSON(c, http.StatusOK, NewList(page, items, key))
}

// ListAll answers a list route over a short, bounded list read whole (members, tokens): it
// parses the page, reads the list and pages it in memory with Paginate.
func ListAll[T any](c *gin.Context, fetch func() ([]T, error), key func(T) int64) error {
	page, err := ParsePage(c)
	if err != nil {
		return err
	}
	items, err := fetch()
	if err != nil {
		return err
	}
	return JSON(c, http.StatusOK, Paginate(page, items, key))
}
