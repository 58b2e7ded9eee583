package spec

import (
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// The fast parser's leaves: anchor and tag names, keys, plain and quoted scalars, literal
// blocks and one-line flow collections. The structure — documents, block maps and lists,
// anchors and aliases — is in fastparse.go.

// name reads an anchor or alias name after its & or *: letters, digits, _ and -, as yaml.v3
// wants them, followed by a blank or the end of a flow entry. It returns "" (and gives up)
// otherwise.
func (p *fastParser) name() string {
	p.i++
	start := p.i
	p.skipNameChars()
	switch p.peek() {
	case ' ', '\n', 0, ',', ']', '}':
		if p.i > start {
			return p.src[start:p.i]
		}
	}
	p.fail()
	return ""
}

// skipNameChars moves past letters, digits, _ and -: what anchor names and local tags are made of.
func (p *fastParser) skipNameChars() {
	for p.i < len(p.src) {
		c := p.src[p.i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			p.i++
			continue
		}
		return
	}
}

// tag reads a local tag such as !reference; other tags are left to yaml.v3.
func (p *fastParser) tag() string {
	start := p.i
	p.i++
	p.skipNameChars()
	if p.i == start+1 {
		p.fail()
		return ""
	}
	return p.src[start:p.i]
}

// scanKey finds the colon of a key that starts at i; end is -1 when i does not start one.
func (p *fastParser) scanKey() (colon int, ok bool) {
	s := p.src
	i := p.i
	switch c := p.peek(); {
	case c == '\'' || c == '"':
		j := p.quotedEnd(i)
		if j < 0 {
			return -1, false
		}
		for j < len(s) && s[j] == ' ' {
			j++
		}
		if j < len(s) && s[j] == ':' && (j+1 == len(s) || s[j+1] == ' ' || s[j+1] == '\n') {
			if j-i > 1000 {
				return -1, false // too long for a simple key
			}
			return j, true
		}
		return -1, true
	case notPlainStart(c):
		return -1, true
	case c == '-' || c == '?' || c == ':':
		if n := p.peekAt(1); n == ' ' || n == '\n' || n == 0 {
			return -1, true
		}
	}
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '\n':
			return -1, true
		case '#':
			if s[j-1] == ' ' {
				return -1, true
			}
		case ':':
			if j+1 == len(s) || s[j+1] == ' ' || s[j+1] == '\n' {
				if j-i > 1000 {
					// yaml.v3 refuses simple keys of over 1,024 characters.
					return -1, false
				}
				return j, true
			}
		}
	}
	return -1, true
}

// quotedEnd returns the offset after the closing quote of a one-line quoted scalar at i, or -1.
func (p *fastParser) quotedEnd(i int) int {
	s := p.src
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\n':
			return -1
		case '\\':
			if q == '"' {
				j++
				if j < len(s) && s[j] == '\n' {
					return -1
				}
			}
		case q:
			if q == '\'' && j+1 < len(s) && s[j+1] == '\'' {
				j++
				continue
			}
			return j + 1
		}
	}
	return -1
}

// key reads a block map key at i whose colon scanKey found.
func (p *fastParser) key(colon int) *node {
	if c := p.peek(); c == '\'' || c == '"' {
		return p.scalar(false)
	}
	pos := p.posAt(p.i)
	v := strings.TrimRight(p.src[p.i:colon], " ")
	return p.newNode(node{kind: nScalar, tag: plainTag(v), value: v, pos: pos})
}

