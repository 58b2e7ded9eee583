package yamlpos

import (
	"fmt"
	"sort"
	"strings"

	"github.com/nimbus-build/nimbus/backend/pipeline/spec/internal/suggest"
)

// replay.go replays yaml.v3 (gopkg.in/yaml.v3 v3.0.1, scannerc.go and parserc.go) over a
// file it rejected, to learn which token it stopped at: yaml.v3 keeps that position to itself.
// It is a port of the structure only — indentation and the indent stack, simple keys and the
// 1024-character rule, flow levels, quoted and block scalars, anchors, tags, directives, the
// token lookahead yaml.v3's parser is given — and builds no values. Function by function it
// follows yaml.v3, quirks included (a key token for a key the parser has already taken is
// appended, as yaml.v3 does), because agreeing with yaml.v3 is the whole point: locate.go
// uses a replay's error only when it is the one yaml.v3 reported. Comments are skipped the way
// yaml.v3's comment scanner skips them, but not attached to anything; where yaml.v3's
// attaching of head comments changes the outcome (it can swallow a scanner error), the replay
// disagrees and locate.go falls back to yaml.v3's line. TestSyntaxReplayAgreesWithYAML
// checks the agreement on mutations of real files; it is the test to run when yaml.v3 changes.

// ymark is a place in the source: 0-based line and column, a character index (for yaml.v3's
// 1024-character limit on simple keys) and a byte offset. Columns count characters, as yaml.v3's
// node columns do.
type ymark struct {
	index, line, col, off int
}

type ytokKind uint8

const (
	ytStreamStart ytokKind = iota
	ytStreamEnd
	ytVersionDirective
	ytTagDirective
	ytDocumentStart
	ytDocumentEnd
	ytBlockSequenceStart
	ytBlockMappingStart
	ytBlockEnd
	ytFlowSequenceStart
	ytFlowSequenceEnd
	ytFlowMappingStart
	ytFlowMappingEnd
	ytBlockEntry
	ytFlowEntry
	ytKey
	ytValue
	ytAlias
	ytAnchor
	ytTag
	ytScalar
)

// ytok is a token of yaml.v3's scanner, with what the replay needs of it.
type ytok struct {
	kind  ytokKind
	start ymark
	end   int    // byte offset after a scalar
	value string // the name of an anchor or alias, the handle of a tag or %TAG directive
	plain bool   // a plain (unquoted) scalar

	major, minor int  // of a %YAML directive
	unmatched    bool // a ']' or '}' with no flow collection open
	blockIndent  int  // for '[' and '{': the block indentation where the collection opened
}

type ysimpleKey struct {
	possible, required bool
	tokenNumber        int
	mark               ymark
	inList             bool // a required key at the indentation of a list's items (for messages)
}

// yreplay holds the state of yaml.v3's scanner and parser, field for field where it matters.
type yreplay struct {
	src      []byte
	pos      int // byte offset of mark
	mark     ymark
	newlines int

	tokens    []ytok // the tokens from number base on; head is the next one the parser takes
	base      int
	head      int
	available bool
	started   bool

	flowLevel        int
	indent           int
	indents          []int
	blockKinds       []ytokKind // ytBlockSequenceStart or ytBlockMappingStart for each pushed indent
	simpleKeyAllowed bool
	simpleKeys       []ysimpleKey
	keysByTok        map[int]int

	anchors    map[string]bool
	tagHandles map[string]bool
	flows      []ytok // the flow collections the parser is inside
	keyInList  bool   // see ysimpleKey.inList

	err *yamlFault
}

// replayYAML runs the replay over src and returns its first error, or nil when it finds none.
func replayYAML(src []byte) *yamlFault {
	r := &yreplay{src: src, anchors: map[string]bool{}, tagHandles: map[string]bool{}}
	r.parseStream()
	return r.err
}

// Characters.

func (r *yreplay) at(i int) byte {
	if i < len(r.src) {
		return r.src[i]
	}
	return 0
}

func (r *yreplay) isBreak(i int) bool {
	switch r.at(i) {
	case '\r', '\n':
		return true
	case 0xC2:
		return r.at(i+1) == 0x85
	case 0xE2:
		return r.at(i+1) == 0x80 && (r.at(i+2) == 0xA8 || r.at(i+2) == 0xA9)
	}
	return false
}

func (r *yreplay) isZ(i int) bool      { return r.at(i) == 0 }
func (r *yreplay) isBlank(i int) bool  { return r.at(i) == ' ' || r.at(i) == '\t' }
func (r *yreplay) isBreakZ(i int) bool { return r.isBreak(i) || r.isZ(i) }
func (r *yreplay) isBlankZ(i int) bool { return r.isBlank(i) || r.isBreakZ(i) }

func isAlphaByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_' || c == '-'
}

func isHexByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'A' && c <= 'F' || c >= 'a' && c <= 'f'
}

func hexValue(c byte) int {
	switch {
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	}
	return int(c - '0')
}

// utf8Width is the length of the UTF-8 sequence that starts with b, as yaml.v3 computes it.
func utf8Width(b byte) int {
	switch {
	case b&0x80 == 0:
		return 1
	case b&0xE0 == 0xC0:
		return 2
	case b&0xF0 == 0xE0:
		return 3
	case b&0xF8 == 0xF0:
		return 4
	}
	return 0
}

