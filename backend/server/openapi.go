package server

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"

	"github.com/gin-gonic/gin"
	"gopkg.in/yaml.v3"
)

// openAPIYAML is the OpenAPI 3 document of the JSON API. It is written by hand next to the
// handlers it describes; backend/app's completeness test fails when a route registered under
// /api/v1 is missing from it or when it documents an operation no route serves.
//
//go:embed openapi.yaml
var openAPIYAML []byte

// openAPIJSON converts the embedded document once per process.
var openAPIJSON = sync.OnceValues(func() ([]byte, error) { return yamlToJSON(openAPIYAML) })

// OpenAPIJSON returns the OpenAPI document as JSON, exactly as GET /api/v1/openapi.json serves it.
func OpenAPIJSON() ([]byte, error) { return openAPIJSON() }

// openAPIHandler converts the document when the server is built and serves it.
func (s *Server) openAPIHandler() gin.HandlerFunc { return s.jsonDocHandler(OpenAPIJSON()) }

// jsonDocHandler serves doc, or, when the document did not convert, logs err and answers a 500
// envelope: the API still starts, and the package's tests fail on the document long before a
// release.
func (s *Server) jsonDocHandler(doc []byte, err error) gin.HandlerFunc {
	if err != nil {
		s.deps.Log.Error("openapi.yaml does not convert to JSON; /api/v1/openapi.json answers 500", "err", err)
		return func(c *gin.Context) { s.fail(c, fmt.Errorf("openapi document: %w", err)) }
	}
	return func(c *gin.Context) { c.Data(http.StatusOK, "application/json", doc) }
}

// Routes lists every route registered on the engine (the API completeness test compares them
// with the OpenAPI document).
func (s *Server) Routes() gin.RoutesInfo { return s.engine.Routes() }

// yamlToJSON converts one YAML document to compact JSON, keeping the order of mapping keys.
// Mapping keys become strings as written (the response code 200 becomes "200"), aliases are
// expanded, and whatever JSON cannot express (duplicate keys, merge keys, non-scalar keys,
// infinities, several documents) is an error.
func yamlToJSON(src []byte) ([]byte, error) {
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("parse yaml: %w", err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		return nil, fmt.Errorf("line %d: more than one YAML document", extra.Line)
	case !errors.Is(err, io.EOF):
		return nil, fmt.Errorf("parse yaml: %w", err)
	}
	var buf bytes.Buffer
	if err := writeJSON(&buf, &root, 0); err != nil {
		return nil, err
	}
	if !json.Valid(buf.Bytes()) {
		return nil, errors.New("converted document is not valid JSON") // a bug in writeJSON
	}
	return buf.Bytes(), nil
}

// maxAliasDepth bounds alias expansion, so a self-referencing document fails instead of looping.
const maxAliasDepth = 100

func writeJSON(buf *bytes.Buffer, n *yaml.Node, depth int) error {
	if depth > maxAliasDepth {
		return fmt.Errorf("line %d: nesting deeper than %d (recursive alias?)", n.Line, maxAliasDepth)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return fmt.Errorf("line %d: empty document", n.Line)
		}
		return writeJSON(buf, n.Content[0], depth)
	case yaml.AliasNode:
		return writeJSON(buf, n.Alias, depth+1)
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, c, depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	case yaml.MappingNode:
		buf.WriteByte('{')
		seen := make(map[string]bool, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.AliasNode {
				k = k.Alias
			}
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: mapping keys must be scalars", k.Line)
			}
			if k.ShortTag() == "!!merge" {
				return fmt.Errorf("line %d: merge keys (<<) are not supported", k.Line)
			}
			if seen[k.Value] {
				return fmt.Errorf("line %d: duplicate key %q", k.Line, k.Value)
			}
			seen[k.Value] = true
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k.Value)
			buf.WriteByte(':')
			if err := writeJSON(buf, v, depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	case yaml.ScalarNode:
		return writeScalar(buf, n)
	}
	return fmt.Errorf("line %d: unsupported YAML node kind %d", n.Line, n.Kind)
}

func writeScalar(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!str", "!!timestamp", "!!binary":
		writeString(buf, n.Value) // dates stay the text they were written as
		return nil
	case "!!null":
		buf.WriteString("null")
		return nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		buf.WriteString(strconv.FormatBool(b))
		return nil
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		buf.WriteString(strconv.FormatInt(i, 10))
		return nil
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Errorf("line %d: %s has no JSON form", n.Line, n.Value)
		}
		b, _ := json.Marshal(f)
		buf.Write(b)
		return nil
	}
	return fmt.Errorf("line %d: unsupported YAML tag %s", n.Line, n.ShortTag())
}

// writeString writes s as a JSON string, leaving <, > and & readable.
func writeString(buf *bytes.Buffer, s string) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s)               // a string always encodes
	buf.Truncate(buf.Len() - 1) // Encode appends a newline
}
