package spec

import (
	"strings"
	"testing"
	"unicode/utf16"
)

func TestExcerptAt(t *testing.T) {
	src := []byte("main:\n  push:\n    - runner:\n        tags: cnb:arch:amd64:gpu:A100\n      stages: []\n")
	tests := []struct {
		name string
		pos  Pos
		want string
	}{
		{"middle line with caret", Pos{Line: 4, Column: 15},
			" 3 |     - runner:\n 4 |         tags: cnb:arch:amd64:gpu:A100\n   |               ^\n 5 |       stages: []\n"},
		{"first line: no line before", Pos{Line: 1, Column: 1}, " 1 | main:\n   | ^\n 2 |   push:\n"},
		{"last line: no line after", Pos{Line: 5}, " 4 |         tags: cnb:arch:amd64:gpu:A100\n 5 |       stages: []\n"},
		{"no line", Pos{}, ""},
		{"past the end", Pos{Line: 6, Column: 1}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ExcerptAt(src, tt.pos).String(); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestExcerptWidthAndLongLines(t *testing.T) {
	src := []byte("a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n\tk: v\n")
	got := ExcerptAt(src, Pos{Line: 10, Column: 1}).String()
	if want := "  9 | i\n 10 | j\n    | ^\n 11 |  k: v\n"; got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	long := make([]byte, 500)
	for i := range long {
		long[i] = 'x'
	}
	ex := ExcerptAt(long, Pos{Line: 1, Column: 400})
	if len([]rune(ex.Lines[0])) != maxExcerptLine+1 || ex.Column != 0 {
		t.Errorf("a long line is cut (%d runes) and loses a caret past the cut (column %d)", len([]rune(ex.Lines[0])), ex.Column)
	}
}

// A .cnb.yml saved as UTF-16 by a Windows editor parses, and its diagnostics print text, not
// the file's bytes.
func TestUTF16FileParsesAndItsExcerptIsText(t *testing.T) {
	text := "main:\n  push:\n    - stags: [make]   # 训练\n"
	for _, tc := range []struct {
		name string
		bom  []byte
		put  func([]byte, uint16)
	}{
		{"little endian", []byte{0xff, 0xfe}, func(b []byte, u uint16) { b[0], b[1] = byte(u), byte(u>>8) }},
		{"big endian", []byte{0xfe, 0xff}, func(b []byte, u uint16) { b[0], b[1] = byte(u>>8), byte(u) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := append([]byte{}, tc.bom...)
			for _, u := range utf16.Encode([]rune(strings.ReplaceAll(text, "\n", "\r\n"))) {
				var b [2]byte
				tc.put(b[:], u)
				src = append(src, b[:]...)
			}
			ds := Lint(src, Options{})
			if len(ds) != 1 || ds[0].Message != `unknown key "stags" in pipeline` || ds[0].Pos.Line != 3 || ds[0].Pos.Column != 7 {
				t.Fatalf("diagnostics of the UTF-16 file: %+v", ds)
			}
			want := " 2 |   push:\n 3 |     - stags: [make]   # 训练\n   |       ^\n"
			if got := ExcerptAt(src, ds[0].Pos).String(); got != want {
				t.Errorf("excerpt:\n%q\nwant\n%q", got, want)
			}
		})
	}
}
