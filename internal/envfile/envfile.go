// Package envfile reads the env files that a pipeline's .cnb.yml lists under imports: (and that
// settingsFrom / optionsFrom read) and turns them into environment variables.
//
// An env file is a file in a secret repository or in the pipeline's own repository. Which of three
// formats it has is decided by its name alone, so that a file means the same thing wherever it is
// imported from:
//
//   - .yml, .yaml and .json (case-insensitive): a document whose top level is a mapping (an object).
//     Nested values are flattened into variables, see Flatten.
//   - .crt .cer .key .pem .pub .pk .ppk: a certificate or key. The whole file is one variable named
//     after the file with every "." replaced by "_": server.crt becomes server_crt.
//   - anything else: KEY=VALUE lines. Blank lines and lines starting with # are skipped, a leading
//     "export " is allowed, a value wrapped in matching single or double quotes loses its quotes,
//     and inside double quotes \n, \t, \" and \\ are unescaped. A line without "=" is an error.
//
// There are two entry points. Object returns the file as a structured value: settingsFrom and
// optionsFrom pass it on to a plugin as it is, and a secret repository's allow_* rules read it.
// Parse returns the variables to put into a job's environment; it is Object followed by Flatten.
//
// Variable names must match [A-Za-z_][A-Za-z0-9_]* and values may be at most 100 KiB; a variable
// that breaks either rule is dropped silently, as the platform does, rather than failing the
// whole import.
//
// Env files hold secrets, so no error from this package quotes a value from the file: errors name
// the file and the line (and column where known) and say what is wrong.
package envfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

const (
	// maxValueLen is the longest value, in bytes, that becomes a variable (100 KiB).
	maxValueLen = 100 * 1024

	// maxAliasValues bounds how many values YAML aliases may expand to, so that a small file of
	// nested aliases (a "billion laughs") cannot make us build a huge object.
	maxAliasValues = 100000

	// objectText is what an object turns into where a string is needed, as in JavaScript.
	objectText = "[object Object]"
)

// certExtensions are the extensions of certificate and key files, which are imported whole.
var certExtensions = map[string]bool{
	".crt": true, ".cer": true, ".key": true, ".pem": true, ".pub": true, ".pk": true, ".ppk": true,
}

// yamlErrorRE splits a yaml.v3 syntax error into its line (absent for line 0) and its problem.
var yamlErrorRE = regexp.MustCompile(`(?s)^yaml: (?:line (\d+): )?(.*)$`)

// jsonNumberRE matches a number written as JSON writes it; such YAML numbers keep their text.
var jsonNumberRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// bom is the UTF-8 byte order mark some editors put at the start of a file.
var bom = []byte("\ufeff")

// Parse returns the variables of the env file called name (only its extension and base name
// matter) with content. It is what imports: puts into a job's environment: Object, then Flatten.
func Parse(name string, content []byte) (map[string]string, error) {
	obj, err := Object(name, content)
	if err != nil {
		return nil, err
	}
	return Flatten(obj), nil
}

// Object returns the file as a structured value, for settingsFrom/optionsFrom and for the allow_*
// rules of secret repositories, which need more than flat strings:
//
//   - a YAML or JSON file: its top-level mapping, with nested map[string]any, []any and scalars.
//     Scalars are string, bool, nil (null) and json.Number for numbers, which keeps the number's
//     text ("1.50" stays "1.50") and marshals back to JSON as a number. YAML numbers that JSON
//     cannot write as they are (0x1F, 1_000, .5) are converted to JSON's form ("31", "1000",
//     "0.5"); .inf and .nan become float64. YAML anchors, aliases and << merge keys are resolved.
//     An empty YAML file is an empty object.
//   - a KEY=VALUE file: its pairs as strings, invalid names included (Flatten drops them).
//   - a certificate file: {name_with_underscores: content}.
func Object(name string, content []byte) (map[string]any, error) {
	base := path.Base(name)
	ext := strings.ToLower(path.Ext(base))
	switch {
	case ext == ".yml" || ext == ".yaml":
		return parseYAML(name, content)
	case ext == ".json":
		return parseJSON(name, content)
	case certExtensions[ext]:
		return map[string]any{strings.ReplaceAll(base, ".", "_"): string(content)}, nil
	default:
		return parseKeyValue(name, content)
	}
}