// notPlainStart reports whether c (0 at the end) cannot start a plain scalar: yaml.v3 reads it as
// an indicator or refuses it. '-', '?' and ':' depend on what follows; callers check those.
func notPlainStart(c byte) bool {
	switch c {
	case 0, '\n', '[', ']', '{', '}', ',', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`':
		return true
	}
	return false
}

// scalar reads a one-line plain or quoted scalar at i; in flow context plain ones also end at
// flow indicators.
func (p *fastParser) scalar(flow bool) *node {
	pos := p.posAt(p.i)
	switch p.peek() {
	case '\'', '"':
		v, ok := p.quoted()
		if !ok {
			p.fail()
			return nil
		}
		return p.newNode(node{kind: nScalar, tag: "!!str", value: v, pos: pos})
	}
	s := p.src
	start := p.i
	if notPlainStart(p.peek()) {
		p.fail()
		return nil
	}
	switch p.peek() {
	case '?', ':':
		// yaml.v3 lets these start a plain scalar only in block context, and only before text.
		if n := p.peekAt(1); flow || n == ' ' || n == '\n' || n == 0 {
			p.fail()
			return nil
		}
	case '-':
		if n := p.peekAt(1); n == ' ' || n == '\n' || n == 0 {
			p.fail()
			return nil
		}
	}
	end := start
	j := start
loop:
	for ; j < len(s); j++ {
		switch c := s[j]; c {
		case '\n':
			break loop
		case ' ':
			continue
		case '#':
			if s[j-1] == ' ' {
				break loop
			}
		case ':':
			if j+1 == len(s) || s[j+1] == ' ' || s[j+1] == '\n' {
				if flow {
					break loop // a flow map's key ends here
				}
				// A key where a value was expected ("a: b: c"): yaml.v3 refuses it.
				p.fail()
				return nil
			}
		case ',', '?', '[', ']', '{', '}':
			if flow {
				break loop
			}
		}
		end = j + 1
	}
	p.i = end
	v := s[start:end]
	return p.newNode(node{kind: nScalar, tag: plainTag(v), value: v, pos: pos})
}

// plainTag resolves a plain scalar's tag as yaml.v3 does; most values start with a letter that
// rules out everything but a string, so the resolver is asked only about the rest.
func plainTag(v string) string {
	if v == "<<" {
		return "!!merge"
	}
	if v != "" && strings.IndexByte("+-0123456789yYnNtTfFoO~.", v[0]) < 0 {
		return "!!str"
	}
	y := yaml.Node{Kind: yaml.ScalarNode, Value: v}
	return y.ShortTag()
}

// quoted reads a one-line quoted scalar at i.
func (p *fastParser) quoted() (string, bool) {
	end := p.quotedEnd(p.i)
	if end < 0 {
		return "", false
	}
	raw := p.src[p.i+1 : end-1]
	q := p.src[p.i]
	p.i = end
	if q == '\'' {
		if !strings.Contains(raw, "''") {
			return raw, true
		}
		return strings.ReplaceAll(raw, "''", "'"), true
	}
	if !strings.Contains(raw, `\`) {
		return raw, true
	}
	var b strings.Builder
	for k := 0; k < len(raw); k++ {
		c := raw[k]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		k++
		switch raw[k] {
		case '0':
			b.WriteByte(0)
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'v':
			b.WriteByte('\v')
		case 'f':
			b.WriteByte('\f')
		case 'r':
			b.WriteByte('\r')
		case 'e':
			b.WriteByte(0x1b)
		case ' ', '"', '\'', '\\':
			b.WriteByte(raw[k])
		case 'N':
			b.WriteString("\u0085")
		case '_':
			b.WriteString("\u00a0")
		case 'L':
			b.WriteString("\u2028")
		case 'P':
			b.WriteString("\u2029")
		case 'x', 'u', 'U':
			n := 2 // \xXX
			if raw[k] == 'u' {
				n = 4
			} else if raw[k] == 'U' {
				n = 8
			}
			if k+1+n > len(raw) {
				return "", false
			}
			v, err := strconv.ParseUint(raw[k+1:k+1+n], 16, 32)
			if err != nil || v >= 0xD800 && v <= 0xDFFF || v > 0x10FFFF {
				return "", false
			}
			b.WriteRune(rune(v))
			k += n
		default:
			return "", false
		}
	}
	return b.String(), true
}

// flow parses a one-line flow list or map at i.
func (p *fastParser) flow() *node {
	if p.enter() {
		return nil
	}
	defer p.leave()
	pos := p.posAt(p.i)
	open := p.src[p.i]
	p.i++
	var n *node
	closer := byte(']')
	if open == '[' {
		n = p.newNode(node{kind: nSeq, tag: "!!seq", pos: pos})
	} else {
		n = p.newNode(node{kind: nMap, tag: "!!map", pos: pos})
		closer = '}'
	}
	mb := mapBuilder{p: p, n: n}
	p.skipSpaces()
	for p.peek() != closer {
		if open == '[' {
			it := p.flowNode()
			if p.bad {
				return nil
			}
			n.items = append(n.items, it)
		} else {
			if c := p.peek(); c == '*' || c == '[' || c == '{' {
				p.fail()
				return nil
			}
			keyAt := p.i
			k := p.flowNode()
			if p.bad || p.peek() != ':' || p.i-keyAt > 1000 {
				p.fail()
				return nil
			}
			p.i++
			if c := p.peek(); c != ' ' {
				p.fail()
				return nil
			}
			p.skipSpaces()
			mb.mergeKey(k)
			v := p.flowNode()
			if p.bad || !mb.add(k, v) {
				return nil
			}
		}
		p.skipSpaces()
		switch p.peek() {
		case ',':
			p.i++
			p.skipSpaces()
			if c := p.peek(); c == ']' || c == '}' || c == ',' {
				p.fail()
				return nil
			}
		case closer:
		default:
			p.fail()
			return nil
		}
	}
	p.i++
	if n.kind == nSeq && n.items == nil {
		n.items = []*node{} // as the converter makes them
	}
	if n.kind == nMap {
		mb.finish()
	}
	return n
}

// flowNode parses one entry of a flow collection.
func (p *fastParser) flowNode() *node {
	switch p.peek() {
	case '[', '{':
		return p.flow()
	case '*':
		return p.alias()
	}
	return p.scalar(true)
}

// literal parses a literal block scalar whose | is at i, the way libyaml's scanner does: the
// indentation is that of the first non-blank line (at least parent+1), blank lines inside count,
// and the chomping indicator decides what happens to the final line breaks.
func (p *fastParser) literal(parent int) *node {
	pos := p.posAt(p.i)
	p.i++
	chomp := byte(0)
	if c := p.peek(); c == '-' || c == '+' {
		chomp = c
		p.i++
	}
	if c := p.peek(); c != ' ' && c != '\n' && c != 0 || parent < 0 {
		// An indentation indicator or an odd header: yaml.v3's business.
		p.fail()
		return nil
	}
	if !p.blank() {
		p.fail()
		return nil
	}
	s := p.src
	if nl := strings.IndexByte(s[p.i:], '\n'); nl >= 0 {
		p.i += nl + 1
		p.line++
		p.lineAt = p.i
	} else {
		p.i = len(s)
	}
	indent := 0 // not known yet
	lead, trail := 0, 0
	// breaks eats indentation and blank lines up to the next content line.
	breaks := func() {
		maxInd := 0
		for {
			for p.i < len(s) && s[p.i] == ' ' && (indent == 0 || p.i-p.lineAt < indent) {
				p.i++
			}
			maxInd = max(maxInd, p.i-p.lineAt)
			if p.i >= len(s) || s[p.i] != '\n' {
				break
			}
			trail++
			p.i++
			p.line++
			p.lineAt = p.i
		}
		if indent == 0 {
			indent = max(maxInd, parent+1, 1)
			if c := p.i - p.lineAt; p.i < len(s) && c < indent && c > parent {
				// Blank lines indented deeper than the first text: left to yaml.v3.
				p.fail()
			}
		}
	}
	breaks()
	var b strings.Builder
	for !p.bad && p.i < len(s) && p.i-p.lineAt == indent {
		for k := 0; k < lead+trail; k++ {
			b.WriteByte('\n')
		}
		lead, trail = 0, 0
		le := strings.IndexByte(s[p.i:], '\n')
		if le < 0 {
			b.WriteString(s[p.i:])
			p.i = len(s)
			break
		}
		b.WriteString(s[p.i : p.i+le])
		lead = 1
		p.i += le + 1
		p.line++
		p.lineAt = p.i
		breaks()
	}
	if p.bad {
		return nil
	}
	switch chomp {
	case 0:
		if lead > 0 {
			b.WriteByte('\n')
		}
	case '+':
		b.WriteString(strings.Repeat("\n", lead+trail))
	}
	n := p.newNode(node{kind: nScalar, tag: "!!str", value: b.String(), pos: pos})
	// i is at the end, or at the first character of a line indented less than the text.
	if p.i < len(s) {
		p.skipBlankLines()
	} else {
		p.ind = -1
	}
	return n
}
