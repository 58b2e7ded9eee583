package spec

import (
	"bytes"
	"encoding/binary"
	"unicode/utf16"

	"gopkg.in/yaml.v3"

	"github.com/nimbus-build/nimbus/backend/pipeline/spec/internal/yamlpos"
)

// This file turns YAML bytes into a tree of nodes that remember their file and position, with
// aliases expanded and merge keys (<<) applied, so that everything after it sees plain maps,
// lists and scalars.

type nodeKind uint8

const (
	nScalar nodeKind = iota // includes null
	nMap
	nSeq
)

// node is a YAML value. Maps keep their key order.
type node struct {
	kind  nodeKind
	tag   string // YAML short tag: !!str, !!int, !!bool, !!null, !!float, or a custom one like !reference
	value string
	pairs []pair
	items []*node
	pos   Pos
}

type pair struct {
	key *node
	val *node
}

func (n *node) isNull() bool { return n == nil || n.kind == nScalar && n.tag == "!!null" }

// get returns the value of a map key, or nil.
func (n *node) get(key string) *node {
	if n == nil || n.kind != nMap {
		return nil
	}
	for _, p := range n.pairs {
		if p.key.value == key {
			return p.val
		}
	}
	return nil
}

func (n *node) kindName() string {
	switch {
	case n == nil || n.isNull():
		return "nothing"
	case n.kind == nMap:
		return "a map"
	case n.kind == nSeq:
		return "a list"
	}
	return "a scalar"
}

// maxNodes bounds the size of a document after aliases and !reference are expanded, so a "billion
// laughs" file fails with an error instead of exhausting memory.
const maxNodes = 500_000

// budget counts the nodes created while expanding one build's files.
type budget struct {
	left     int
	exceeded bool
}

func (b *budget) take() bool {
	if b.left <= 0 {
		b.exceeded = true
		return false
	}
	b.left--
	return true
}

// normalize turns a UTF-16 file with its byte order mark (Windows editors write them) into
// UTF-8, strips a UTF-8 byte order mark and turns CRLF line ends into LF; line and column
// numbers are unchanged by all three, so diagnostics and their excerpts point at the same place.
func normalize(src []byte) []byte {
	src = fromUTF16(src)
	src = bytes.TrimPrefix(src, []byte("\xef\xbb\xbf"))
	if bytes.Contains(src, []byte("\r\n")) {
		src = bytes.ReplaceAll(src, []byte("\r\n"), []byte("\n"))
	}
	return src
}

// fromUTF16 decodes src when it opens with a UTF-16 byte order mark; anything else is returned
// as it is. An odd trailing byte is dropped, and unpaired surrogates become U+FFFD.
func fromUTF16(src []byte) []byte {
	var order binary.ByteOrder
	switch {
	case bytes.HasPrefix(src, []byte{0xff, 0xfe}):
		order = binary.LittleEndian
	case bytes.HasPrefix(src, []byte{0xfe, 0xff}):
		order = binary.BigEndian
	default:
		return src
	}
	units := make([]uint16, 0, len(src)/2)
	for i := 2; i+1 < len(src); i += 2 {
		units = append(units, order.Uint16(src[i:]))
	}
	return []byte(string(utf16.Decode(units)))
}

// parseYAML parses one file with yaml.v3 and converts its nodes. It returns nil when the file
// does not parse; the error is in d.
func parseYAML(file string, src []byte, b *budget, d *diags) *node {
	var doc yaml.Node
	src = normalize(src)
	if err := yaml.Unmarshal(src, &doc); err != nil {
		// Where the error is takes a second look at the file (internal/yamlpos); only a file
		// that does not parse pays for it.
		at := yamlpos.Locate(src, err)
		d.errorHint(Pos{File: file, Line: at.Line, Column: at.Column}, at.Hint, "invalid YAML: %s", at.Msg)
		return nil
	}
	c := converter{file: file, budget: b, d: d, expanding: map[*yaml.Node]bool{}}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return &node{kind: nScalar, tag: "!!null", pos: Pos{File: file, Line: 1, Column: 1}}
	}
	n := c.convert(doc.Content[0])
	if b.exceeded {
		d.errorf(Pos{File: file}, "the document expands to more than %d values (aliases or !reference nested too deeply)", maxNodes)
		return nil
	}
	return n
}

type converter struct {
	file      string
	budget    *budget
	d         *diags
	expanding map[*yaml.Node]bool // aliases being expanded, to catch an anchor that contains itself
	slab      []node              // nodes are allocated in chunks: a file has thousands
}

func (c *converter) newNode(n node) *node {
	if len(c.slab) == cap(c.slab) {
		c.slab = make([]node, 0, 256)
	}
	c.slab = append(c.slab, n)
	return &c.slab[len(c.slab)-1]
}

