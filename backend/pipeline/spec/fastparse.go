package spec

import (
	"strings"
	"unicode/utf8"
)

// fastParser reads the block-style YAML that .cnb.yml files are written in straight into nodes,
// skipping yaml.v3's scanner, event and yaml.Node layers, which cost more than half of a compile.
//
// It knows a deliberate subset of YAML: block maps and lists (compact and indentless too), plain
// one-line scalars, one-line quoted scalars, literal block scalars (|, |-, |+), one-line flow lists
// and maps, comments, anchors, aliases, merge keys and local tags such as !reference. On anything
// else — folded scalars, multi-line plain or quoted scalars or flow collections, tabs, directives,
// several documents, complex keys, duplicate keys, a bad merge, an unknown alias — and on every
// error, it gives up, and parseYAML hands the file to yaml.v3, which also writes every error
// message. The result of a file it accepts must be exactly what yaml.v3 and the converter make of
// it, down to tags and positions; TestFastParseMatchesYAMLv3 and FuzzFastParse check that.
type fastParser struct {
	src   string
	file  string
	ascii bool // columns are byte offsets; otherwise they count runes, as yaml.v3 does

	i      int // read offset
	line   int // 1-based line of i
	lineAt int // offset of that line's first byte
	ind    int // indentation of the content line i stands on, -1 at the end

	bad     bool // gave up
	atStart bool // before the first content line, where "---" may open the document
	depth   int
	cost    int // what the converter would take from the budget for the same tree
	limit   int // what is left of the budget

	anchors map[string]*anchored
	slab    []node
}

type anchored struct {
	n     *node
	cost  int
	ready bool // false while the anchored value is still being parsed
}

// maxFastDepth bounds recursion; deeper files go to yaml.v3, which has its own limit.
const maxFastDepth = 500

// parseFast returns the file's tree, or ok=false when the file is outside the subset or wrong.
func parseFast(file string, src []byte, b *budget) (*node, bool) {
	p := &fastParser{src: string(src), file: file, line: 1, limit: b.left, anchors: map[string]*anchored{}}
	if !p.checkChars() {
		return nil, false
	}
	n := p.document()
	if p.bad || p.cost > b.left {
		return nil, false
	}
	b.left -= p.cost
	return n, true
}

// checkChars gives up on what yaml.v3 treats specially or refuses: tabs, control characters, the
// Unicode line breaks, a byte order mark inside the text and invalid UTF-8.
func (p *fastParser) checkChars() bool {
	p.ascii = true
	s := p.src
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\n' || c == 0x7f {
				return false
			}
			i++
			continue
		}
		p.ascii = false
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return false
		}
		if r < 0xA0 || r > 0xD7FF && r < 0xE000 || r == 0xFEFF || r == 0xFFFE || r == 0xFFFF || r == 0x2028 || r == 0x2029 {
			return false
		}
		i += size
	}
	return true
}

func (p *fastParser) fail() { p.bad = true }

func (p *fastParser) peek() byte {
	if p.i < len(p.src) {
		return p.src[p.i]
	}
	return 0
}

func (p *fastParser) peekAt(off int) byte {
	if p.i+off < len(p.src) {
		return p.src[p.i+off]
	}
	return 0
}

// col is the 0-based column of offset i on the current line.
func (p *fastParser) col(i int) int {
	if p.ascii {
		return i - p.lineAt
	}
	return utf8.RuneCountInString(p.src[p.lineAt:i])
}

func (p *fastParser) posAt(i int) Pos { return Pos{File: p.file, Line: p.line, Column: p.col(i) + 1} }

func (p *fastParser) newNode(n node) *node {
	if len(p.slab) == cap(p.slab) {
		p.slab = make([]node, 0, 256)
	}
	p.slab = append(p.slab, n)
	p.cost++
	return &p.slab[len(p.slab)-1]
}

func (p *fastParser) null(pos Pos) *node {
	return p.newNode(node{kind: nScalar, tag: "!!null", pos: pos})
}

func (p *fastParser) skipSpaces() {
	for p.i < len(p.src) && p.src[p.i] == ' ' {
		p.i++
	}
}