func (r *yreplay) skip() {
	if r.pos >= len(r.src) {
		return
	}
	if !r.isBlank(r.pos) {
		r.newlines = 0
	}
	r.mark.index++
	r.mark.col++
	w := utf8Width(r.src[r.pos])
	if w == 0 {
		w = 1
	}
	r.pos = min(r.pos+w, len(r.src))
	r.mark.off = r.pos
}

func (r *yreplay) skipLine() {
	switch {
	case r.at(r.pos) == '\r' && r.at(r.pos+1) == '\n':
		r.pos += 2
		r.mark.index += 2
	case r.isBreak(r.pos):
		r.pos += utf8Width(r.src[r.pos])
		r.mark.index++
	default:
		return
	}
	r.mark.col = 0
	r.mark.line++
	r.mark.off = r.pos
	r.newlines++
}

// Errors.

func (r *yreplay) scanError(context ymark, problem string) bool {
	r.err = &yamlFault{problem: problem, kind: faultScanner, contextMark: context, problemMark: r.mark, hasContext: true}
	r.describeScanError()
	return false
}

func (r *yreplay) parserError(context *ymark, problem string, t ytok) bool {
	f := &yamlFault{problem: problem, kind: faultParser, problemMark: t.start, at: t.start}
	if context != nil {
		f.contextMark, f.hasContext = *context, true
	}
	r.err = f
	r.describeParserError(t)
	return false
}

// Tokens.

// total is the number of tokens scanned so far, and the number the next one gets.
func (r *yreplay) total() int { return r.base + len(r.tokens) }

// insert puts t at token number, or at the end when that token was already taken by the parser
// (yaml.v3 then appends it too).
func (r *yreplay) insert(number int, t ytok) {
	if number < r.head || number >= r.total() {
		r.tokens = append(r.tokens, t)
		return
	}
	i := number - r.base
	r.tokens = append(r.tokens, ytok{})
	copy(r.tokens[i+1:], r.tokens[i:])
	r.tokens[i] = t
}

func (r *yreplay) add(t ytok) { r.tokens = append(r.tokens, t) }

// peek returns the next token, scanning as far ahead as yaml.v3 does before it hands the parser
// a token (so a scanner error just past a parser error wins, as it does there).
func (r *yreplay) peek() (ytok, bool) {
	if r.err != nil {
		return ytok{}, false
	}
	if !r.available {
		if !r.fetchMore() {
			return ytok{}, false
		}
	}
	return r.tokens[r.head-r.base], true
}

func (r *yreplay) skipToken() {
	r.available = false
	r.head++
	if r.head-r.base > 4096 {
		// Drop the tokens the parser has taken, all but the last (messages look at it).
		n := copy(r.tokens, r.tokens[r.head-1-r.base:])
		r.tokens = r.tokens[:n]
		r.base = r.head - 1
	}
}

// previous is the token the parser took last.
func (r *yreplay) previous() ytok { return r.tokens[r.head-1-r.base] }

func (r *yreplay) fetchMore() bool {
	for {
		if r.head < r.total()-2 {
			i, ok := r.keysByTok[r.head]
			if !ok || i >= len(r.simpleKeys) {
				break
			}
			valid, ok := r.keyValid(&r.simpleKeys[i])
			if !ok {
				return false
			}
			if !valid {
				break
			}
		}
		if !r.fetchNext() {
			return false
		}
	}
	r.available = true
	return true
}

// The scanner: yaml_parser_fetch_next_token and what it calls.

func (r *yreplay) fetchNext() bool {
	if !r.started {
		r.started = true
		r.indent = -1
		r.simpleKeys = []ysimpleKey{{}}
		r.keysByTok = map[int]int{}
		r.simpleKeyAllowed = true
		r.add(ytok{kind: ytStreamStart, start: r.mark})
		return true
	}
	r.scanToNextToken()
	r.unrollIndent(r.mark.col)
	p := r.pos
	if r.isZ(p) {
		return r.fetchStreamEnd()
	}
	c := r.at(p)
	if r.mark.col == 0 && c == '%' {
		return r.fetchDirective()
	}
	if r.mark.col == 0 && r.isBlankZ(p+3) {
		if c == '-' && r.at(p+1) == '-' && r.at(p+2) == '-' {
			return r.fetchDocumentIndicator(ytDocumentStart)
		}
		if c == '.' && r.at(p+1) == '.' && r.at(p+2) == '.' {
			return r.fetchDocumentIndicator(ytDocumentEnd)
		}
	}
	var ok bool
	switch {
	case c == '[':
		ok = r.fetchFlowStart(ytFlowSequenceStart)
	case c == '{':
		ok = r.fetchFlowStart(ytFlowMappingStart)
	case c == ']':
		ok = r.fetchFlowEnd(ytFlowSequenceEnd)
	case c == '}':
		ok = r.fetchFlowEnd(ytFlowMappingEnd)
	case c == ',':
		ok = r.fetchFlowEntry()
	case c == '-' && r.isBlankZ(p+1):
		ok = r.fetchBlockEntry()
	case c == '?' && (r.flowLevel > 0 || r.isBlankZ(p+1)):
		ok = r.fetchKey()
	case c == ':' && (r.flowLevel > 0 || r.isBlankZ(p+1)):
		ok = r.fetchValue()
	case c == '*':
		ok = r.fetchAnchor(ytAlias)
	case c == '&':
		ok = r.fetchAnchor(ytAnchor)
	case c == '!':
		ok = r.fetchTag()
	case (c == '|' || c == '>') && r.flowLevel == 0:
		ok = r.fetchBlockScalar()
	case c == '\'' || c == '"':
		ok = r.fetchQuoted(c == '\'')
	case !(r.isBlankZ(p) || strings.IndexByte("-?:,[]{}#&*!|>'\"%@`", c) >= 0) ||
		c == '-' && !r.isBlank(p+1) ||
		r.flowLevel == 0 && (c == '?' || c == ':') && !r.isBlankZ(p+1):
		ok = r.fetchPlain()
	default:
		return r.scanError(r.mark, "found character that cannot start any token")
	}
	if ok && r.tokens[len(r.tokens)-1].kind != ytBlockEntry {
		r.scanLineComment()
	}
	return ok
}

