// Package yamlpos says where a YAML syntax error is, and what it is, in words, for a file
// yaml.v3 rejected: yaml.v3 names no column, and the line it names is the line where the
// enclosing block or flow collection started (counted from 0 for its parser's errors, from 1
// for its scanner's), or none at all. Locate is the whole API; spec calls it
// only for a file that does not parse, so valid files never pay for it. README.md draws how.
package yamlpos

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Once yaml.v3 has rejected a file, replayYAML (replay.go) runs yaml.v3's scanner and parser
// over the same bytes up to the first error, and so learns the token yaml.v3 stopped at. The
// replay's error is used only when it is yaml.v3's (the same problem, and the line yaml.v3's
// message names); otherwise the error keeps yaml.v3's line. A file that parses is never
// replayed.

// Located is a YAML syntax error found in the text: a 1-based line and column (0 when unknown),
// what is wrong in words, and what to do about it ("" when there is nothing to add).
type Located struct {
	Line, Column int
	Msg, Hint    string
}

var yamlErrLineRe = regexp.MustCompile(`^line (\d+): `)

// splitYAMLError returns yaml.v3's problem text and the line number in its message (0 when the
// message has none), as yaml.v3 printed it.
func splitYAMLError(err error) (problem string, line int) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	if m := yamlErrLineRe.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	}
	return msg, line
}

// Locate turns the error yaml.v3 returned for src into a position, a message and a hint. src
// must be the bytes yaml.v3 was given (spec strips a BOM and CRLFs first).
func Locate(src []byte, err error) Located {
	problem, line := splitYAMLError(err)
	if f := locateYAMLError(src, problem, line); f != nil {
		return Located{Line: f.at.line + 1, Column: f.at.col + 1, Msg: f.msg, Hint: f.hint}
	}
	// The replay did not reach yaml.v3's verdict: report yaml.v3's own line, made 1-based, at
	// the first character of that line.
	if parserProblem(problem) && line > 0 {
		line++
	}
	lines := strings.Split(string(src), "\n")
	last := 1
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.TrimSpace(lines[i]) != "" {
			last = i + 1
			break
		}
	}
	if line > last {
		// "unexpected end of stream" lands past the last line; the problem is on it.
		line = last
	}
	out := Located{Line: line, Msg: problem}
	if line > 0 && line <= len(lines) {
		text := lines[line-1]
		out.Column = utf8.RuneCountInString(text[:len(text)-len(strings.TrimLeft(text, " \t"))]) + 1
	}
	return out
}

// parserProblems are the problems yaml.v3's parser (not its scanner) reports; their line is
// counted from 0.
var parserProblems = []string{
	"did not find expected <document start>", "did not find expected node content", "did not find expected key",
	"did not find expected '-' indicator", "did not find expected ',' or ']'", "did not find expected ',' or '}'",
	"found duplicate %YAML directive", "found incompatible YAML document", "found undefined tag handle",
	"found duplicate %TAG directive",
}

