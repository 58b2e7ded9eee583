package spec

import (
	"fmt"
	"math/bits"
	"strings"
	"unicode/utf8"
)

// This file is the glob dialect of branch keys and ifModify: globstar and extglob as in
// micromatch, the family the CNB docs point to. No Go library fits: doublestar has no extglob,
// and ohmyglob's "**" crosses "/" like "*" does (so "**/x" needs a slash) and needs a regexp2
// dependency. The matcher here keeps the set of input positions a pattern prefix can end at and
// advances it node by node, so every pattern matches in polynomial time: a fuzzed pattern cannot
// make it backtrack exponentially.
//
// Syntax:
//
//	*            any run of characters except "/"
//	?            one character except "/"
//	**           as a whole path segment: any number of segments ("a/**/b" matches "a/b");
//	             elsewhere it is "*"
//	[abc] [a-z]  one character of the class; [!…] or [^…] negates it
//	{a,b}        either alternative
//	(a|b)        either alternative, like @(a|b)
//	@(…) ?(…) *(…) +(…) !(…)
//	             exactly one, at most one, any number, at least one, or anything but one of the
//	             alternatives; !(…) does not cross "/" unless an alternative contains "/" or "**"
//	\c           the character c
//
// Matching is case-sensitive and a leading dot is not special.

// maxGlobLen bounds pattern length; keys and ifModify entries are short, and the bound keeps the
// work of a hostile pattern small.
const maxGlobLen = 1024

type globKind uint8

const (
	gLit       globKind = iota // lit
	gAnyChar                   // ?
	gStar                      // *
	gStarSlash                 // "**/": zero or more whole segments with their slash
	gSlashAll                  // "/**" at the end of an alternative: nothing, or "/" and anything
	gAll                       // "**" alone: anything at all
	gClass                     // [...]
	gGroup                     // extglob or brace group
)

type globNode struct {
	kind   globKind
	lit    string
	class  *charClass
	op     byte // group operator: '@', '?', '*', '+', '!'
	alts   [][]globNode
	deep   bool // for '!': may span "/"
	source string
}

type charClass struct {
	negate bool
	ranges [][2]rune
}

func (c *charClass) match(r rune) bool {
	in := false
	for _, rg := range c.ranges {
		if r >= rg[0] && r <= rg[1] {
			in = true
			break
		}
	}
	return in != c.negate
}

// Glob is a compiled pattern.
type Glob struct {
	pattern string
	nodes   []globNode
	literal bool // no metacharacters: plain string comparison
}

// String returns the pattern the glob was compiled from.
func (g *Glob) String() string { return g.pattern }