// scanLineComment consumes a comment that follows a token on its line.
func (r *yreplay) scanLineComment() {
	if r.newlines > 0 {
		return
	}
	for peek := 0; peek < 512; peek++ {
		if r.isBlank(r.pos + peek) {
			continue
		}
		if r.at(r.pos+peek) == '#' {
			for !r.isBreakZ(r.pos) {
				r.skip()
			}
		}
		return
	}
}

func (r *yreplay) scanToNextToken() {
	for {
		for r.at(r.pos) == ' ' || (r.flowLevel > 0 || !r.simpleKeyAllowed) && r.at(r.pos) == '\t' {
			r.skip()
		}
		if r.at(r.pos) == '#' {
			r.scanComments()
		}
		if !r.isBreak(r.pos) {
			return
		}
		r.skipLine()
		if r.flowLevel == 0 {
			r.simpleKeyAllowed = true
		}
	}
}

// scanComments consumes a comment and the comments after it, across blank lines (yaml.v3 looks
// up to 512 bytes ahead for the next '#', over spaces, tabs and line breaks).
func (r *yreplay) scanComments() {
	for {
		for !r.isBreakZ(r.pos) {
			r.skip()
		}
		next := -1
		for peek := 1; peek < 512; peek++ {
			p := r.pos + peek
			if r.isBlank(p) || r.isBreak(p) {
				continue
			}
			if r.at(p) == '#' {
				next = p
			}
			break
		}
		if next < 0 {
			return
		}
		for r.pos < next {
			if r.isBreak(r.pos) {
				r.skipLine()
			} else {
				r.skip()
			}
		}
	}
}

func (r *yreplay) keyValid(k *ysimpleKey) (valid, ok bool) {
	if !k.possible {
		return false, true
	}
	if k.mark.line < r.mark.line || k.mark.index+1024 < r.mark.index {
		if k.required {
			return false, r.missingColon(k)
		}
		k.possible = false
		return false, true
	}
	return true, true
}

func (r *yreplay) saveSimpleKey() bool {
	required := r.flowLevel == 0 && r.indent == r.mark.col
	if r.simpleKeyAllowed {
		k := ysimpleKey{possible: true, required: required, tokenNumber: r.total(), mark: r.mark,
			inList: required && len(r.blockKinds) > 0 && r.blockKinds[len(r.blockKinds)-1] == ytBlockSequenceStart}
		if !r.removeSimpleKey() {
			return false
		}
		r.simpleKeys[len(r.simpleKeys)-1] = k
		r.keysByTok[k.tokenNumber] = len(r.simpleKeys) - 1
	}
	return true
}

// missingColon fails on a simple key that yaml.v3 requires (it is at the block's indentation)
// and that turned out to have no ':'.
func (r *yreplay) missingColon(k *ysimpleKey) bool {
	r.keyInList = k.inList
	return r.scanError(k.mark, "could not find expected ':'")
}

func (r *yreplay) removeSimpleKey() bool {
	k := &r.simpleKeys[len(r.simpleKeys)-1]
	if k.possible {
		if k.required {
			return r.missingColon(k)
		}
		k.possible = false
		delete(r.keysByTok, k.tokenNumber)
	}
	return true
}

const yamlMaxDepth = 10000 // yaml.v3's max_flow_level and max_indents

func (r *yreplay) increaseFlowLevel() bool {
	r.simpleKeys = append(r.simpleKeys, ysimpleKey{tokenNumber: r.total(), mark: r.mark})
	r.flowLevel++
	if r.flowLevel > yamlMaxDepth {
		return r.scanError(r.simpleKeys[len(r.simpleKeys)-1].mark, fmt.Sprintf("exceeded max depth of %d", yamlMaxDepth))
	}
	return true
}

func (r *yreplay) decreaseFlowLevel() {
	if r.flowLevel > 0 {
		r.flowLevel--
		last := len(r.simpleKeys) - 1
		delete(r.keysByTok, r.simpleKeys[last].tokenNumber)
		r.simpleKeys = r.simpleKeys[:last]
	}
}

