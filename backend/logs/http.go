package logs

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/fault"
)

// readPiece is how much of a log one database read fetches while serving it: big enough that a
// 100 MiB log is a hundred queries, small enough that serving one costs little memory.
const readPiece = 1 << 20

// HandlerConfig is what the log routes need besides the service.
type HandlerConfig struct {
	// Authorize says whether the caller may read jobID's log: nil, or an error answered as it is
	// with api.Fail (a job the caller may not see should be a NotFound). Required.
	Authorize func(c *gin.Context, jobID int64) error
	// Draining returns the channel closed when a graceful shutdown begins
	// (server.Server.Draining). It is a func because the server is built after its modules;
	// it is called per stream, once the server exists. Open streams end at once so the shutdown
	// does not wait for them, and EventSource clients reconnect with Last-Event-ID, elsewhere.
	// Nil: streams only end with their client or their log.
	Draining func() <-chan struct{}
	Log      *slog.Logger
	// Heartbeat is how often an idle stream sends a comment line, so proxies and load balancers
	// do not close it; default 15 s.
	Heartbeat time.Duration
	// Poll is how often a stream re-reads the log without a notification, in case one was lost
	// (Redis restarted or unreachable); default 5 s.
	Poll time.Duration
	// WriteTimeout bounds one write to a stream's client, so a client that stops reading without
	// closing does not hold the handler forever; default 30 s.
	WriteTimeout time.Duration
}

// Handler serves the log routes.
type Handler struct {
	svc *Service
	cfg HandlerConfig
}

// NewHandler returns the log HTTP handler.
func NewHandler(svc *Service, cfg HandlerConfig) (*Handler, error) {
	if cfg.Authorize == nil {
		return nil, errors.New("logs: HandlerConfig.Authorize is required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 15 * time.Second
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 5 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	return &Handler{svc: svc, cfg: cfg}, nil
}

// Routes implements server.Module.
func (h *Handler) Routes(_ *gin.Engine, v1 *gin.RouterGroup) {
	rs := api.NewRoutes(v1, h.cfg.Log)
	rs.GET("/jobs/:id/log", h.get)
	rs.GET("/jobs/:id/log/stream", h.stream)
	rs.GET("/jobs/:id/log/times", h.times)
}

// TimesJSON is GET /jobs/{id}/log/times: where each stored piece of the log starts (a byte
// offset) and when the server received it. A line's time is that of the piece it starts in.
type TimesJSON struct {
	Marks []MarkJSON `json:"marks"`
	// Next is the after= of the next page; absent on the last.
	Next *int64 `json:"next,omitempty"`
}

// MarkJSON is one piece's offset and time.
type MarkJSON struct {
	Offset     int64     `json:"offset"`
	ReceivedAt time.Time `json:"received_at"`
}

func (h *Handler) times(c *gin.Context) error {
	jobID, err := h.job(c)
	if err != nil {
		return err
	}
	after := int64(-1)
	if v := c.Query("after"); v != "" {
		if after, err = strconv.ParseInt(v, 10, 64); err != nil || after < -1 {
			return fault.Invalid("after", "after must be a byte offset (an integer of -1 or more)")
		}
	}
	marks, err := h.svc.Times(c.Request.Context(), jobID, after)
	if err != nil {
		return err
	}
	out := TimesJSON{Marks: make([]MarkJSON, 0, len(marks))}
	for _, m := range marks {
		out.Marks = append(out.Marks, MarkJSON{Offset: m.Offset, ReceivedAt: m.ReceivedAt})
	}
	if len(marks) == maxMarks {
		next := marks[len(marks)-1].Offset
		out.Next = &next
	}
	return api.JSON(c, http.StatusOK, out)
}

// job parses the job id and authorizes the caller.
func (h *Handler) job(c *gin.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, fault.NotFound("job not found")
	}
	if err := h.cfg.Authorize(c, id); err != nil {
		return 0, err
	}
	return id, nil
}

// get serves the log as text: whole (200), one byte range (206, or 416 outside the log), or from
// ?offset= on (200), for clients that poll. X-Log-Size and X-Log-Complete say how much there is
// and whether more can come.
func (h *Handler) get(c *gin.Context) error {
	jobID, err := h.job(c)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	st, err := h.svc.State(ctx, jobID)
	if err != nil {
		return err
	}
	start, end, partial, err := requestedRange(c, st.Size)
	if err != nil {
		if errors.Is(err, errUnsatisfiable) {
			c.Header("Content-Range", fmt.Sprintf("bytes */%d", st.Size))
			err = fault.New(fault.KindRangeNotSatisfiable, fault.CodeBadRequest,
				"the range is outside the log, which holds %d bytes", st.Size)
		}
		return err
	}

	hd := c.Writer.Header()
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	hd.Set("X-Content-Type-Options", "nosniff") // a log may hold HTML; never let a browser run it
	hd.Set("Cache-Control", "no-cache")         // a running job's log grows
	hd.Set("Accept-Ranges", "bytes")
	hd.Set("X-Log-Size", strconv.FormatInt(st.Size, 10))
	hd.Set("X-Log-Complete", strconv.FormatBool(st.Complete))
	hd.Set("Content-Length", strconv.FormatInt(end-start, 10))
	status := http.StatusOK
	if partial {
		hd.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end-1, st.Size))
		status = http.StatusPartialContent
	}
	c.Status(status)
	// The size was read first and stored bytes never change, so the pieces add up to exactly
	// Content-Length even while the job keeps appending.
	for pos := start; pos < end; {
		b, err := h.svc.Read(ctx, jobID, pos, min(end-pos, readPiece))
		if err == nil && len(b) == 0 {
			err = fmt.Errorf("logs: job %d: no bytes at offset %d of %d", jobID, pos, end)
		}
		if err != nil {
			// The status line is gone; cutting the body short is all that is left to say, so
			// the error is logged here rather than returned for an envelope. A reader that
			// hung up mid-download is no server error.
			if !api.ClientGone(ctx) {
				h.cfg.Log.ErrorContext(ctx, "serving a log failed", "job_id", jobID, "err", err)
			}
			return nil
		}
		if _, err := c.Writer.Write(b); err != nil {
			return nil // the client went away
		}
		pos += int64(len(b))
	}
	return nil
}