// Flatten turns an object into variables the way the platform does, so that a YAML or JSON env
// file gives the same variables here as there (Parse uses it):
//
//   - a nested key is joined to its parents with "_": {a: {b: {c: 1}}} gives a_b_c=1;
//   - an array gives its elements joined with "," ({key: [x, y, z]} gives key=x,y,z) and one
//     variable per element, key_0, key_1, ...;
//   - an object inside an array is "[object Object]", both in the joined value and as key_N, and
//     its own keys are still flattened by path (key_N_field);
//   - scalars are their text: true gives "true", null gives "", numbers keep the text they had.
//
// Names that do not satisfy ValidName and values longer than 100 KiB are dropped. Keys are visited
// in sorted order, so when two paths give the same name (a_b: 1 and a: {b: 2}) the result is
// still the same every time.
func Flatten(obj map[string]any) map[string]string {
	env := make(map[string]string)
	for _, k := range sortedKeys(obj) {
		flatten(env, k, obj[k], false)
	}
	return env
}

// ValidName reports whether s is a usable variable name: [A-Za-z_][A-Za-z0-9_]*. Other names
// cannot be referred to from a shell, so the platform drops them.
func ValidName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// flatten adds the variables of value v called name to env. inList says whether v is an element
// of an array, where an object also gets a variable of its own ("[object Object]").
func flatten(env map[string]string, name string, v any, inList bool) {
	switch x := v.(type) {
	case map[string]any:
		if inList {
			setVar(env, name, objectText)
		}
		for _, k := range sortedKeys(x) {
			flatten(env, name+"_"+k, x[k], false)
		}
	case []any:
		setVar(env, name, joinList(x))
		for i, e := range x {
			flatten(env, name+"_"+strconv.Itoa(i), e, true)
		}
	default:
		setVar(env, name, scalarText(x))
	}
}

// setVar sets one variable, unless its name or its length rules it out.
func setVar(env map[string]string, name, value string) {
	if ValidName(name) && len(value) <= maxValueLen {
		env[name] = value
	}
}

// joinList is an array as a string, as JavaScript's Array.prototype.toString makes it: elements
// joined with ",", nested arrays joined too, objects as "[object Object]", null as "".
func joinList(list []any) string {
	parts := make([]string, len(list))
	for i, e := range list {
		switch x := e.(type) {
		case map[string]any:
			parts[i] = objectText
		case []any:
			parts[i] = joinList(x)
		default:
			parts[i] = scalarText(x)
		}
	}
	return strings.Join(parts, ",")
}

// scalarText is a scalar's value as a variable's value.
func scalarText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return string(x)
	case float64:
		return formatFloat(x, 64)
	case float32:
		return formatFloat(float64(x), 32)
	default:
		return fmt.Sprint(x)
	}
}

// formatFloat writes f as JavaScript's String(f) does in the common cases: no exponent between
// 1e-6 and 1e21, and Infinity / NaN spelled out.
func formatFloat(f float64, bitSize int) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	if a := math.Abs(f); a == 0 || (a >= 1e-6 && a < 1e21) {
		return strconv.FormatFloat(f, 'f', -1, bitSize)
	}
	return strconv.FormatFloat(f, 'g', -1, bitSize)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// parseKeyValue reads a KEY=VALUE file.
func parseKeyValue(name string, content []byte) (map[string]any, error) {
	content = bytes.TrimPrefix(content, bom)
	obj := make(map[string]any)
	for i, raw := range strings.Split(string(content), "\n") {
		line := strings.TrimSpace(raw) // also drops the \r of CRLF files
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "export"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			line = strings.TrimSpace(rest)
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			// The line is not quoted: it may be a secret that lost its KEY=.
			return nil, fmt.Errorf("%s: line %d: expected KEY=VALUE, found no '='", name, i+1)
		}
		obj[strings.TrimSpace(key)] = unquote(strings.TrimSpace(value))
	}
	return obj, nil
}

// unquote removes matching single or double quotes around v; inside double quotes it also
// unescapes \n, \t, \" and \\. Any other value is returned as it is.
func unquote(v string) string {
	if len(v) < 2 || v[0] != v[len(v)-1] {
		return v
	}
	switch v[0] {
	case '\'':
		return v[1 : len(v)-1]
	case '"':
		return unescape(v[1 : len(v)-1])
	default:
		return v
	}
}

