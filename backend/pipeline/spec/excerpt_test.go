package spec

import "testing"

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