func (r *yreplay) rollIndent(col, number int, kind ytokKind, m ymark) bool {
	if r.flowLevel > 0 {
		return true
	}
	if r.indent < col {
		r.indents = append(r.indents, r.indent)
		r.blockKinds = append(r.blockKinds, kind)
		r.indent = col
		if len(r.indents) > yamlMaxDepth {
			return r.scanError(r.simpleKeys[len(r.simpleKeys)-1].mark, fmt.Sprintf("exceeded max depth of %d", yamlMaxDepth))
		}
		r.insert(number, ytok{kind: kind, start: m})
	}
	return true
}

func (r *yreplay) unrollIndent(col int) {
	if r.flowLevel > 0 {
		return
	}
	for r.indent > col {
		r.add(ytok{kind: ytBlockEnd, start: r.mark})
		r.indent = r.indents[len(r.indents)-1]
		r.indents = r.indents[:len(r.indents)-1]
		r.blockKinds = r.blockKinds[:len(r.blockKinds)-1]
	}
}

func (r *yreplay) fetchStreamEnd() bool {
	if r.mark.col != 0 {
		r.mark.col = 0
		r.mark.line++
	}
	r.unrollIndent(-1)
	if !r.removeSimpleKey() {
		return false
	}
	r.simpleKeyAllowed = false
	r.add(ytok{kind: ytStreamEnd, start: r.mark})
	return true
}

func (r *yreplay) fetchDocumentIndicator(kind ytokKind) bool {
	r.unrollIndent(-1)
	if !r.removeSimpleKey() {
		return false
	}
	r.simpleKeyAllowed = false
	start := r.mark
	r.skip()
	r.skip()
	r.skip()
	r.add(ytok{kind: kind, start: start})
	return true
}

func (r *yreplay) fetchFlowStart(kind ytokKind) bool {
	if !r.saveSimpleKey() {
		return false
	}
	t := ytok{kind: kind, start: r.mark, blockIndent: r.indent}
	if !r.increaseFlowLevel() {
		return false
	}
	r.simpleKeyAllowed = true
	r.skip()
	r.add(t)
	return true
}

func (r *yreplay) fetchFlowEnd(kind ytokKind) bool {
	if !r.removeSimpleKey() {
		return false
	}
	t := ytok{kind: kind, start: r.mark, unmatched: r.flowLevel == 0}
	r.decreaseFlowLevel()
	r.simpleKeyAllowed = false
	r.skip()
	r.add(t)
	return true
}

func (r *yreplay) fetchFlowEntry() bool {
	if !r.removeSimpleKey() {
		return false
	}
	r.simpleKeyAllowed = true
	t := ytok{kind: ytFlowEntry, start: r.mark}
	r.skip()
	r.add(t)
	return true
}

func (r *yreplay) fetchBlockEntry() bool {
	if r.flowLevel == 0 {
		if !r.simpleKeyAllowed {
			return r.scanError(r.mark, "block sequence entries are not allowed in this context")
		}
		if !r.rollIndent(r.mark.col, -1, ytBlockSequenceStart, r.mark) {
			return false
		}
	}
	if !r.removeSimpleKey() {
		return false
	}
	r.simpleKeyAllowed = true
	t := ytok{kind: ytBlockEntry, start: r.mark}
	r.skip()
	r.add(t)
	return true
}

func (r *yreplay) fetchKey() bool {
	if r.flowLevel == 0 {
		if !r.simpleKeyAllowed {
			return r.scanError(r.mark, "mapping keys are not allowed in this context")
		}
		if !r.rollIndent(r.mark.col, -1, ytBlockMappingStart, r.mark) {
			return false
		}
	}
	if !r.removeSimpleKey() {
		return false
	}
	r.simpleKeyAllowed = r.flowLevel == 0
	t := ytok{kind: ytKey, start: r.mark}
	r.skip()
	r.add(t)
	return true
}

func (r *yreplay) fetchValue() bool {
	k := &r.simpleKeys[len(r.simpleKeys)-1]
	valid, ok := r.keyValid(k)
	if !ok {
		return false
	}
	if valid {
		r.insert(k.tokenNumber, ytok{kind: ytKey, start: k.mark})
		if !r.rollIndent(k.mark.col, k.tokenNumber, ytBlockMappingStart, k.mark) {
			return false
		}
		k = &r.simpleKeys[len(r.simpleKeys)-1]
		k.possible = false
		delete(r.keysByTok, k.tokenNumber)
		r.simpleKeyAllowed = false
	} else {
		if r.flowLevel == 0 {
			if !r.simpleKeyAllowed {
				return r.scanError(r.mark, "mapping values are not allowed in this context")
			}
			if !r.rollIndent(r.mark.col, -1, ytBlockMappingStart, r.mark) {
				return false
			}
		}
		r.simpleKeyAllowed = r.flowLevel == 0
	}
	t := ytok{kind: ytValue, start: r.mark}
	r.skip()
	r.add(t)
	return true
}

func (r *yreplay) fetchAnchor(kind ytokKind) bool {
	if !r.saveSimpleKey() {
		return false
	}
	r.simpleKeyAllowed = false
	start := r.mark
	r.skip()
	from := r.pos
	for isAlphaByte(r.at(r.pos)) {
		r.skip()
	}
	name := string(r.src[from:r.pos])
	c := r.at(r.pos)
	if name == "" || !(r.isBlankZ(r.pos) || strings.IndexByte("?:,]}%@`", c) >= 0) {
		return r.scanError(start, "did not find expected alphabetic or numeric character")
	}
	r.add(ytok{kind: kind, start: start, value: name})
	return true
}

