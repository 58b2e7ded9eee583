package spec

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Excerpt is the part of a file a diagnostic points at, as a linter prints it: the offending
// line with one line of context on each side, and where on it the caret goes.
type Excerpt struct {
	// FirstLine is the 1-based number of Lines[0].
	FirstLine int
	Lines     []string
	// Line is the offending line's number, Column its 1-based rune column (0: no caret).
	Line, Column int
}

// maxExcerptLine keeps a minified or generated line from filling a page.
const maxExcerptLine = 240

// ExcerptAt cuts the excerpt for pos out of src, as it was read (a UTF-16 file is decoded as the
// parser decodes it). It returns nil when pos has no line or the line is past the end of src.
func ExcerptAt(src []byte, pos Pos) *Excerpt {
	if pos.Line <= 0 {
		return nil
	}
	src = normalize(src)
	lines := bytes.Split(src, []byte("\n"))
	if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	if pos.Line > len(lines) {
		return nil
	}
	first, last := max(pos.Line-1, 1), min(pos.Line+1, len(lines))
	ex := &Excerpt{FirstLine: first, Line: pos.Line, Column: pos.Column}
	for n := first; n <= last; n++ {
		l := strings.TrimRight(string(lines[n-1]), "\r")
		if utf8.RuneCountInString(l) > maxExcerptLine {
			l = string([]rune(l)[:maxExcerptLine]) + "…"
		}
		ex.Lines = append(ex.Lines, strings.ReplaceAll(l, "\t", " "))
	}
	if ex.Column > maxExcerptLine+1 {
		ex.Column = 0
	}
	return ex
}

// String prints the excerpt with line numbers and a caret under the column:
//
//	2 |     runner:
//	3 |       tags: cnb:arch:amd64:gpu:A100
//	  |             ^
//	4 |     stages:
func (e *Excerpt) String() string {
	if e == nil {
		return ""
	}
	width := len(fmt.Sprint(e.FirstLine + len(e.Lines) - 1))
	var b strings.Builder
	for i, l := range e.Lines {
		n := e.FirstLine + i
		fmt.Fprintf(&b, " %*d | %s\n", width, n, l)
		if n == e.Line && e.Column > 0 {
			fmt.Fprintf(&b, " %*s | %s^\n", width, "", strings.Repeat(" ", e.Column-1))
		}
	}
	return b.String()
}