var errUnsatisfiable = errors.New("range not satisfiable")

// requestedRange returns the half-open byte range [start, end) to serve from a log of size bytes
// and whether it is a partial (206) answer. ?offset= and a Range header are alternatives. A
// Range this server does not understand (another unit, several ranges, bad syntax) is ignored,
// as RFC 9110 allows, and the whole log is served.
func requestedRange(c *gin.Context, size int64) (start, end int64, partial bool, err error) {
	rng := c.GetHeader("Range")
	if s, ok := c.GetQuery("offset"); ok {
		if rng != "" {
			return 0, 0, false, fault.BadRequest("use either ?offset= or a Range header, not both")
		}
		off, err := strconv.ParseInt(s, 10, 64)
		if err != nil || off < 0 {
			return 0, 0, false, fault.BadRequest("offset must be a non-negative integer")
		}
		if off > size {
			return 0, 0, false, errUnsatisfiable
		}
		return off, size, false, nil
	}
	spec, ok := strings.CutPrefix(rng, "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return 0, size, false, nil
	}
	first, last, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return 0, size, false, nil
	}
	if first == "" { // bytes=-N: the last N bytes
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n < 0 {
			return 0, size, false, nil
		}
		if n == 0 || size == 0 {
			return 0, 0, false, errUnsatisfiable
		}
		return max(size-n, 0), size, true, nil
	}
	start, err = strconv.ParseInt(first, 10, 64)
	if err != nil || start < 0 {
		return 0, size, false, nil
	}
	end = size
	if last != "" {
		l, err := strconv.ParseInt(last, 10, 64)
		if err != nil || l < start {
			return 0, size, false, nil
		}
		end = min(l+1, size)
	}
	if start >= size {
		return 0, 0, false, errUnsatisfiable
	}
	return start, end, true, nil
}