func (r *yreplay) fetchTag() bool {
	if !r.saveSimpleKey() {
		return false
	}
	r.simpleKeyAllowed = false
	start := r.mark
	var handle string
	if r.at(r.pos+1) == '<' {
		r.skip()
		r.skip()
		if !r.scanTagURI(false, "", start) {
			return false
		}
		if r.at(r.pos) != '>' {
			return r.scanError(start, "did not find the expected '>'")
		}
		r.skip()
	} else {
		h, ok := r.scanTagHandle(false, start)
		if !ok {
			return false
		}
		if len(h) > 1 && h[0] == '!' && h[len(h)-1] == '!' {
			handle = h
			if !r.scanTagURI(false, "", start) {
				return false
			}
		} else {
			// Not a handle after all: it is the start of the suffix, and the handle is '!'.
			from := r.pos
			if !r.scanTagURI(false, h, start) {
				return false
			}
			handle = "!"
			if len(h) <= 1 && r.pos == from {
				handle = "" // the tag '!' alone
			}
		}
	}
	if !r.isBlankZ(r.pos) {
		return r.scanError(start, "did not find expected whitespace or line break")
	}
	r.add(ytok{kind: ytTag, start: start, value: handle})
	return true
}

func (r *yreplay) scanTagHandle(directive bool, start ymark) (string, bool) {
	if r.at(r.pos) != '!' {
		return "", r.scanError(start, "did not find expected '!'")
	}
	from := r.pos
	r.skip()
	for isAlphaByte(r.at(r.pos)) {
		r.skip()
	}
	if r.at(r.pos) == '!' {
		r.skip()
	} else if directive && r.pos-from != 1 {
		return "", r.scanError(start, "did not find expected '!'")
	}
	return string(r.src[from:r.pos]), true
}

func (r *yreplay) scanTagURI(directive bool, head string, start ymark) bool {
	hasTag := head != ""
	for {
		c := r.at(r.pos)
		if !isAlphaByte(c) && strings.IndexByte(";/?:@&=+$,.!~*'()[]%", c) < 0 {
			break
		}
		if c == '%' {
			if !r.scanURIEscapes(start) {
				return false
			}
		} else {
			r.skip()
		}
		hasTag = true
	}
	if !hasTag {
		return r.scanError(start, "did not find expected tag URI")
	}
	return true
}

func (r *yreplay) scanURIEscapes(start ymark) bool {
	w := 1024
	for w > 0 {
		if !(r.at(r.pos) == '%' && isHexByte(r.at(r.pos+1)) && isHexByte(r.at(r.pos+2))) {
			return r.scanError(start, "did not find URI escaped octet")
		}
		octet := byte(hexValue(r.at(r.pos+1))<<4 + hexValue(r.at(r.pos+2)))
		if w == 1024 {
			w = utf8Width(octet)
			if w == 0 {
				return r.scanError(start, "found an incorrect leading UTF-8 octet")
			}
		} else if octet&0xC0 != 0x80 {
			return r.scanError(start, "found an incorrect trailing UTF-8 octet")
		}
		r.skip()
		r.skip()
		r.skip()
		w--
	}
	return true
}

func (r *yreplay) fetchDirective() bool {
	r.unrollIndent(-1)
	if !r.removeSimpleKey() {
		return false
	}
	r.simpleKeyAllowed = false
	start := r.mark
	r.skip()
	from := r.pos
	for isAlphaByte(r.at(r.pos)) {
		r.skip()
	}
	name := string(r.src[from:r.pos])
	if name == "" {
		return r.scanError(start, "could not find expected directive name")
	}
	if !r.isBlankZ(r.pos) {
		return r.scanError(start, "found unexpected non-alphabetical character")
	}
	t := ytok{start: start, value: name}
	switch name {
	case "YAML":
		t.kind = ytVersionDirective
		for r.isBlank(r.pos) {
			r.skip()
		}
		var ok bool
		if t.major, ok = r.scanVersionNumber(start); !ok {
			return false
		}
		if r.at(r.pos) != '.' {
			return r.scanError(start, "did not find expected digit or '.' character")
		}
		r.skip()
		if t.minor, ok = r.scanVersionNumber(start); !ok {
			return false
		}
	case "TAG":
		t.kind = ytTagDirective
		for r.isBlank(r.pos) {
			r.skip()
		}
		h, ok := r.scanTagHandle(true, start)
		if !ok {
			return false
		}
		t.value = h
		if !r.isBlank(r.pos) {
			return r.scanError(start, "did not find expected whitespace")
		}
		for r.isBlank(r.pos) {
			r.skip()
		}
		if !r.scanTagURI(true, "", start) {
			return false
		}
		if !r.isBlankZ(r.pos) {
			return r.scanError(start, "did not find expected whitespace or line break")
		}
	default:
		return r.scanError(start, "found unknown directive name")
	}
	for r.isBlank(r.pos) {
		r.skip()
	}
	if r.at(r.pos) == '#' {
		for !r.isBreakZ(r.pos) {
			r.skip()
		}
	}
	if !r.isBreakZ(r.pos) {
		return r.scanError(start, "did not find expected comment or line break")
	}
	r.skipLine()
	r.add(t)
	return true
}

