// Package reqlog makes every log line written while serving a request carry that request's id.
//
// The HTTP middleware stores the id in the request context with WithID; code anywhere below it
// logs with slog's *Context methods (logger.InfoContext(ctx, …)), and Handler stamps the
// "request_id" attribute onto the record. Nothing has to pass loggers around per request.
package reqlog

import (
	"context"
	"io"
	"log/slog"
)

type ctxKey struct{}

// WithID returns ctx carrying the request id.
func WithID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// ID returns the request id in ctx, or "".
func ID(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

// Handler wraps another slog.Handler and adds request_id from the context to every record.
type Handler struct{ next slog.Handler }

// NewHandler wraps next.
func NewHandler(next slog.Handler) *Handler { return &Handler{next: next} }

// Enabled reports whether next handles level.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle adds the request id, when there is one, and passes the record on.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if id := ID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler { return &Handler{next: h.next.WithAttrs(as)} }

// WithGroup implements slog.Handler.
func (h *Handler) WithGroup(name string) slog.Handler { return &Handler{next: h.next.WithGroup(name)} }

// New builds the process logger: JSON (or text) at the given level, request ids stamped.
func New(w io.Writer, format, level string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level)) // config validated the level; info on anything else
	opts := &slog.HandlerOptions{Level: lv}
	var base slog.Handler = slog.NewJSONHandler(w, opts)
	if format == "text" {
		base = slog.NewTextHandler(w, opts)
	}
	return slog.New(NewHandler(base))
}