// blank is true at the end of a line's content: white space to the line end or to a comment.
func (p *fastParser) blank() bool {
	p.skipSpaces()
	switch p.peek() {
	case 0, '\n':
		return true
	case '#':
		// A comment needs white space before it: "a#b" is text.
		return p.i == p.lineAt || p.src[p.i-1] == ' '
	}
	return false
}

// nextLine moves past the rest of the current line and any blank or comment lines to the first
// content character of the next content line, and sets ind to its indentation (-1 at the end).
func (p *fastParser) nextLine() {
	if nl := strings.IndexByte(p.src[p.i:], '\n'); nl >= 0 {
		p.i += nl + 1
	} else {
		p.i = len(p.src)
	}
	p.line++
	p.lineAt = p.i
	p.skipBlankLines()
}

// skipBlankLines is nextLine's second half: i is at the start of a line.
func (p *fastParser) skipBlankLines() {
	for {
		p.skipSpaces()
		if p.i >= len(p.src) {
			p.ind = -1
			return
		}
		switch p.src[p.i] {
		case '\n':
			p.i++
		case '#':
			if nl := strings.IndexByte(p.src[p.i:], '\n'); nl >= 0 {
				p.i += nl + 1
			} else {
				p.i = len(p.src)
				p.ind = -1
				return
			}
		default:
			p.ind = p.i - p.lineAt
			if p.ind == 0 && !p.atStart && p.marker() {
				p.fail() // a second document, or the end of this one: yaml.v3's business
			}
			return
		}
		p.line++
		p.lineAt = p.i
	}
}

// endLine checks that nothing but a comment follows on the line, then moves to the next one.
func (p *fastParser) endLine() {
	if !p.blank() {
		p.fail()
		return
	}
	p.nextLine()
}

// marker reports whether a document marker (--- or ...) starts at i.
func (p *fastParser) marker() bool {
	rest := p.src[p.i:]
	if !strings.HasPrefix(rest, "---") && !strings.HasPrefix(rest, "...") {
		return false
	}
	return len(rest) == 3 || rest[3] == ' ' || rest[3] == '\n'
}

func (p *fastParser) document() *node {
	p.atStart = true
	p.skipBlankLines()
	p.atStart = false
	if p.ind == 0 && p.marker() {
		if p.src[p.i] == '.' {
			p.fail()
			return nil
		}
		p.i += 3
		if !p.blank() {
			p.fail()
			return nil
		}
		p.nextLine()
		if p.ind < 0 {
			p.fail() // an empty document after the marker: rare, and placed differently
			return nil
		}
	}
	if p.ind < 0 {
		n := p.null(Pos{File: p.file, Line: 1, Column: 1})
		p.cost-- // parseSlow makes this null itself, without the converter counting it
		return n
	}
	if p.peek() == '%' {
		p.fail()
		return nil
	}
	n := p.block(-1)
	if p.ind != -1 {
		// Another document, a marker, or text that is not indented as it should be.
		p.fail()
	}
	return n
}

// isEntry reports whether i is at a block list entry: "-" then a space or the line end.
func (p *fastParser) isEntry() bool {
	if p.peek() != '-' {
		return false
	}
	c := p.peekAt(1)
	return c == ' ' || c == '\n' || c == 0
}

// block parses the value that starts a content line indented more than parent.
func (p *fastParser) block(parent int) *node {
	if p.isEntry() {
		return p.seq(p.ind)
	}
	return p.inline(parent, true, false)
}

// seq parses a block list whose dashes stand in column ind.
func (p *fastParser) seq(ind int) *node {
	if p.enter() {
		return nil
	}
	defer p.leave()
	n := p.newNode(node{kind: nSeq, tag: "!!seq", pos: p.posAt(p.i)})
	for {
		p.i++ // the dash
		var item *node
		if dashEnd := p.posAt(p.i); p.blank() {
			p.nextLine()
			if p.ind > ind {
				item = p.block(ind)
			} else {
				item = p.null(dashEnd)
			}
		} else {
			item = p.inline(ind, true, false)
		}
		if p.bad {
			return nil
		}
		n.items = append(n.items, item)
		if p.ind == ind && p.isEntry() {
			continue
		}
		if p.ind > ind {
			p.fail()
			return nil
		}
		return n
	}
}