func (r *yreplay) scanVersionNumber(start ymark) (int, bool) {
	value, length := 0, 0
	for c := r.at(r.pos); c >= '0' && c <= '9'; c = r.at(r.pos) {
		length++
		if length > 2 {
			return 0, r.scanError(start, "found extremely long version number")
		}
		value = value*10 + int(c-'0')
		r.skip()
	}
	if length == 0 {
		return 0, r.scanError(start, "did not find expected version number")
	}
	return value, true
}

func (r *yreplay) fetchBlockScalar() bool {
	if !r.removeSimpleKey() {
		return false
	}
	r.simpleKeyAllowed = true
	start := r.mark
	r.skip()
	increment := 0
	digit := func() bool {
		if c := r.at(r.pos); c >= '0' && c <= '9' {
			if c == '0' {
				return r.scanError(start, "found an indentation indicator equal to 0")
			}
			increment = int(c - '0')
			r.skip()
		}
		return true
	}
	if c := r.at(r.pos); c == '+' || c == '-' {
		r.skip()
		if !digit() {
			return false
		}
	} else if c >= '0' && c <= '9' {
		if !digit() {
			return false
		}
		if c := r.at(r.pos); c == '+' || c == '-' {
			r.skip()
		}
	}
	for r.isBlank(r.pos) {
		r.skip()
	}
	if r.at(r.pos) == '#' {
		for !r.isBreakZ(r.pos) {
			r.skip()
		}
	}
	if !r.isBreakZ(r.pos) {
		return r.scanError(start, "did not find expected comment or line break")
	}
	r.skipLine()
	indent := 0
	if increment > 0 {
		if r.indent >= 0 {
			indent = r.indent + increment
		} else {
			indent = increment
		}
	}
	if !r.blockScalarBreaks(&indent, start) {
		return false
	}
	for r.mark.col == indent && !r.isZ(r.pos) {
		for !r.isBreakZ(r.pos) {
			r.skip()
		}
		r.skipLine()
		if !r.blockScalarBreaks(&indent, start) {
			return false
		}
	}
	r.add(ytok{kind: ytScalar, start: start, end: r.pos})
	return true
}

func (r *yreplay) blockScalarBreaks(indent *int, start ymark) bool {
	maxIndent := 0
	for {
		for (*indent == 0 || r.mark.col < *indent) && r.at(r.pos) == ' ' {
			r.skip()
		}
		maxIndent = max(maxIndent, r.mark.col)
		if (*indent == 0 || r.mark.col < *indent) && r.at(r.pos) == '\t' {
			return r.scanError(start, "found a tab character where an indentation space is expected")
		}
		if !r.isBreak(r.pos) {
			break
		}
		r.skipLine()
	}
	if *indent == 0 {
		*indent = max(maxIndent, r.indent+1, 1)
	}
	return true
}

func (r *yreplay) fetchQuoted(single bool) bool {
	if !r.saveSimpleKey() {
		return false
	}
	r.simpleKeyAllowed = false
	start := r.mark
	r.skip()
	for {
		p := r.pos
		if r.mark.col == 0 && r.isBlankZ(p+3) &&
			(r.at(p) == '-' && r.at(p+1) == '-' && r.at(p+2) == '-' || r.at(p) == '.' && r.at(p+1) == '.' && r.at(p+2) == '.') {
			return r.scanError(start, "found unexpected document indicator")
		}
		if r.isZ(r.pos) {
			return r.scanError(start, "found unexpected end of stream")
		}
		for !r.isBlankZ(r.pos) {
			c := r.at(r.pos)
			if single && c == '\'' && r.at(r.pos+1) == '\'' {
				r.skip()
				r.skip()
				continue
			}
			if single && c == '\'' || !single && c == '"' {
				break
			}
			if !single && c == '\\' && r.isBreak(r.pos+1) {
				r.skip()
				r.skipLine()
				break
			}
			if !single && c == '\\' {
				n := 0
				switch r.at(r.pos + 1) {
				case '0', 'a', 'b', 't', '\t', 'n', 'v', 'f', 'r', 'e', ' ', '"', '\'', '\\', 'N', '_', 'L', 'P':
				case 'x':
					n = 2
				case 'u':
					n = 4
				case 'U':
					n = 8
				default:
					return r.scanError(start, "found unknown escape character")
				}
				r.skip()
				r.skip()
				if n > 0 {
					value := 0
					for k := 0; k < n; k++ {
						if !isHexByte(r.at(r.pos + k)) {
							return r.scanError(start, "did not find expected hexdecimal number")
						}
						value = value<<4 + hexValue(r.at(r.pos+k))
					}
					if value >= 0xD800 && value <= 0xDFFF || value > 0x10FFFF {
						return r.scanError(start, "found invalid Unicode character escape code")
					}
					for k := 0; k < n; k++ {
						r.skip()
					}
				}
				continue
			}
			r.skip()
		}
		if c := r.at(r.pos); single && c == '\'' || !single && c == '"' {
			break
		}
		for r.isBlank(r.pos) || r.isBreak(r.pos) {
			if r.isBlank(r.pos) {
				r.skip()
			} else {
				r.skipLine()
			}
		}
	}
	r.skip()
	r.add(ytok{kind: ytScalar, start: start, end: r.pos})
	return true
}

