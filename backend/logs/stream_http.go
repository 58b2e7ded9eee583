package logs

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/fault"
)

// stream follows a job's log with Server-Sent Events, from Last-Event-ID, else ?offset=, else the
// start:
//
//	id: 1234              the log offset after this event's bytes (Last-Event-ID on reconnect)
//	data: first line      the bytes, a data line per line; EventSource joins them with "\n"
//	data: second line
//
//	event: end            once the log is complete and all of it was sent; the client closes
//	id: 1234
//	data: {"size":1234,"truncated":false}
//
//	: heartbeat           every Heartbeat while nothing else is sent
//
// Bytes go out as they are, ANSI escapes included, with two exceptions SSE forces: a carriage
// return cannot appear in an event, so each one is sent as ESC [ 1 G (cursor to column 1), which
// an ANSI renderer draws the same way (progress bars keep working); and an event never ends in
// the middle of a UTF-8 character, which the client would otherwise decode as two bad ones. GET
// /log serves the exact bytes.
//
// The stream ends when the log is complete, when the client goes away, and when the server
// starts draining; in the last case without an end event, so the client reconnects elsewhere.
func (h *Handler) stream(c *gin.Context) error {
	jobID, err := h.job(c)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	from, err := streamOffset(c)
	if err != nil {
		return err
	}
	// Subscribe before the first read: an append committed after this point is notified, one
	// committed before is in what the first read sees.
	var notes <-chan *redis.Message
	if sub, err := h.svc.watch(ctx, jobID); err != nil {
		if api.ClientGone(ctx) {
			return nil
		}
		h.cfg.Log.WarnContext(ctx, "log stream without live notifications; polling", "job_id", jobID, "err", err)
	} else {
		defer sub.Close()
		notes = sub.Channel()
	}
	st, err := h.svc.State(ctx, jobID)
	if err != nil {
		return err
	}
	if from > st.Size {
		c.Header("Content-Range", fmt.Sprintf("bytes */%d", st.Size))
		return fault.New(fault.KindRangeNotSatisfiable, fault.CodeBadRequest,
			"offset %d is past the end of the log, which holds %d bytes", from, st.Size)
	}
	var draining <-chan struct{}
	if h.cfg.Draining != nil {
		draining = h.cfg.Draining()
	}

	hd := c.Writer.Header()
	hd.Set("Content-Type", "text/event-stream; charset=utf-8")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no") // nginx would otherwise hold events back
	w := &sseWriter{w: c.Writer, rc: http.NewResponseController(c.Writer), timeout: h.cfg.WriteTimeout, read: from}
	// The server sets no write deadline of its own, so the next request on this connection must
	// not inherit ours.
	defer w.rc.SetWriteDeadline(time.Time{})
	// From here on the status line is out: a failure ends the stream (the client resumes from
	// its Last-Event-ID) and is never returned for an error envelope.
	c.Status(http.StatusOK)
	if err := w.write(nil); err != nil {
		return nil
	}

	heartbeat := time.NewTicker(h.cfg.Heartbeat)
	defer heartbeat.Stop()
	poll := time.NewTicker(h.cfg.Poll)
	defer poll.Stop()
	for {
		done, err := h.catchUp(ctx, jobID, w)
		if err != nil {
			if ctx.Err() == nil {
				h.cfg.Log.WarnContext(ctx, "log stream ended early", "job_id", jobID, "err", err)
			}
			return nil // the client resumes from its Last-Event-ID
		}
		if done {
			return nil
		}
		select {
		case <-notes:
		case <-poll.C:
		case <-heartbeat.C:
			if err := w.write([]byte(": heartbeat\n\n")); err != nil {
				return nil
			}
		case <-ctx.Done():
			return nil
		case <-draining:
			return nil
		}
	}
}

// catchUp sends what is stored past the stream's position and reports whether the log is
// complete and fully sent (the end event is then written too).
func (h *Handler) catchUp(ctx context.Context, jobID int64, w *sseWriter) (bool, error) {
	st, err := h.svc.State(ctx, jobID)
	if err != nil {
		return false, err
	}
	for w.read < st.Size {
		b, err := h.svc.Read(ctx, jobID, w.read, min(st.Size-w.read, readPiece))
		if err != nil {
			return false, err
		}
		if len(b) == 0 {
			return false, fmt.Errorf("logs: job %d: no bytes at offset %d of %d", jobID, w.read, st.Size)
		}
		if err := w.data(b, st.Complete && w.read+int64(len(b)) == st.Size); err != nil {
			return false, err
		}
	}
	if !st.Complete {
		return false, nil
	}
	return true, w.end(st)
}

// streamOffset is where a stream starts: Last-Event-ID (an EventSource reconnecting), else
// ?offset=, else 0.
func streamOffset(c *gin.Context) (int64, error) {
	s := c.GetHeader("Last-Event-ID")
	if s == "" {
		s = c.Query("offset")
	}
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fault.BadRequest("Last-Event-ID and offset must be a non-negative log offset")
	}
	return n, nil
}

// sseWriter writes a log as SSE events and keeps the stream's position.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	read    int64  // log offset read so far
	held    []byte // the start of a UTF-8 character the last read split, sent with the next bytes
	buf     []byte // the event being written, reused
}

// data sends b, the log bytes after w.read; final says no more bytes can follow.
func (w *sseWriter) data(b []byte, final bool) error {
	w.read += int64(len(b))
	text := b
	if len(w.held) > 0 {
		text = append(w.held, b...)
	}
	cut := len(text)
	if !final {
		cut = completeUTF8(text)
	}
	w.held = append([]byte(nil), text[cut:]...)
	if cut == 0 {
		return nil
	}
	w.buf = append(w.buf[:0], "id: "...)
	w.buf = strconv.AppendInt(w.buf, w.read-int64(len(w.held)), 10)
	w.buf = append(w.buf, '\n')
	w.buf = appendData(w.buf, text[:cut])
	w.buf = append(w.buf, '\n')
	return w.write(w.buf)
}

// end sends what is held back, then the end event.
func (w *sseWriter) end(st JobLog) error {
	if len(w.held) > 0 {
		if err := w.data(nil, true); err != nil {
			return err
		}
	}
	return w.write(fmt.Appendf(nil, "event: end\nid: %d\ndata: {\"size\":%d,\"truncated\":%t}\n\n", w.read, st.Size, st.Truncated))
}

// write sends b and flushes it. The deadline is not supported by every ResponseWriter (test
// recorders); without it a write is unbounded, as before.
func (w *sseWriter) write(b []byte) error {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	if len(b) > 0 {
		if _, err := w.w.Write(b); err != nil {
			return err
		}
	}
	return w.rc.Flush()
}

// appendData appends text as SSE data lines: one per line of text, so the client's "\n"-join
// gives back the text, with each carriage return (which SSE treats as a line end) as ESC [ 1 G.
func appendData(buf, text []byte) []byte {
	for {
		line, rest, more := bytes.Cut(text, []byte{'\n'})
		buf = append(buf, "data: "...)
		for {
			before, after, found := bytes.Cut(line, []byte{'\r'})
			buf = append(buf, before...)
			if !found {
				break
			}
			buf = append(buf, "\x1b[1G"...)
			line = after
		}
		buf = append(buf, '\n')
		if !more {
			return buf
		}
		text = rest
	}
}

// completeUTF8 returns the length of b without a trailing incomplete UTF-8 character. Invalid
// bytes count as complete: holding them back would not make them valid.
func completeUTF8(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}
