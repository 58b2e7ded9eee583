package api

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
)

// MaxJSONBody caps a JSON request body; API payloads are small and a cap keeps a client from
// streaming gigabytes into a decoder.
const MaxJSONBody = 1 << 20

// Bind decodes the JSON body into v strictly: unknown fields, trailing data, wrong types and
// oversized bodies are a 400 that names the problem. Handlers validate the values afterwards.
func Bind(c *gin.Context, v any) error {
	body := bufio.NewReader(http.MaxBytesReader(c.Writer, c.Request.Body, MaxJSONBody))
	// Only an object binds. encoding/json decodes null into a struct as "nothing" and leaves it
	// zero, so without this a body of null would pass for {} (and [] or "x" would get a
	// confusing type error).
	for {
		b, err := body.ReadByte()
		if err != nil {
			break // empty or over the limit: the decoder says so below
		}
		if b == ' ' || b == '\t' || b == '\r' || b == '\n' {
			continue
		}
		body.UnreadByte()
		if b != '{' {
			return BadRequest("request body must be a JSON object")
		}
		break
	}
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		var typeErr *json.UnmarshalTypeError
		var syntaxErr *json.SyntaxError
		switch {
		case errors.Is(err, io.EOF):
			return BadRequest("request body must be a JSON object")
		case errors.As(err, &tooBig):
			return Errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "request body exceeds %d bytes", MaxJSONBody)
		case errors.As(err, &typeErr):
			return BadRequest("field %q must be %s", typeErr.Field, typeErr.Type.String())
		case errors.As(err, &syntaxErr):
			return BadRequest("malformed JSON at byte %d", syntaxErr.Offset)
		default:
			return BadRequest("invalid JSON: %v", err)
		}
	}
	if dec.More() {
		return BadRequest("request body must hold one JSON object")
	}
	return nil
}

// Invalid is a 422 for well-formed input that breaks a rule; field names the offending field.
func Invalid(field, format string, args ...any) *Error {
	e := Errorf(http.StatusUnprocessableEntity, CodeValidation, format, args...)
	if field != "" {
		e.Details = map[string]any{"field": field}
	}
	return e
}

// Forbidden is a 403: the caller may see the thing but not do this to it.
func Forbidden(format string, args ...any) *Error {
	return Errorf(http.StatusForbidden, CodeForbidden, format, args...)
}

// Unauthenticated is a 401.
func Unauthenticated(format string, args ...any) *Error {
	return Errorf(http.StatusUnauthorized, CodeUnauthenticated, format, args...)
}

// Page is a cursor-paginated request: items strictly after Cursor (an opaque position), at most
// Limit of them. Every list endpoint pages this one way.
type Page struct {
	Limit int
	After int64 // decoded cursor: the sort key of the last item already seen; 0 = from the start
}

// List is the body of every paginated response.
type List[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// ParsePage reads ?limit= (1–100, default 30) and ?cursor=.
func ParsePage(c *gin.Context) (Page, error) {
	p := Page{Limit: 30}
	if s := c.Query("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			return p, BadRequest("limit must be an integer from 1 to 100")
		}
		p.Limit = n
	}
	if s := c.Query("cursor"); s != "" {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			return p, BadRequest("invalid cursor")
		}
		n, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil || n < 0 {
			return p, BadRequest("invalid cursor")
		}
		p.After = n
	}
	return p, nil
}

// NewList builds a page from up to Limit+1 fetched items: the extra item only signals that
// another page exists. key returns an item's sort key, which becomes the next cursor.
func NewList[T any](p Page, fetched []T, key func(T) int64) List[T] {
	l := List[T]{Items: fetched}
	if l.Items == nil {
		l.Items = []T{}
	}
	if len(fetched) > p.Limit {
		l.Items = fetched[:p.Limit]
		l.NextCursor = Cursor(key(l.Items[p.Limit-1]))
	}
	return l
}

// Cursor encodes a sort key as an opaque cursor.
func Cursor(key int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprint(key)))
}

// Paginate pages a list that is already in memory (short, bounded lists such as members or
// tokens) the same way database-backed lists are paged: items sorted by ascending key, the
// cursor the key of the last item seen.
func Paginate[T any](p Page, items []T, key func(T) int64) List[T] {
	start := 0
	for start < len(items) && key(items[start]) <= p.After {
		start++
	}
	end := min(len(items), start+p.Limit+1)
	return NewList(p, items[start:end], key)
}