func (r *yreplay) fetchPlain() bool {
	if !r.saveSimpleKey() {
		return false
	}
	r.simpleKeyAllowed = false
	indent := r.indent + 1
	start := r.mark
	end := r.pos
	leadingBlanks := false
	for {
		p := r.pos
		if r.mark.col == 0 && r.isBlankZ(p+3) &&
			(r.at(p) == '-' && r.at(p+1) == '-' && r.at(p+2) == '-' || r.at(p) == '.' && r.at(p+1) == '.' && r.at(p+2) == '.') {
			break
		}
		if r.at(r.pos) == '#' {
			break
		}
		for !r.isBlankZ(r.pos) {
			c := r.at(r.pos)
			if c == ':' && r.isBlankZ(r.pos+1) || r.flowLevel > 0 && strings.IndexByte(",?[]{}", c) >= 0 {
				break
			}
			leadingBlanks = false
			r.skip()
			end = r.pos
		}
		if !r.isBlank(r.pos) && !r.isBreak(r.pos) {
			break
		}
		for r.isBlank(r.pos) || r.isBreak(r.pos) {
			if r.isBlank(r.pos) {
				if leadingBlanks && r.mark.col < indent && r.at(r.pos) == '\t' {
					return r.scanError(start, "found a tab character that violates indentation")
				}
				r.skip()
			} else {
				r.skipLine()
				leadingBlanks = true
			}
		}
		if r.flowLevel == 0 && r.mark.col < indent {
			break
		}
	}
	r.add(ytok{kind: ytScalar, start: start, end: end, plain: true})
	if leadingBlanks {
		r.simpleKeyAllowed = true
	}
	return true
}

// The parser: yaml_parser_parse's states, as recursive descent, for the first document (all
// yaml.Unmarshal reads).

func (r *yreplay) parseStream() {
	if _, ok := r.peek(); !ok {
		return
	}
	r.skipToken() // STREAM-START
	t, ok := r.peek()
	if !ok {
		return
	}
	switch t.kind {
	case ytStreamEnd:
		return
	case ytVersionDirective, ytTagDirective, ytDocumentStart:
		if !r.processDirectives() {
			return
		}
		if t, ok = r.peek(); !ok {
			return
		}
		if t.kind != ytDocumentStart {
			r.parserError(nil, "did not find expected <document start>", t)
			return
		}
		r.skipToken()
		if t, ok = r.peek(); !ok {
			return
		}
		switch t.kind {
		case ytVersionDirective, ytTagDirective, ytDocumentStart, ytDocumentEnd, ytStreamEnd:
		default:
			if !r.parseNode(true, false) {
				return
			}
		}
	default:
		if !r.processDirectives() || !r.parseNode(true, false) {
			return
		}
	}
	r.peek() // the end of the document looks at the next token
}

func (r *yreplay) processDirectives() bool {
	version := false
	for {
		t, ok := r.peek()
		if !ok {
			return false
		}
		if t.kind == ytVersionDirective {
			if version {
				return r.parserError(nil, "found duplicate %YAML directive", t)
			}
			if t.major != 1 || t.minor != 1 {
				return r.parserError(nil, "found incompatible YAML document", t)
			}
			version = true
		} else if t.kind == ytTagDirective {
			if r.tagHandles[t.value] {
				return r.parserError(nil, "found duplicate %TAG directive", t)
			}
			r.tagHandles[t.value] = true
		} else {
			break
		}
		r.skipToken()
	}
	r.tagHandles["!"] = true
	r.tagHandles["!!"] = true
	return true
}

func (r *yreplay) parseNode(block, indentless bool) bool {
	t, ok := r.peek()
	if !ok {
		return false
	}
	if t.kind == ytAlias {
		r.skipToken()
		if !r.anchors[t.value] {
			r.err = &yamlFault{problem: fmt.Sprintf("unknown anchor '%s' referenced", t.value), kind: faultDecoder, at: t.start,
				msg:  fmt.Sprintf("alias *%s refers to no anchor: &%s is not defined before it", t.value, t.value),
				hint: suggest.Hint(t.value, sortedKeys(r.anchors))}
			return false
		}
		return true
	}
	start := t.start
	anchor, tagged := "", false
	var tag ytok
	if t.kind == ytAnchor {
		anchor = t.value
		r.skipToken()
		if t, ok = r.peek(); !ok {
			return false
		}
		if t.kind == ytTag {
			tag, tagged = t, true
			r.skipToken()
			if t, ok = r.peek(); !ok {
				return false
			}
		}
	} else if t.kind == ytTag {
		tag, tagged = t, true
		r.skipToken()
		if t, ok = r.peek(); !ok {
			return false
		}
		if t.kind == ytAnchor {
			anchor = t.value
			r.skipToken()
			if t, ok = r.peek(); !ok {
				return false
			}
		}
	}
	if tagged && tag.value != "" && !r.tagHandles[tag.value] {
		return r.parserError(&start, "found undefined tag handle", tag)
	}
	if anchor != "" {
		r.anchors[anchor] = true
	}
	switch {
	case indentless && t.kind == ytBlockEntry:
		return r.parseIndentlessSequence()
	case t.kind == ytScalar:
		r.skipToken()
		return true
	case t.kind == ytFlowSequenceStart:
		return r.parseFlowSequence()
	case t.kind == ytFlowMappingStart:
		return r.parseFlowMapping()
	case block && t.kind == ytBlockSequenceStart:
		return r.parseBlockSequence()
	case block && t.kind == ytBlockMappingStart:
		return r.parseBlockMapping()
	case anchor != "" || tagged:
		return true // an empty value
	}
	return r.parserError(&start, "did not find expected node content", t)
}