// unescape replaces \n, \t, \" and \\ in s, left to right; other backslashes stay.
func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case 'n':
				b.WriteByte('\n')
				i++
				continue
			case 't':
				b.WriteByte('\t')
				i++
				continue
			case '"', '\\':
				b.WriteByte(s[i+1])
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseJSON reads a JSON file. Numbers stay json.Number so that they keep their text.
func parseJSON(name string, content []byte) (map[string]any, error) {
	content = bytes.TrimPrefix(content, bom)
	// json.Unmarshal checks the whole input first, trailing data and early end included, and
	// reports where it stopped; the Decoder below cannot fail on syntax after that.
	var raw json.RawMessage
	if err := json.Unmarshal(content, &raw); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			// Offset counts the byte that broke the syntax; point at that byte.
			line, col := position(content, int(syntax.Offset)-1)
			return nil, fmt.Errorf("%s: line %d, column %d: invalid JSON: %w", name, line, col, err)
		}
		return nil, fmt.Errorf("%s: invalid JSON: %w", name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(content))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%s: invalid JSON: %w", name, err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		start := len(content) - len(bytes.TrimLeft(content, " \t\r\n"))
		line, col := position(content, start)
		return nil, fmt.Errorf("%s: line %d, column %d: the top level must be an object, not %s", name, line, col, jsonKind(v))
	}
	return obj, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	default:
		return "null"
	}
}

// position returns the 1-based line and column (in characters) of byte offset off in content.
func position(content []byte, off int) (line, col int) {
	off = max(0, min(off, len(content)))
	before := content[:off]
	line = 1 + bytes.Count(before, []byte("\n"))
	start := bytes.LastIndexByte(before, '\n') + 1
	col = utf8.RuneCount(before[start:]) + 1
	return line, col
}

// parseYAML reads a YAML file through yaml.v3's nodes, which know their lines, and converts them
// itself so that numbers keep their text and errors can point at the line.
func parseYAML(name string, content []byte) (map[string]any, error) {
	docs, err := decodeYAML(content)
	if err != nil {
		line, problem := yamlSyntaxLine(content, err)
		return nil, fmt.Errorf("%s: line %d: invalid YAML: %s", name, line, problem)
	}
	if len(docs) == 0 {
		return map[string]any{}, nil // empty, or only comments
	}
	c := converter{name: name, expanding: make(map[*yaml.Node]bool)}
	if len(docs) > 1 {
		return nil, c.errorf(docs[1], "invalid YAML: more than one document")
	}
	root := docs[0]
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" && root.Value == "" {
		return map[string]any{}, nil // a lone "---"
	}
	if root.Kind != yaml.MappingNode {
		return nil, c.errorf(root, "the top level must be a mapping, not %s", yamlKind(root))
	}
	return c.mapping(root)
}

// decodeYAML parses every document in content.
func decodeYAML(content []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(content))
	var docs []*yaml.Node
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, &doc)
	}
}

// yamlSyntaxLine returns the 1-based line of a yaml.v3 syntax error and its problem text.
//
// yaml.v3's own line is not reliable enough to show: parser errors count lines from 0, line 0 is
// left out, and many errors give the line where the enclosing block or flow collection began
// rather than where it went wrong. That line is never after the real one, so we look from there
// for the first line whose prefix of the file already fails with the same problem, by binary
// search (parsing a prefix is linear, so a long file stays cheap). A line past the end of the
// file (an unclosed quote, which yaml.v3 reports where the stream ended) says nothing, so then
// the search starts at line 1.
func yamlSyntaxLine(content []byte, err error) (int, string) {
	reported, problem := splitYAMLError(err)
	// ends[k] is the offset just after line k+1.
	var ends []int
	for i, c := range content {
		if c == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(content) {
		ends = append(ends, len(content))
	}
	lo, hi := max(reported, 1), len(ends) // the whole file, line hi, fails with problem
	if lo > hi {
		lo = 1
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if prefixFails(content[:ends[mid-1]], problem) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi, problem
}

// prefixFails reports whether prefix fails to parse with the given problem.
func prefixFails(prefix []byte, problem string) bool {
	_, err := decodeYAML(prefix)
	if err == nil {
		return false
	}
	_, p := splitYAMLError(err)
	return p == problem
}

// splitYAMLError splits "yaml: line N: problem" into N (0 when absent) and problem.
func splitYAMLError(err error) (int, string) {
	m := yamlErrorRE.FindStringSubmatch(err.Error())
	if m == nil {
		return 0, err.Error()
	}
	line, _ := strconv.Atoi(m[1]) // m[1] is empty or digits
	return line, m[2]
}

func yamlKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a sequence"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "null"
		}
		return "a scalar"
	case yaml.AliasNode:
		return "an alias"
	default:
		return "a document"
	}
}