// CompileGlob parses a pattern; the error says what is wrong and where.
func CompileGlob(pattern string) (*Glob, error) {
	if len(pattern) > maxGlobLen {
		return nil, fmt.Errorf("pattern longer than %d characters", maxGlobLen)
	}
	if !utf8.ValidString(pattern) {
		return nil, fmt.Errorf("pattern is not valid UTF-8")
	}
	if !strings.ContainsAny(pattern, `*?[]{}()|!@+\`) {
		return &Glob{pattern: pattern, literal: true}, nil
	}
	p := &globParser{src: pattern}
	nodes, err := p.alternative(0, 0)
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.src) {
		return nil, fmt.Errorf("unexpected %q at offset %d", p.src[p.pos], p.pos)
	}
	return &Glob{pattern: pattern, nodes: nodes}, nil
}

// Match reports whether the whole of s matches.
func (g *Glob) Match(s string) bool {
	if g.literal {
		return g.pattern == s
	}
	start := newPosSet(len(s))
	start.add(0)
	m := matcher{s: s}
	return m.matchSeq(g.nodes, start).has(len(s))
}

type globParser struct {
	src   string
	pos   int
	depth int // open groups, bounded by maxGlobDepth
}

// maxGlobDepth bounds group nesting; real patterns nest one or two levels.
const maxGlobDepth = 8

// alternative parses nodes until the end of the pattern or, inside a group, until its separator
// or closer (both 0 at the top level). The caller consumes the terminator.
func (p *globParser) alternative(sep, closer byte) ([]globNode, error) {
	var nodes []globNode
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			nodes = append(nodes, globNode{kind: gLit, lit: lit.String()})
			lit.Reset()
		}
	}
	altStart := p.pos
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		if closer != 0 && (c == sep || c == closer) {
			break
		}
		switch {
		case c == '\\':
			if p.pos+1 >= len(p.src) {
				return nil, fmt.Errorf("trailing backslash")
			}
			r, n := utf8.DecodeRuneInString(p.src[p.pos+1:])
			lit.WriteRune(r)
			p.pos += 1 + n
		case c == '*' && p.pos+1 < len(p.src) && p.src[p.pos+1] == '*':
			flush()
			nodes = append(nodes, p.globstar(altStart, &nodes, sep, closer))
		case c == '(' || c == '{' || strings.IndexByte("?*+@!", c) >= 0 && p.pos+1 < len(p.src) && p.src[p.pos+1] == '(':
			flush()
			op, closer := byte('@'), byte(')')
			switch c {
			case '{':
				closer = '}'
			case '(':
			default:
				op = c
				p.pos++ // the operator; group() consumes the parenthesis
			}
			g, err := p.group(op, closer)
			if err != nil {
				return nil, err
			}
			nodes = append(nodes, g)
		case c == '*':
			flush()
			nodes = append(nodes, globNode{kind: gStar})
			p.pos++
		case c == '?':
			flush()
			nodes = append(nodes, globNode{kind: gAnyChar})
			p.pos++
		case c == '[':
			cls, ok := p.class()
			if !ok {
				lit.WriteByte('[') // an unclosed '[' is a literal, as in shells
				p.pos++
				continue
			}
			flush()
			nodes = append(nodes, globNode{kind: gClass, class: cls})
		case c == ')' || c == '|' && closer == 0:
			return nil, fmt.Errorf("unbalanced %q at offset %d", c, p.pos)
		default:
			r, n := utf8.DecodeRuneInString(p.src[p.pos:])
			lit.WriteRune(r)
			p.pos += n
		}
	}
	flush()
	return nodes, nil
}

// globstar handles "**" at p.pos. As a whole segment it spans segments; otherwise it is "*".
func (p *globParser) globstar(altStart int, nodes *[]globNode, sep, closer byte) globNode {
	i := p.pos
	p.pos += 2
	for p.pos < len(p.src) && p.src[p.pos] == '*' {
		p.pos++ // "***" is "**"
	}
	before := i == altStart || p.src[i-1] == '/'
	atEnd := p.pos == len(p.src) || closer != 0 && (p.src[p.pos] == sep || p.src[p.pos] == closer)
	if !before || !(atEnd || p.src[p.pos] == '/') {
		return globNode{kind: gStar}
	}
	if !atEnd {
		p.pos++ // the slash belongs to the node
		return globNode{kind: gStarSlash}
	}
	// "a/**": the slash before was emitted as part of a literal; take it back so that "a/**"
	// also matches "a" itself, as micromatch does.
	if n := len(*nodes); i > altStart && n > 0 && (*nodes)[n-1].kind == gLit && strings.HasSuffix((*nodes)[n-1].lit, "/") {
		last := &(*nodes)[n-1]
		last.lit = strings.TrimSuffix(last.lit, "/")
		if last.lit == "" {
			*nodes = (*nodes)[:n-1]
		}
		return globNode{kind: gSlashAll}
	}
	return globNode{kind: gAll}
}

// group parses "(a|b)" or "{a,b}" starting at the opening bracket.
func (p *globParser) group(op byte, closer byte) (globNode, error) {
	open := p.pos
	if p.depth++; p.depth > maxGlobDepth {
		return globNode{}, fmt.Errorf("groups nested more than %d deep", maxGlobDepth)
	}
	defer func() { p.depth-- }()
	p.pos++
	sep := byte('|')
	if closer == '}' {
		sep = ','
	}
	g := globNode{kind: gGroup, op: op}
	for {
		alt, err := p.alternative(sep, closer)
		if err != nil {
			return g, err
		}
		g.alts = append(g.alts, alt)
		if p.pos >= len(p.src) {
			return g, fmt.Errorf("unclosed %q at offset %d", p.src[open], open)
		}
		c := p.src[p.pos]
		p.pos++
		switch {
		case c == closer:
			g.source = p.src[open:p.pos]
			g.deep = strings.Contains(g.source, "/")
			return g, nil
		case c == sep:
		default:
			return g, fmt.Errorf("unexpected %q at offset %d", c, p.pos-1)
		}
	}
}

// class parses a bracket expression; ok is false when it is not closed.
func (p *globParser) class() (*charClass, bool) {
	i := p.pos + 1
	cls := &charClass{}
	if i < len(p.src) && (p.src[i] == '!' || p.src[i] == '^') {
		cls.negate = true
		i++
	}
	first := true
	for i < len(p.src) {
		if p.src[i] == ']' && !first {
			p.pos = i + 1
			return cls, true
		}
		first = false
		lo, n := utf8.DecodeRuneInString(p.src[i:])
		if lo == '\\' && i+1 < len(p.src) {
			i++
			lo, n = utf8.DecodeRuneInString(p.src[i:])
		}
		i += n
		hi := lo
		if i+1 < len(p.src) && p.src[i] == '-' && p.src[i+1] != ']' {
			hi, n = utf8.DecodeRuneInString(p.src[i+1:])
			i += 1 + n
		}
		cls.ranges = append(cls.ranges, [2]rune{lo, hi})
	}
	return nil, false
}

// posSet is a set of positions 0..n in the input.
type posSet []uint64

func newPosSet(n int) posSet { return make(posSet, n/64+1) }

func (s posSet) add(i int)      { s[i/64] |= 1 << (uint(i) % 64) }
func (s posSet) has(i int) bool { return s[i/64]&(1<<(uint(i)%64)) != 0 }
func (s posSet) empty() bool    { return s.count() == 0 }
func (s posSet) union(o posSet) {
	for i := range s {
		s[i] |= o[i]
	}
}
func (s posSet) minus(o posSet) {
	for i := range s {
		s[i] &^= o[i]
	}
}
func (s posSet) clone() posSet { return append(posSet(nil), s...) }
func (s posSet) each(fn func(int)) {
	for w, word := range s {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			fn(w*64 + b)
			word &^= 1 << uint(b)
		}
	}
}
func (s posSet) count() int {
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return n
}

// matcher matches one input string. Groups are evaluated once per start position and
// remembered, so nested quantifiers cost a polynomial in the input length, not a power of it.
type matcher struct {
	s    string
	memo map[*globNode][]posSet // group node → ends for each start position
}

// matchSeq returns the positions where nodes, started at any position of from, can end.
func (m *matcher) matchSeq(nodes []globNode, from posSet) posSet {
	cur := from
	for i := range nodes {
		cur = m.matchNode(&nodes[i], cur)
		if cur.empty() {
			return cur
		}
	}
	return cur
}

func (m *matcher) matchNode(n *globNode, from posSet) posSet {
	s := m.s
	out := newPosSet(len(s))
	switch n.kind {
	case gLit:
		from.each(func(p int) {
			if strings.HasPrefix(s[p:], n.lit) {
				out.add(p + len(n.lit))
			}
		})
	case gAnyChar, gClass:
		from.each(func(p int) {
			if p >= len(s) {
				return
			}
			r, size := utf8.DecodeRuneInString(s[p:])
			if r != '/' && (n.kind == gAnyChar || n.class.match(r)) {
				out.add(p + size)
			}
		})
	case gStar:
		// Sweep left to right: once a start is active, every later position up to the next
		// slash is reachable.
		active := false
		for p := 0; p <= len(s); p++ {
			if from.has(p) {
				active = true
			}
			if active {
				out.add(p)
			}
			if p < len(s) && s[p] == '/' {
				active = false
			}
		}
	case gStarSlash:
		active := false
		for p := 0; p <= len(s); p++ {
			if from.has(p) {
				active = true
				out.add(p)
			}
			if active && p < len(s) && s[p] == '/' {
				out.add(p + 1)
			}
		}
	case gSlashAll:
		from.each(func(p int) {
			out.add(p)
			if p < len(s) && s[p] == '/' {
				for q := p + 1; q <= len(s); q++ {
					out.add(q)
				}
			}
		})
	case gAll:
		active := false
		for p := 0; p <= len(s); p++ {
			active = active || from.has(p)
			if active {
				out.add(p)
			}
		}
	case gGroup:
		rel := m.relation(n)
		from.each(func(p int) { out.union(rel[p]) })
	}
	return out
}

// relation computes, for every start position, where the group can end.
func (m *matcher) relation(n *globNode) []posSet {
	if rel, ok := m.memo[n]; ok {
		return rel
	}
	s := m.s
	once := make([]posSet, len(s)+1) // one pass through one of the alternatives
	for p := range once {
		start := newPosSet(len(s))
		start.add(p)
		once[p] = newPosSet(len(s))
		for _, alt := range n.alts {
			once[p].union(m.matchSeq(alt, start))
		}
	}
	rel := make([]posSet, len(s)+1)
	for p := range rel {
		switch n.op {
		case '@':
			rel[p] = once[p]
		case '?':
			rel[p] = once[p].clone()
			rel[p].add(p)
		case '*', '+':
			// Repeat until no new end appears; only new positions go round again, so empty
			// matches cannot loop.
			reach := once[p].clone()
			frontier := once[p]
			for !frontier.empty() {
				next := newPosSet(len(s))
				frontier.each(func(q int) { next.union(once[q]) })
				next.minus(reach)
				reach.union(next)
				frontier = next
			}
			if n.op == '*' {
				reach.add(p)
			}
			rel[p] = reach
		case '!':
			rel[p] = newPosSet(len(s))
			for q := p; q <= len(s); q++ {
				if !once[p].has(q) {
					rel[p].add(q)
				}
				if q < len(s) && s[q] == '/' && !n.deep {
					break
				}
			}
		}
	}
	if m.memo == nil {
		m.memo = map[*globNode][]posSet{}
	}
	m.memo[n] = rel
	return rel
}

// pathFilter is an ifModify list: a path passes when it matches one of the positive patterns and
// none of the negative ones. A negative pattern starts with "!" and excludes what the rest of it
// matches, so "!(legacy/**)" excludes legacy/** and "!*.md" excludes *.md. A list of negatives
// only excludes from everything.
type pathFilter struct {
	include []*Glob
	exclude []*Glob
}

func compilePathFilter(patterns []string) (*pathFilter, error) {
	f := &pathFilter{}
	for _, pat := range patterns {
		neg := strings.HasPrefix(pat, "!")
		if neg {
			pat = pat[1:]
		}
		g, err := CompileGlob(pat)
		if err != nil {
			return nil, fmt.Errorf("pattern %q: %w", pat, err)
		}
		if neg {
			f.exclude = append(f.exclude, g)
		} else {
			f.include = append(f.include, g)
		}
	}
	return f, nil
}

func (f *pathFilter) match(path string) bool {
	path = strings.TrimPrefix(path, "./")
	in := len(f.include) == 0
	for _, g := range f.include {
		if g.Match(path) {
			in = true
			break
		}
	}
	if !in {
		return false
	}
	for _, g := range f.exclude {
		if g.Match(path) {
			return false
		}
	}
	return true
}