func parserProblem(msg string) bool {
	for _, p := range parserProblems {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// readerProblems are the problems yaml.v3 finds while decoding characters, before any token.
var readerProblems = []string{
	"invalid leading UTF-8 octet", "incomplete UTF-8 octet sequence", "invalid trailing UTF-8 octet",
	"invalid length of a UTF-8 sequence", "invalid Unicode character", "control characters are not allowed",
}

// locateYAMLError finds the error yaml.v3 reported as problem (on line, as its message counts),
// or returns nil when it cannot be sure it found the same one.
func locateYAMLError(src []byte, problem string, line int) (f *yamlFault) {
	for _, p := range readerProblems {
		if problem == p {
			return badCharacter(src)
		}
	}
	if len(src) >= 2 && (src[0] == 0xFE && src[1] == 0xFF || src[0] == 0xFF && src[1] == 0xFE) {
		return nil // UTF-16: columns would be off
	}
	defer func() {
		// A mistake in the replay must not take the whole lint down; yaml.v3's line remains.
		if recover() != nil {
			f = nil
		}
	}()
	f = replayYAML(src)
	if f == nil || f.problem != problem || f.yamlLine() != line {
		return nil
	}
	return f
}

// badCharacter finds the first character yaml.v3's reader rejects.
func badCharacter(src []byte) *yamlFault {
	var m ymark
	for i := 0; i < len(src); {
		r, w := utf8.DecodeRune(src[i:])
		switch {
		case r == utf8.RuneError && w <= 1:
			return &yamlFault{at: m, msg: "the file is not valid UTF-8 here", hint: "save the file as UTF-8"}
		case r == '\t' || r == '\n' || r == '\r' || r >= 0x20 && r <= 0x7E || r == 0x85 ||
			r >= 0xA0 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF:
		default:
			return &yamlFault{at: m, msg: fmt.Sprintf("control character U+%04X is not allowed in YAML", r),
				hint: fmt.Sprintf(`write it as the escape "\\x%02X" in a double-quoted string`, r)}
		}
		if r == '\n' || r == '\r' && (i+1 >= len(src) || src[i+1] != '\n') {
			m.line++
			m.col = 0
		} else {
			m.col++
		}
		i += w
	}
	return nil
}

// describe names a token for a message.
func (t ytok) describe(src []byte) string {
	switch t.kind {
	case ytStreamEnd:
		return "the end of the file"
	case ytDocumentStart:
		return "'---'"
	case ytDocumentEnd:
		return "'...'"
	case ytVersionDirective, ytTagDirective:
		return "a directive"
	case ytBlockEntry:
		return "'-'"
	case ytFlowEntry:
		return "','"
	case ytKey, ytBlockMappingStart:
		return "a key"
	case ytBlockSequenceStart:
		return "a list"
	case ytValue:
		return "':'"
	case ytFlowSequenceStart:
		return "'['"
	case ytFlowSequenceEnd:
		return "']'"
	case ytFlowMappingStart:
		return "'{'"
	case ytFlowMappingEnd:
		return "'}'"
	case ytAlias:
		return "alias *" + t.value
	case ytAnchor:
		return "anchor &" + t.value
	case ytTag:
		return "a tag"
	case ytScalar:
		return strconv.Quote(excerpt(src, t.start.off, t.end))
	}
	return "a token"
}

// excerpt is the text from off to end (or to the end of its line), shortened for a message.
func excerpt(src []byte, off, end int) string {
	if end <= off || end > len(src) {
		end = len(src)
	}
	s := string(src[off:end])
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) > 40 {
		s = string([]rune(s)[:40]) + "…"
	}
	return s
}

type faultKind uint8

const (
	faultScanner faultKind = iota
	faultParser
	faultDecoder // reported by yaml.v3's node builder, without a line
)

// yamlFault is the first error of a replay: yaml.v3's problem text and marks, and where a person
// should look, in words.
type yamlFault struct {
	problem                  string
	kind                     faultKind
	contextMark, problemMark ymark
	hasContext               bool

	at        ymark
	msg, hint string
}

// yamlLine is the line yaml.v3 prints in its message for this error, or 0 when it prints none.
func (f *yamlFault) yamlLine() int {
	switch f.kind {
	case faultScanner:
		// Scanner errors always have a context mark (the problem mark when yaml.v3 names none).
		if f.contextMark.line != 0 {
			return f.contextMark.line + 1
		}
		if f.problemMark.line != 0 {
			return f.problemMark.line + 1
		}
	case faultParser:
		if f.hasContext && f.contextMark.line != 0 {
			return f.contextMark.line
		}
		if f.problemMark.line != 0 {
			return f.problemMark.line
		}
	}
	return 0
}

// Messages: what went wrong, in words, and where to look.

// lineStart is the byte offset where the line holding off begins.
func (r *yreplay) lineStart(off int) int {
	for off > 0 && r.src[off-1] != '\n' && r.src[off-1] != '\r' {
		off--
	}
	return off
}

// firstOnLine reports whether only blanks come before m on its line.
func (r *yreplay) firstOnLine(m ymark) bool {
	if m.off > len(r.src) {
		return true
	}
	return strings.Trim(string(r.src[r.lineStart(m.off):m.off]), " \t") == ""
}

// lineIndent is the mark of the first non-blank character of the line holding m.
func (r *yreplay) lineIndent(m ymark) ymark {
	off := r.lineStart(min(m.off, len(r.src)))
	out := ymark{line: m.line, off: off}
	for off < len(r.src) && (r.src[off] == ' ' || r.src[off] == '\t') {
		off++
		out.col++
		out.off = off
	}
	return out
}

func closerOf(k ytokKind) byte {
	if k == ytFlowSequenceStart {
		return ']'
	}
	return '}'
}

func openerOf(k ytokKind) byte {
	if k == ytFlowSequenceStart {
		return '['
	}
	return '{'
}

func (r *yreplay) describeScanError() {
	f := r.err
	f.at = f.problemMark
	switch f.problem {
	case "found character that cannot start any token":
		switch c := r.at(r.pos); c {
		case '\t':
			f.msg, f.hint = "a tab character cannot indent YAML", "indent with spaces"
		case '@', '`':
			f.msg, f.hint = fmt.Sprintf("'%c' is reserved in YAML and cannot start a plain value", c), "quote the value"
		case '%':
			f.msg, f.hint = "'%' cannot start a plain value", "quote the value"
		case '|', '>':
			f.msg = fmt.Sprintf("a block scalar ('%c') cannot appear inside '[ ]' or '{ }'", c)
		default:
			f.msg = fmt.Sprintf("%q cannot start a value", excerpt(r.src, r.pos, r.pos+utf8Width(c)))
		}
	case "found a tab character that violates indentation", "found a tab character where an indentation space is expected":
		f.msg, f.hint = "a tab character cannot indent YAML", "indent with spaces"
	case "mapping values are not allowed in this context":
		prev := r.tokens[len(r.tokens)-1]
		if prev.kind == ytScalar && prev.plain && prev.start.line < f.problemMark.line {
			f.at = r.lineIndent(f.problemMark)
			f.msg = fmt.Sprintf("this line is indented more than the block it continues, so it reads as more of the value on line %d, and ': ' is not allowed in it", prev.start.line+1)
			f.hint = "align it with the keys above"
		} else {
			f.msg = "mapping values are not allowed here: ': ' cannot follow a value on the same line"
			f.hint = "quote the value, or start the nested map on the next line, indented"
		}
	case "block sequence entries are not allowed in this context":
		f.msg, f.hint = "a '-' list item cannot start here, after a value on the same line", "put the list items on their own lines, indented under the key"
	case "mapping keys are not allowed in this context":
		f.msg = "a '?' key cannot start here, after a value on the same line"
	case "could not find expected ':'":
		f.at = f.contextMark
		word := excerpt(r.src, f.contextMark.off, len(r.src))
		if r.keyInList {
			f.msg = fmt.Sprintf("expected '- ' before %q: it is at the indentation of a list's items", word)
			f.hint = "start it with '- ', or indent it under the item it belongs to"
		} else {
			f.msg = fmt.Sprintf("missing ':' after %q: each line of a map is 'key: value'", word)
			f.hint = "add the ':', or indent the line under the key it belongs to"
		}
	case "found unexpected end of stream":
		f.at = f.contextMark
		f.msg = fmt.Sprintf("unterminated quoted string: the %c opened here is never closed", r.at(f.contextMark.off))
		f.hint = "add the closing quote"
	case "found unexpected document indicator":
		f.at = f.contextMark
		f.msg = fmt.Sprintf("unterminated quoted string: the document ends before the %c opened here is closed", r.at(f.contextMark.off))
		f.hint = "add the closing quote"
	case "found unknown escape character":
		f.msg = fmt.Sprintf(`unknown escape sequence "%s" in a double-quoted string`, excerpt(r.src, r.pos, r.pos+1+utf8Width(r.at(r.pos+1))))
		f.hint = `write "\\" for a backslash, or use single quotes`
	case "did not find expected hexdecimal number", "found invalid Unicode character escape code":
		// The mark is past the \x, \u or \U.
		f.at.col -= 2
		f.at.off -= 2
		f.msg = "invalid escape sequence in a double-quoted string: " + strings.TrimPrefix(f.problem, "did not find ")
	case "did not find expected alphabetic or numeric character":
		f.at = f.contextMark
		what, sign := "an anchor", '&'
		if r.at(f.contextMark.off) == '*' {
			what, sign = "an alias", '*'
		}
		if f.problemMark.off == f.contextMark.off+1 {
			f.msg = fmt.Sprintf("%s name must follow '%c'", what, sign)
		} else {
			f.msg = fmt.Sprintf("%s name can hold only letters, digits, '-' and '_'; %q cannot be part of it", what, excerpt(r.src, r.pos, r.pos+utf8Width(r.at(r.pos))))
		}
	case "found unknown directive name":
		f.at = f.contextMark
		f.msg = fmt.Sprintf("unknown directive %s: a line that starts with '%%' is a directive, and YAML has only %%YAML and %%TAG", excerpt(r.src, f.contextMark.off, r.pos))
		f.hint = "quote the value if it starts with '%'"
	case "found an indentation indicator equal to 0":
		f.msg = "the indentation indicator of a block scalar cannot be 0"
	default:
		switch {
		case strings.Contains(f.problem, "max depth"):
			f.at = f.contextMark
			f.msg = "nested too deeply: " + f.problem
		case r.at(f.contextMark.off) == '!' || r.at(f.contextMark.off) == '%':
			// Tags and directives: the mark is the '!' or '%' that starts them.
			what := "tag"
			if r.at(f.contextMark.off) == '%' {
				what = "directive"
			}
			f.at = f.contextMark
			f.msg = fmt.Sprintf("invalid %s: %s", what, f.problem)
		case r.at(f.contextMark.off) == '|' || r.at(f.contextMark.off) == '>':
			f.msg = fmt.Sprintf("unexpected text after the block scalar indicator '%c'", r.at(f.contextMark.off))
			f.hint = "start the text on the next line, indented"
		default:
			f.msg = f.problem
		}
	}
}

func (r *yreplay) describeParserError(t ytok) {
	f := r.err
	var ctx ytok
	if f.hasContext {
		ctx.start = f.contextMark
	}
	unclosed := func() bool {
		if len(r.flows) == 0 {
			return false
		}
		o := r.flows[len(r.flows)-1]
		switch t.kind {
		case ytStreamEnd, ytDocumentStart, ytDocumentEnd, ytVersionDirective, ytTagDirective:
		default:
			// The file has moved on to the block structure around the collection.
			if t.start.line == o.start.line || r.lineIndent(t.start).col > o.blockIndent {
				return false
			}
		}
		f.at = o.start
		f.msg = fmt.Sprintf("'%c' is never closed", openerOf(o.kind))
		f.hint = fmt.Sprintf("add the missing '%c'", closerOf(o.kind))
		return true
	}
	stray := func() bool {
		if (t.kind == ytFlowSequenceEnd || t.kind == ytFlowMappingEnd) && t.unmatched {
			c, o := byte(']'), byte('[')
			if t.kind == ytFlowMappingEnd {
				c, o = '}', '{'
			}
			f.msg = fmt.Sprintf("unexpected '%c': no '%c' is open", c, o)
			f.hint = "remove it"
			return true
		}
		return false
	}
	switch f.problem {
	case "did not find expected key":
		switch {
		case stray():
		case t.kind == ytBlockEntry:
			f.msg = fmt.Sprintf("a '-' list item cannot stand among the keys of a map (they are at column %d)", ctx.start.col+1)
			f.hint = "indent the list under the key it belongs to"
		case t.kind == ytValue:
			f.msg = "':' without a key before it"
		case r.firstOnLine(t.start) && t.start.col > ctx.start.col:
			f.msg = fmt.Sprintf("this line is indented more than the block it continues (its keys are at column %d)", ctx.start.col+1)
			f.hint = "align it with the keys above, or indent it under a key that ends with ':'"
		case r.firstOnLine(t.start):
			f.msg = fmt.Sprintf("expected 'key:' at column %d, found %s", ctx.start.col+1, t.describe(r.src))
		default:
			f.msg = fmt.Sprintf("unexpected text after the value: %s", t.describe(r.src))
			f.hint = "quote the whole value, or put the next key on its own line"
		}
	case "did not find expected '-' indicator":
		switch {
		case stray():
		case t.kind == ytKey && t.start.col == ctx.start.col:
			f.msg = fmt.Sprintf("a 'key:' cannot stand among the '-' items of a list (they are at column %d)", ctx.start.col+1)
			f.hint = "start it with '- ', or indent it under the item it belongs to"
		case r.firstOnLine(t.start) && t.start.col > ctx.start.col:
			f.msg = fmt.Sprintf("this line is indented more than the list it continues (its '-' items are at column %d)", ctx.start.col+1)
			f.hint = "align it with the lines above"
		default:
			f.msg = fmt.Sprintf("expected a '-' list item, found %s", t.describe(r.src))
		}
	case "did not find expected node content":
		switch {
		case unclosed(), stray():
		case t.kind == ytFlowEntry:
			f.msg = "expected a value before ','"
		case t.kind == ytBlockEntry:
			f.msg, f.hint = "a '-' list item cannot appear inside '[ ]' or '{ }'", "separate the entries with ','"
		default:
			f.msg = fmt.Sprintf("expected a value, found %s", t.describe(r.src))
		}
	case "did not find expected ',' or ']'", "did not find expected ',' or '}'":
		o := r.flows[len(r.flows)-1]
		open, closer := openerOf(o.kind), closerOf(o.kind)
		if unclosed() {
			break
		}
		if t.kind == ytFlowSequenceEnd || t.kind == ytFlowMappingEnd {
			f.msg = fmt.Sprintf("%s does not close the '%c' opened at line %d, column %d", t.describe(r.src), open, o.start.line+1, o.start.col+1)
			f.hint = fmt.Sprintf("close it with '%c'", closer)
			break
		}
		f.hint = "separate the entries with ','"
		if prev := r.previous(); t.kind == ytValue && prev.kind == ytScalar && prev.plain && prev.start.line == t.start.line {
			// "a: 1 b: 2": the comma is missing before the last word of the scalar.
			text := string(r.src[prev.start.off:prev.end])
			if i := strings.LastIndexAny(text, " \t"); i >= 0 {
				word := text[i+1:]
				f.at = prev.start
				f.at.col += utf8.RuneCountInString(text[:i+1])
				f.at.off += i + 1
				f.msg = fmt.Sprintf("missing ',' before %q in the '%c %c' opened at line %d, column %d", word, open, closer, o.start.line+1, o.start.col+1)
				break
			}
		}
		f.msg = fmt.Sprintf("expected ',' or '%c' before %s, in the '%c %c' opened at line %d, column %d", closer, t.describe(r.src), open, closer, o.start.line+1, o.start.col+1)
	case "did not find expected <document start>":
		f.msg = fmt.Sprintf("expected '---' after the directives, found %s", t.describe(r.src))
	case "found duplicate %YAML directive":
		f.msg, f.hint = "duplicate %YAML directive", "remove it"
	case "found incompatible YAML document":
		f.msg, f.hint = fmt.Sprintf("%%YAML %d.%d is not supported; only %%YAML 1.1 is", t.major, t.minor), "remove the %YAML line"
	case "found duplicate %TAG directive":
		f.msg = fmt.Sprintf("duplicate %%TAG directive for %s", t.value)
	case "found undefined tag handle":
		f.msg = fmt.Sprintf("undefined tag handle %s", t.value)
		f.hint = "declare it with a %TAG directive, or write the tag as !name or !!type"
	default:
		f.msg = f.problem
	}
	if end := r.lastContent(); f.at.line > end.line || f.at.line == end.line && f.at.col > end.col {
		f.at = end // the end of the file: point just after its last character
	}
}

// lastContent is the mark just after the last non-blank character of the file.
func (r *yreplay) lastContent() ymark {
	end := len(bytes.TrimRight(r.src, " \t\r\n"))
	var m ymark
	for i := 0; i < end; {
		c := r.src[i]
		w := max(utf8Width(c), 1)
		switch {
		case c == '\n':
			m.line++
			m.col = 0
		case c == '\r':
			if r.at(i+1) != '\n' {
				m.line++
				m.col = 0
			}
		default:
			m.col++
		}
		i += w
		m.off = i
	}
	return m
}