// converter turns yaml.v3 nodes into map[string]any / []any / scalars.
type converter struct {
	name      string
	expanding map[*yaml.Node]bool // anchored nodes being converted, to catch one that contains itself
	inAlias   int                 // how many aliases deep the conversion is
	aliased   int                 // values converted through aliases so far
}

func (c *converter) errorf(n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("%s: line %d, column %d: %s", c.name, n.Line, n.Column, fmt.Sprintf(format, args...))
}

func (c *converter) value(n *yaml.Node) (any, error) {
	if c.inAlias > 0 {
		c.aliased++
		if c.aliased > maxAliasValues {
			return nil, c.errorf(n, "aliases expand to more than %d values", maxAliasValues)
		}
	}
	if n.Anchor != "" {
		c.expanding[n] = true
		defer delete(c.expanding, n)
	}
	switch n.Kind {
	case yaml.MappingNode:
		return c.mapping(n)
	case yaml.SequenceNode:
		list := make([]any, 0, len(n.Content))
		for _, e := range n.Content {
			v, err := c.value(e)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		return list, nil
	case yaml.ScalarNode:
		return c.scalar(n)
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, c.errorf(n, "alias *%s has no anchor", n.Value)
		}
		if c.expanding[n.Alias] {
			return nil, c.errorf(n, "alias *%s is inside its own anchor", n.Value)
		}
		c.inAlias++
		v, err := c.value(n.Alias)
		c.inAlias--
		return v, err
	default:
		return nil, c.errorf(n, "unexpected YAML node")
	}
}

// mapping converts a mapping. Explicit keys may not repeat and win over keys merged in with <<.
func (c *converter) mapping(n *yaml.Node) (map[string]any, error) {
	m := make(map[string]any, len(n.Content)/2)
	keys := make(map[string]*yaml.Node, len(n.Content)/2)
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		key, err := c.key(k)
		if err != nil {
			return nil, err
		}
		if first, ok := keys[key]; ok {
			return nil, c.errorf(k, "mapping key %q already defined at line %d", key, first.Line)
		}
		keys[key] = k
		val, err := c.value(v)
		if err != nil {
			return nil, err
		}
		m[key] = val
	}
	for _, v := range merges {
		if err := c.merge(m, v); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// merge adds the keys of a << value (a mapping or a list of mappings) that m does not have yet.
func (c *converter) merge(m map[string]any, n *yaml.Node) error {
	v, err := c.value(n)
	if err != nil {
		return err
	}
	var sources []any
	switch x := v.(type) {
	case map[string]any:
		sources = []any{x}
	case []any:
		sources = x
	default:
		return c.errorf(n, "the value of << must be a mapping or a list of mappings")
	}
	for _, s := range sources {
		src, ok := s.(map[string]any)
		if !ok {
			return c.errorf(n, "the value of << must be a mapping or a list of mappings")
		}
		for k, val := range src {
			if _, ok := m[k]; !ok {
				m[k] = val
			}
		}
	}
	return nil
}

// key returns a mapping key as a string: a scalar's text as written, anything else through
// fmt.Sprint.
func (c *converter) key(k *yaml.Node) (string, error) {
	target := k
	if k.Kind == yaml.AliasNode && k.Alias != nil {
		target = k.Alias
	}
	if target.Kind == yaml.ScalarNode {
		return target.Value, nil
	}
	v, err := c.value(k)
	if err != nil {
		return "", err
	}
	return fmt.Sprint(v), nil
}

// scalar converts a scalar by its resolved tag. Timestamps, binary and custom tags stay text.
func (c *converter) scalar(n *yaml.Node) (any, error) {
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, c.errorf(n, "invalid boolean") // yaml.v3's message would quote the value
		}
		return b, nil
	case "!!int", "!!float":
		return c.number(n)
	default:
		return n.Value, nil
	}
}

// number keeps a number's text when JSON would write it the same way, and converts it otherwise.
func (c *converter) number(n *yaml.Node) (any, error) {
	if jsonNumberRE.MatchString(n.Value) {
		return json.Number(n.Value), nil
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, c.errorf(n, "invalid number") // yaml.v3's message would quote the value
	}
	switch x := v.(type) {
	case int:
		return json.Number(strconv.Itoa(x)), nil
	case int64:
		return json.Number(strconv.FormatInt(x, 10)), nil
	case uint64:
		return json.Number(strconv.FormatUint(x, 10)), nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return x, nil // JSON has no such number
		}
		return json.Number(formatFloat(x, 64)), nil
	default:
		return n.Value, nil
	}
}
