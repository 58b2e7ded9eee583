// Package openapitest checks, in tests, that the responses of the API match its OpenAPI document
// (backend/server/openapi.yaml). It is for tests only: production code never imports it.
//
// A Validator answers one question about one exchange: is this status declared for this
// operation, and does the body match the declared schema? Its Handler (for httptest servers and
// in-process handlers) and Transport (for clients) wrap the two sides of an exchange and report
// every mismatch through a callback, so a test fails as soon as the document and the code drift.
//
// The document is read with kin-openapi and then tightened for checking: an object schema with
// properties that does not say otherwise is closed (additionalProperties: false), so a field the
// server sends but the document does not declare is caught, not silently allowed.
package openapitest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/nimbus-build/nimbus/backend/server"
)

// Validator checks responses against one OpenAPI document.
type Validator struct {
	doc    *openapi3.T
	prefix string // the server URL's path, which the document's paths are written without
	ops    []operation
}

// operation is one documented method and path, with the pattern a request path must match.
type operation struct {
	method   string
	path     string
	pattern  *regexp.Regexp
	names    []string // the path's parameters, in order
	literals int      // characters outside parameters: the more, the more specific
	item     *openapi3.PathItem
	op       *openapi3.Operation
}

// shared is the one Validator of the embedded document per test binary: loading and tightening
// the document costs about 0.25 s, and 2.4 s under -race, which every test world and e2e client
// used to pay again. A Validator only reads its document once built, so tests share it freely.
// It is this package's only variable, and the package is for tests only.
var shared = sync.OnceValues(Load)

// Shared returns the Validator of the server's embedded document, loaded once per process.
func Shared() (*Validator, error) { return shared() }

// Load returns a Validator for the server's embedded document.
func Load() (*Validator, error) {
	doc, err := server.OpenAPIJSON()
	if err != nil {
		return nil, fmt.Errorf("openapi document: %w", err)
	}
	return New(doc)
}

// New returns a Validator for an OpenAPI 3 document given as JSON (or YAML).
func New(document []byte) (*Validator, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(document)
	if err != nil {
		return nil, fmt.Errorf("load openapi document: %w", err)
	}
	if err := doc.Validate(loader.Context, openapi3.DisableExamplesValidation()); err != nil {
		return nil, fmt.Errorf("openapi document is invalid: %w", err)
	}
	v := &Validator{doc: doc}
	if len(doc.Servers) > 0 {
		v.prefix = strings.TrimRight(doc.Servers[0].URL, "/")
	}
	closeSchemas(doc)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			v.ops = append(v.ops, newOperation(method, path, item, op))
		}
	}
	// The most specific template wins: /repos/{org}/{repo}/builds before /repos/{org}/{repo}/{x}.
	sort.Slice(v.ops, func(i, j int) bool {
		if v.ops[i].literals != v.ops[j].literals {
			return v.ops[i].literals > v.ops[j].literals
		}
		return v.ops[i].path < v.ops[j].path
	})
	return v, nil
}

var paramRE = regexp.MustCompile(`\{([^}/]+)\}`)

func newOperation(method, path string, item *openapi3.PathItem, op *openapi3.Operation) operation {
	var re strings.Builder
	var names []string
	literals, last := 0, 0
	for _, m := range paramRE.FindAllStringSubmatchIndex(path, -1) {
		re.WriteString(regexp.QuoteMeta(path[last:m[0]]))
		literals += m[0] - last
		names = append(names, path[m[2]:m[3]])
		// A parameter at the end may hold slashes: gin's *wildcards are documented as {name}.
		if m[1] == len(path) {
			re.WriteString(`(.+)`)
		} else {
			re.WriteString(`([^/]+)`)
		}
		last = m[1]
	}
	re.WriteString(regexp.QuoteMeta(path[last:]))
	literals += len(path) - last
	return operation{method: method, path: path, pattern: regexp.MustCompile("^" + re.String() + "$"),
		names: names, literals: literals, item: item, op: op}
}

// find returns the documented operation serving method and the request path p, or nil when the
// document has none (a path outside the API, such as git or the dashboard, is not checked here;
// backend/app's completeness test makes sure every API route is documented).
func (v *Validator) find(method, p string) (*operation, map[string]string) {
	rest, ok := strings.CutPrefix(p, v.prefix)
	if !ok || (rest != "" && rest[0] != '/') {
		return nil, nil
	}
	for i := range v.ops {
		o := &v.ops[i]
		if o.method != method {
			continue
		}
		if m := o.pattern.FindStringSubmatch(rest); m != nil {
			params := make(map[string]string, len(o.names))
			for k, name := range o.names {
				params[name] = m[k+1]
			}
			return o, params
		}
	}
	return nil, nil
}

