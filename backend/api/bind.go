package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/paging"
)

// MaxJSONBody caps a JSON request body; API payloads are small and a cap keeps a client from
// streaming gigabytes into a decoder.
const MaxJSONBody = 1 << 20

// Bind decodes the JSON request body into v strictly, and is what every JSON handler uses:
//
//   - the body must be exactly one JSON object: an empty body, null, an array, a string or a
//     number is a 400 bad_request;
//   - nothing may follow the object but whitespace: a second value ({"a":1} {"b":2}), a stray
//     '}' or ']' ({"name":"x1"}}) or any other trailing byte is a 400 bad_request, so a body is
//     never read as something other than what was sent;
//   - a field that v does not have is a 400 bad_request that names it (in the message and in
//     details.field), which is what additionalProperties: false says in the OpenAPI document
//     (backend/server/openapi.yaml) — every request body schema Bind reads must say so;
//   - a key that appears twice in one object, at any depth, is a 400 bad_request that names
//     it (details.field is its path, "inputs.MODE"): encoding/json would keep the last value
//     without a word, so {"name":"t4","name":"t5"} created t5. Keys are compared as they bind:
//     "name" and "Name" are one struct field (encoding/json matches field names without
//     regard to case), while map keys and the keys of free-form values compare exactly;
//   - a body that is not valid UTF-8 is a 400 bad_request (encoding/json would put U+FFFD in
//     place of the bad bytes and bind something else than was sent);
//   - a wrong type is a 400 naming the field; a body over MaxJSONBody is a 413
//     payload_too_large.
//
// Nothing is bound into v that a handler may act on unless all of these hold, so a refused body
// writes nothing. Handlers validate the values afterwards (422).
//
// The one exception to unknown fields is BindLenient, for bodies whose schema is open.
func Bind(c *gin.Context, v any) error { return bind(c, v, true) }

// BindLenient is Bind for a request body whose OpenAPI schema is open (additionalProperties:
// true): fields that v lacks are ignored instead of refused. Everything else is as strict as in
// Bind: one JSON object, nothing after it but whitespace, no duplicate keys (in unknown fields
// too), UTF-8, right types, the size cap.
//
// It is meant for the agent protocol (/api/v1/agent/…, internal/protocol): agents are released and
// upgraded apart from the server, so a newer agent may send a field an older server does not
// know yet (and never retries a 4xx); refusing it would take the agent out of service instead of
// degrading to what both sides know. API bodies that people and the dashboard send use Bind, so
// a misspelt field is an error rather than silently dropped.
func BindLenient(c *gin.Context, v any) error { return bind(c, v, false) }

func bind(c *gin.Context, v any, strict bool) error {
	// The whole body, at most MaxJSONBody: duplicate keys are found in a second pass over it.
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, MaxJSONBody))
	if err != nil {
		return bodyError(err)
	}
	// Only an object binds. encoding/json decodes null into a struct as "nothing" and leaves it
	// zero, so without this a body of null would pass for {} (and [] or "x" would get a
	// confusing type error).
	if start := bytes.TrimLeft(body, jsonSpace); len(start) == 0 || start[0] != '{' {
		return fault.BadRequest("request body must be a JSON object")
	}
	// encoding/json would put U+FFFD in place of each bad byte, silently storing something
	// else than was sent.
	if !utf8.Valid(body) {
		return fault.BadRequest("request body is not valid UTF-8 (at byte %d)", invalidUTF8At(body))
	}
	// PostgreSQL's text cannot hold U+0000 (nor can a git commit message): one in any string
	// would be a 500 at the database, after part of the work is done. Not so for the agent
	// protocol (BindLenient): its bodies carry job output, and an agent never retries a 4xx, so
	// a refusal there would lose a job's report.
	if at := nulEscapeAt(body); strict && at >= 0 {
		return fault.BadRequest("request body holds a NUL character (\\u0000) at byte %d: no text field can hold one", at)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return bodyError(err)
	}
	// Exactly one value: the rest of the body must be whitespace. (json.Decoder.More is no
	// test for this: it reports false for a stray '}' or ']', so {"name":"x1"}} would pass.)
	if len(bytes.TrimLeft(body[dec.InputOffset():], jsonSpace)) != 0 {
		return fault.BadRequest("request body must hold one JSON object and nothing after it")
	}
	return duplicateKey(body, reflect.TypeOf(v))
}

// nulEscapeAt is the offset of the first \u0000 escape inside a JSON string of b, or -1. (A raw
// NUL byte is no valid JSON: the decoder refuses it.)
func nulEscapeAt(b []byte) int {
	in := false
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == '"':
			in = !in
		case in && b[i] == '\\' && i+1 < len(b):
			if b[i+1] == 'u' && i+6 <= len(b) && string(b[i+2:i+6]) == "0000" {
				return i
			}
			i++ // the escaped character, which may be a quote
		}
	}
	return -1
}

// jsonSpace is the whitespace JSON allows between tokens.
const jsonSpace = " \t\r\n"

// invalidUTF8At is the offset of the first byte of b that is not valid UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// bodyError turns an error of reading or decoding the body into the API error that says why.
func bodyError(err error) *fault.Error {
	var tooBig *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &tooBig):
		return fault.TooLarge("request body exceeds %d bytes", MaxJSONBody)
	case errors.Is(err, io.EOF):
		return fault.BadRequest("request body must be a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fault.BadRequest("invalid JSON: the body ends inside the object")
	case errors.As(err, &typeErr):
		e := fault.BadRequest("field %q must be %s", typeErr.Field, typeErr.Type.String())
		if typeErr.Field != "" {
			e.Details = map[string]any{"field": typeErr.Field}
		}
		return e
	case errors.As(err, &syntaxErr):
		return fault.BadRequest("malformed JSON at byte %d", syntaxErr.Offset)
	}
	// encoding/json reports an unknown field (DisallowUnknownFields) only as this text.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if f, uerr := strconv.Unquote(name); uerr == nil {
			name = f
		}
		e := fault.BadRequest("unknown field %q", name)
		e.Details = map[string]any{"field": name}
		return e
	}
	// Any other failure to read the body (the client went away mid-request, …).
	return fault.BadRequest("invalid JSON: %v", err)
}

// Page is a cursor-paginated request (backend/paging, where services take it from): items
// strictly after a decoded cursor, at most Limit of them. Every list endpoint pages this one way.
type Page = paging.Page

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
			return p, fault.BadRequest("limit must be an integer from 1 to 100")
		}
		p.Limit = n
	}
	if s := c.Query("cursor"); s != "" {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			return p, fault.BadRequest("invalid cursor")
		}
		n, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil || n < 0 {
			return p, fault.BadRequest("invalid cursor")
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