func (p *fastParser) enter() bool {
	p.depth++
	if p.depth > maxFastDepth {
		p.fail()
	}
	return p.bad
}

func (p *fastParser) leave() { p.depth-- }

// inline parses a value that starts at i in the middle of a line: after "key: " or "- ", or at
// the start of a content line. parent is the indentation the value must exceed to continue on
// later lines. compact allows a map or list to start here ("- key: v", "- - x"); mapValue allows
// a list at the parent's own indentation to follow on the next lines ("key:\n- x").
func (p *fastParser) inline(parent int, compact, mapValue bool) *node {
	start := p.i
	var anchor, tag string
	for p.peek() == '&' || p.peek() == '!' {
		if p.peek() == '&' {
			if anchor != "" {
				p.fail()
				return nil
			}
			anchor = p.name()
		} else {
			if tag != "" {
				p.fail()
				return nil
			}
			tag = p.tag()
		}
		if p.bad || anchor == "" && tag == "" {
			p.fail()
			return nil
		}
		if c := p.peek(); c != ' ' && c != '\n' && c != 0 {
			p.fail()
			return nil
		}
		p.skipSpaces()
	}
	if anchor == "" && tag == "" {
		return p.plainValue(parent, compact, mapValue)
	}
	// The value of an anchor or a tag is reported where the anchor or tag stands.
	pos := p.posAt(start)
	var a *anchored
	if anchor != "" {
		a = &anchored{}
		p.anchors[anchor] = a
	}
	before := p.cost
	var n *node
	if p.blank() {
		p.nextLine()
		if c := p.peek(); p.ind >= 0 && (c == '&' || c == '!' || c == '*') {
			p.fail() // a second anchor or tag, or an alias, for the same value
			return nil
		}
		switch {
		case p.ind > parent:
			n = p.block(parent)
		case mapValue && p.ind == parent && p.isEntry():
			n = p.seq(parent)
		default:
			n = p.null(pos)
		}
	} else {
		if colon, ok := p.scanKey(); p.peek() == '*' || ok && colon >= 0 {
			// "&a *b" is refused by yaml.v3; "&a key: v" anchors the key, not the map.
			p.fail()
			return nil
		}
		n = p.plainValue(parent, false, false)
	}
	if p.bad {
		return nil
	}
	n.pos = pos
	if tag != "" {
		n.tag = tag
	}
	if a != nil {
		a.n, a.cost, a.ready = n, p.cost-before, true
	}
	return n
}

// plainValue parses an untagged value at i: a map or list that starts here (when compact), an
// alias, a flow collection, a block scalar, or a one-line scalar.
func (p *fastParser) plainValue(parent int, compact, mapValue bool) *node {
	switch p.peek() {
	case '*':
		n := p.alias()
		if p.bad {
			return nil
		}
		p.endLine()
		return n
	case '[', '{':
		pos := p.posAt(p.i)
		n := p.flow()
		if p.bad {
			return nil
		}
		n.pos = pos
		p.endLine()
		return n
	case '|':
		return p.literal(parent)
	}
	if p.isEntry() {
		if !compact {
			p.fail()
			return nil
		}
		return p.seq(p.col(p.i))
	}
	colon, ok := p.scanKey()
	if !ok {
		p.fail()
		return nil
	}
	if colon >= 0 {
		if !compact {
			p.fail()
			return nil
		}
		return p.mapping(p.col(p.i))
	}
	n := p.scalar(false)
	if p.bad {
		return nil
	}
	p.endLine()
	return n
}

// alias reads an alias at i and copies the anchored value, as the converter does for each use.
// The converter counts the alias node and then converts the whole anchored value again, aliases
// inside it included.
func (p *fastParser) alias() *node {
	pos := p.posAt(p.i)
	name := p.name()
	a := p.anchors[name]
	if a == nil || !a.ready || name == "" {
		p.fail()
		return nil
	}
	if p.cost+1+a.cost > p.limit {
		// Past the budget ("billion laughs"): the slow path reports it; copying would not end.
		p.fail()
		return nil
	}
	before := p.cost
	n := p.clone(a.n)
	n.pos = pos
	p.cost = before + 1 + a.cost
	return n
}