// Check validates one response to req: its status must be declared for the operation (or by a
// default response), and its body must match the declared media type and schema. A request
// outside the document's paths is not checked and returns nil.
func (v *Validator) Check(req *http.Request, status int, header http.Header, body []byte) error {
	o, params := v.find(req.Method, req.URL.Path)
	if o == nil {
		return nil
	}
	where := fmt.Sprintf("%s %s (%s %s) answered %d", req.Method, req.URL.Path, o.method, o.path, status)
	// Every operation has a default response for "any other error, e.g. 500". A client must still
	// be able to learn from the document every status below 500 it can get, so a default answers
	// for server errors only.
	if status < 500 && o.op.Responses.Status(status) == nil {
		return fmt.Errorf("%s: status %d is not declared for the operation", where, status)
	}
	opts := &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}
	if status >= 300 && status < 400 {
		// A redirect's body (gin writes a short HTML link) is for browsers without Location.
		body = nil
	}
	if ct := header.Get("Content-Type"); ct != "" && len(body) > 0 {
		mt, _, _ := mime.ParseMediaType(ct)
		if openapi3filter.RegisteredBodyDecoder(mt) == nil {
			// A stream (text/event-stream) has no decoder: its media type must still be declared.
			if r := o.op.Responses.Status(status); r != nil && r.Value != nil && r.Value.Content.Get(ct) == nil {
				return fmt.Errorf("%s: content type %q is not declared", where, ct)
			}
			opts.ExcludeResponseBody = true
		}
	}
	if len(body) == 0 {
		// An empty body (204, HEAD, a redirect) has nothing to match; its status still must.
		opts.ExcludeResponseBody = true
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request:    req,
			PathParams: params,
			Route:      &routers.Route{Spec: v.doc, Path: o.path, PathItem: o.item, Method: o.method, Operation: o.op},
		},
		Status:  status,
		Header:  header,
		Body:    io.NopCloser(bytes.NewReader(body)),
		Options: opts,
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return fmt.Errorf("%s: %w\nbody: %s", where, err, clip(body))
	}
	return nil
}

// clip shortens a body for an error message.
func clip(b []byte) string {
	const max = 600
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}

// closeSchemas closes every object schema of the document that lists properties and does not
// declare additionalProperties, and merges allOf lists of several objects into one schema (an
// allOf member checks the whole value on its own, so closed members would refuse each other's
// fields).
func closeSchemas(doc *openapi3.T) {
	seen := map[*openapi3.Schema]bool{}
	for _, s := range doc.Components.Schemas {
		closeSchema(s, seen)
	}
	for _, r := range doc.Components.Responses {
		closeContent(r.Value.Content, seen)
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, r := range op.Responses.Map() {
				if r.Value != nil {
					closeContent(r.Value.Content, seen)
				}
			}
		}
	}
}

func closeContent(c openapi3.Content, seen map[*openapi3.Schema]bool) {
	for _, mt := range c {
		closeSchema(mt.Schema, seen)
	}
}

func closeSchema(ref *openapi3.SchemaRef, seen map[*openapi3.Schema]bool) {
	if ref == nil || ref.Value == nil || seen[ref.Value] {
		return
	}
	s := ref.Value
	seen[s] = true
	if len(s.AllOf) > 1 {
		merged := openapi3.Schemas{}
		for k, p := range s.Properties {
			merged[k] = p
		}
		required := append([]string(nil), s.Required...)
		for _, m := range s.AllOf {
			for k, p := range m.Value.Properties {
				merged[k] = p
			}
			required = append(required, m.Value.Required...)
		}
		s.Properties, s.Required, s.AllOf = merged, required, nil
		if s.Type == nil {
			s.Type = &openapi3.Types{openapi3.TypeObject}
		}
	}
	if len(s.Properties) > 0 && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil {
		closed := false
		s.AdditionalProperties.Has = &closed
	}
	for _, p := range s.Properties {
		closeSchema(p, seen)
	}
	closeSchema(s.Items, seen)
	closeSchema(s.AdditionalProperties.Schema, seen)
	closeSchema(s.Not, seen)
	for _, list := range []openapi3.SchemaRefs{s.AllOf, s.AnyOf, s.OneOf} {
		for _, m := range list {
			closeSchema(m, seen)
		}
	}
}