// parseNodeUnless parses a node unless the next token is one of kinds (an empty value).
func (r *yreplay) parseNodeUnless(block, indentless bool, kinds ...ytokKind) bool {
	t, ok := r.peek()
	if !ok {
		return false
	}
	for _, k := range kinds {
		if t.kind == k {
			return true
		}
	}
	return r.parseNode(block, indentless)
}

func (r *yreplay) parseBlockSequence() bool {
	start, _ := r.peek()
	r.skipToken()
	for {
		t, ok := r.peek()
		if !ok {
			return false
		}
		switch t.kind {
		case ytBlockEntry:
			r.skipToken()
			if !r.parseNodeUnless(true, false, ytBlockEntry, ytBlockEnd) {
				return false
			}
		case ytBlockEnd:
			r.skipToken()
			return true
		default:
			return r.parserError(&start.start, "did not find expected '-' indicator", t)
		}
	}
}

func (r *yreplay) parseIndentlessSequence() bool {
	for {
		t, ok := r.peek()
		if !ok {
			return false
		}
		if t.kind != ytBlockEntry {
			return true
		}
		r.skipToken()
		if !r.parseNodeUnless(true, false, ytBlockEntry, ytKey, ytValue, ytBlockEnd) {
			return false
		}
	}
}

func (r *yreplay) parseBlockMapping() bool {
	start, _ := r.peek()
	r.skipToken()
	for {
		t, ok := r.peek()
		if !ok {
			return false
		}
		switch t.kind {
		case ytKey:
			r.skipToken()
			if !r.parseNodeUnless(true, true, ytKey, ytValue, ytBlockEnd) {
				return false
			}
			if t, ok = r.peek(); !ok {
				return false
			}
			if t.kind == ytValue {
				r.skipToken()
				if !r.parseNodeUnless(true, true, ytKey, ytValue, ytBlockEnd) {
					return false
				}
			}
		case ytBlockEnd:
			r.skipToken()
			return true
		default:
			return r.parserError(&start.start, "did not find expected key", t)
		}
	}
}

func (r *yreplay) parseFlowSequence() bool {
	start, _ := r.peek()
	r.skipToken()
	r.flows = append(r.flows, start)
	for first := true; ; first = false {
		t, ok := r.peek()
		if !ok {
			return false
		}
		if t.kind != ytFlowSequenceEnd && !first {
			if t.kind != ytFlowEntry {
				return r.parserError(&start.start, "did not find expected ',' or ']'", t)
			}
			r.skipToken()
			if t, ok = r.peek(); !ok {
				return false
			}
		}
		if t.kind == ytFlowSequenceEnd {
			r.skipToken()
			r.flows = r.flows[:len(r.flows)-1]
			return true
		}
		if t.kind != ytKey {
			if !r.parseNode(false, false) {
				return false
			}
			continue
		}
		// A single-pair mapping: [a: b].
		r.skipToken()
		if t, ok = r.peek(); !ok {
			return false
		}
		if t.kind != ytValue && t.kind != ytFlowEntry && t.kind != ytFlowSequenceEnd {
			if !r.parseNode(false, false) {
				return false
			}
		} else {
			r.skipToken() // as yaml.v3 does
		}
		if t, ok = r.peek(); !ok {
			return false
		}
		if t.kind == ytValue {
			r.skipToken()
			if !r.parseNodeUnless(false, false, ytFlowEntry, ytFlowSequenceEnd) {
				return false
			}
		}
	}
}

func (r *yreplay) parseFlowMapping() bool {
	start, _ := r.peek()
	r.skipToken()
	r.flows = append(r.flows, start)
	for first := true; ; first = false {
		t, ok := r.peek()
		if !ok {
			return false
		}
		if t.kind != ytFlowMappingEnd && !first {
			if t.kind != ytFlowEntry {
				return r.parserError(&start.start, "did not find expected ',' or '}'", t)
			}
			r.skipToken()
			if t, ok = r.peek(); !ok {
				return false
			}
		}
		if t.kind == ytFlowMappingEnd {
			r.skipToken()
			r.flows = r.flows[:len(r.flows)-1]
			return true
		}
		if t.kind != ytKey {
			// A key with no ':' and no value.
			if !r.parseNode(false, false) {
				return false
			}
			continue
		}
		r.skipToken()
		if !r.parseNodeUnless(false, false, ytValue, ytFlowEntry, ytFlowMappingEnd) {
			return false
		}
		if t, ok = r.peek(); !ok {
			return false
		}
		if t.kind == ytValue {
			r.skipToken()
			if !r.parseNodeUnless(false, false, ytFlowEntry, ytFlowMappingEnd) {
				return false
			}
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