// clone deep-copies a tree; newNode counts every copy, which alias corrects for.
func (p *fastParser) clone(n *node) *node {
	c := p.newNode(*n)
	if n.pairs != nil {
		c.pairs = make([]pair, len(n.pairs))
		for i, pr := range n.pairs {
			c.pairs[i] = pair{key: p.clone(pr.key), val: p.clone(pr.val)}
		}
	}
	if n.items != nil {
		c.items = make([]*node, len(n.items))
		for i, it := range n.items {
			c.items[i] = p.clone(it)
		}
	}
	return c
}

// mapping parses a block map whose keys stand in column ind; the first key is at i.
func (p *fastParser) mapping(ind int) *node {
	if p.enter() {
		return nil
	}
	defer p.leave()
	mb := mapBuilder{p: p, n: p.newNode(node{kind: nMap, tag: "!!map", pos: p.posAt(p.i)})}
	for {
		colon, ok := p.scanKey()
		if !ok || colon < 0 {
			p.fail()
			return nil
		}
		k := p.key(colon)
		if p.bad {
			return nil
		}
		mb.mergeKey(k)
		p.i = colon + 1
		var v *node
		if colonEnd := p.posAt(p.i); p.blank() {
			p.nextLine()
			switch {
			case p.ind > ind:
				v = p.block(ind)
			case p.ind == ind && p.isEntry():
				v = p.seq(ind)
			default:
				v = p.null(colonEnd)
			}
		} else {
			v = p.inline(ind, false, true)
		}
		if p.bad || !mb.add(k, v) {
			return nil
		}
		if p.ind == ind && !p.isEntry() {
			continue
		}
		if p.ind >= ind {
			p.fail()
			return nil
		}
		mb.finish()
		return mb.n
	}
}

// mapBuilder adds the pairs of a block or flow map as the converter does: merge keys collect
// their maps' pairs, which go first unless the map sets the key itself; a duplicate key, or a
// merge of something other than maps, is an error the converter reports, so the parser gives up.
type mapBuilder struct {
	p      *fastParser
	n      *node
	merged []pair
	index  map[string]int // built once a map is large enough for scans to cost
}

// mergeKey takes a merge key off the cost before its value is parsed: the converter does not
// convert the key, and the value may need every node of the budget.
func (mb *mapBuilder) mergeKey(k *node) {
	if k.tag == "!!merge" {
		mb.p.cost--
	}
}

func (mb *mapBuilder) add(k, v *node) bool {
	n := mb.n
	if k.tag == "!!merge" {
		ms, ok := mergeSources(v)
		if !ok {
			mb.p.fail()
			return false
		}
		mb.merged = append(mb.merged, ms...)
		return true
	}
	if mb.index != nil {
		if _, dup := mb.index[k.value]; dup {
			mb.p.fail()
			return false
		}
		mb.index[k.value] = len(n.pairs)
	} else if indexKey(n.pairs, k.value) >= 0 {
		mb.p.fail()
		return false
	}
	n.pairs = append(n.pairs, pair{key: k, val: v})
	if mb.index == nil && len(n.pairs) > 16 {
		mb.index = make(map[string]int, 32)
		for i, pr := range n.pairs {
			mb.index[pr.key.value] = i
		}
	}
	return true
}

func (mb *mapBuilder) finish() {
	if len(mb.merged) > 0 {
		mb.n.pairs = mergePairs(mb.n.pairs, mb.merged)
	}
	if mb.n.pairs == nil {
		mb.n.pairs = []pair{}
	}
}

// mergeSources returns the pairs a merge key's value brings, as converter.mergeSources does, or
// false where the converter would report an error.
func mergeSources(v *node) ([]pair, bool) {
	switch v.kind {
	case nMap:
		return v.pairs, true
	case nSeq:
		var out []pair
		for _, it := range v.items {
			if it.kind != nMap {
				return nil, false
			}
			out = append(out, it.pairs...)
		}
		return out, true
	}
	return nil, false
}

// mergePairs puts merged pairs the map does not set itself before its own, the first of several
// merged maps winning.
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