func (c *converter) pos(y *yaml.Node) Pos { return Pos{File: c.file, Line: y.Line, Column: y.Column} }

func (c *converter) null(y *yaml.Node) *node {
	return c.newNode(node{kind: nScalar, tag: "!!null", pos: c.pos(y)})
}

func (c *converter) convert(y *yaml.Node) *node {
	if !c.budget.take() {
		return c.null(y)
	}
	switch y.Kind {
	case yaml.DocumentNode:
		if len(y.Content) == 0 {
			return c.null(y)
		}
		return c.convert(y.Content[0])
	case yaml.AliasNode:
		if y.Alias == nil || c.expanding[y.Alias] {
			c.d.errorf(c.pos(y), "alias *%s refers to the value that contains it", y.Value)
			return c.null(y)
		}
		c.expanding[y.Alias] = true
		n := c.convert(y.Alias)
		delete(c.expanding, y.Alias)
		// The value is reported where the alias is used; what is inside it, where it was written.
		n.pos = c.pos(y)
		return n
	case yaml.SequenceNode:
		n := c.newNode(node{kind: nSeq, tag: y.Tag, pos: c.pos(y), items: make([]*node, 0, len(y.Content))})
		for _, item := range y.Content {
			n.items = append(n.items, c.convert(item))
		}
		return n
	case yaml.MappingNode:
		return c.mapping(y)
	default:
		return c.newNode(node{kind: nScalar, tag: y.ShortTag(), value: y.Value, pos: c.pos(y)})
	}
}

// mapping converts a map, applying merge keys: the explicit keys of the map win over merged ones,
// and among several merged maps (<<: [*a, *b]) the first wins, as YAML's merge spec says.
func (c *converter) mapping(y *yaml.Node) *node {
	n := c.newNode(node{kind: nMap, tag: y.Tag, pos: c.pos(y), pairs: make([]pair, 0, len(y.Content)/2)})
	var merged []pair
	var index map[string]int // built once a map is large enough for scans to cost
	find := func(key string) int {
		if index != nil {
			if i, ok := index[key]; ok {
				return i
			}
			return -1
		}
		return indexKey(n.pairs, key)
	}
	for i := 0; i+1 < len(y.Content); i += 2 {
		k, v := y.Content[i], y.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged = append(merged, c.mergeSources(v)...)
			continue
		}
		key := c.convert(k)
		if key.kind != nScalar {
			c.d.errorf(key.pos, "a map key must be a scalar, not %s", key.kindName())
			continue
		}
		if first := find(key.value); first >= 0 {
			c.d.errorf(key.pos, "duplicate key %q (first at line %d)", key.value, n.pairs[first].key.pos.Line)
			continue
		}
		n.pairs = append(n.pairs, pair{key: key, val: c.convert(v)})
		if index == nil && len(n.pairs) > 16 {
			index = make(map[string]int, len(y.Content)/2)
			for i, p := range n.pairs {
				index[p.key.value] = i
			}
		} else if index != nil {
			index[key.value] = len(n.pairs) - 1
		}
	}
	if len(merged) > 0 {
		n.pairs = mergePairs(n.pairs, merged)
	}
	return n
}

// indexKey finds a key among pairs. A linear scan: most maps in a .cnb.yml have a handful of
// keys, and a lookup map for each would cost more than it saves.
func indexKey(pairs []pair, key string) int {
	for i, p := range pairs {
		if p.key.value == key {
			return i
		}
	}
	return -1
}

// mergeSources returns the pairs a merge key's value brings: a map, an alias of one, or a list of
// those.
func (c *converter) mergeSources(v *yaml.Node) []pair {
	src := c.convert(v)
	var maps []*node
	switch src.kind {
	case nMap:
		maps = append(maps, src)
	case nSeq:
		for _, it := range src.items {
			if it.kind != nMap {
				c.d.errorf(it.pos, "a merge key (<<) takes maps, not %s", it.kindName())
				continue
			}
			maps = append(maps, it)
		}
	default:
		c.d.errorf(src.pos, "a merge key (<<) takes a map or a list of maps, not %s", src.kindName())
	}
	var out []pair
	for _, m := range maps {
		out = append(out, m.pairs...)
	}
	return out
}

// mergePairs puts the pairs of merged maps before a map's own pairs, dropping every merged key
// the map sets itself and every later repeat of a merged key (the first merged map wins).
func mergePairs(own, merged []pair) []pair {
	var out []pair
	added := map[string]bool{}
	for _, pr := range merged {
		if indexKey(own, pr.key.value) < 0 && !added[pr.key.value] {
			added[pr.key.value] = true
			out = append(out, pr)
		}
	}
	return append(out, own...)
}
