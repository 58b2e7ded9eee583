package yamlpos

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"gopkg.in/yaml.v3"
)

// These tests moved here from spec with the replay. They read spec's corpus of real files; the
// positions spec reports for syntax errors, through Lint, are checked in spec's
// syntaxerr_test.go.
const specTestdata = "../../testdata"

// normalize is what spec does to a file before yaml.v3 sees it: no BOM, LF line ends.
func normalize(src []byte) []byte {
	return bytes.ReplaceAll(bytes.TrimPrefix(src, []byte("\xef\xbb\xbf")), []byte("\r\n"), []byte("\n"))
}

// Locate on its own: the position, the message and the hint, for a scanner error (the tab) and
// a parser error (the unclosed list) whose line yaml.v3 names wrongly.
func TestLocate(t *testing.T) {
	for _, tt := range []struct {
		src       string
		line, col int
		msg, hint string
	}{
		{"main:\n  push:\n    - stages:\n\t- make\n", 4, 1, "a tab character cannot indent YAML", "indent with spaces"},
		{"main:\n  push:\n    - stages: [make\n    - stages: [test]\n", 3, 15, "'[' is never closed", "add the missing ']'"},
	} {
		var n yaml.Node
		err := yaml.Unmarshal([]byte(tt.src), &n)
		if err == nil {
			t.Fatalf("yaml.v3 accepts %q; the case tests nothing", tt.src)
		}
		if got := Locate([]byte(tt.src), err); got != (Located{Line: tt.line, Column: tt.col, Msg: tt.msg, Hint: tt.hint}) {
			t.Errorf("%q: %+v, want %d:%d %q %q", tt.src, got, tt.line, tt.col, tt.msg, tt.hint)
		}
	}
}

// The replay that locates errors agrees with yaml.v3 on every file of the corpus: it finds no
// error in any of them, so it cannot invent one in front of the real one.
func TestSyntaxReplayAcceptsValidFiles(t *testing.T) {
	files, _ := filepath.Glob(specTestdata + "/corpus/*/.cnb.yml")
	more, _ := filepath.Glob(specTestdata + "/corpus/*/.cnb/*/*.yml")
	brief, _ := filepath.Glob(specTestdata + "/brief/*.yml")
	files = append(append(files, more...), brief...)
	if len(files) < 20 {
		t.Fatalf("found %d files", len(files))
	}
	for _, p := range files {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		src = normalize(src)
		var n yaml.Node
		if yaml.Unmarshal(src, &n) != nil {
			continue
		}
		if f := replayYAML(src); f != nil {
			t.Errorf("%s: the replay reports %q at %d:%d in a file yaml.v3 accepts", p, f.problem, f.at.line+1, f.at.col+1)
		}
	}
}

// Mutations of real files: wherever yaml.v3 rejects one, the replay reaches the same verdict
// (the same problem on the same line of yaml.v3's message), so its column can be trusted; where
// yaml.v3 accepts one, the replay finds nothing.
func TestSyntaxReplayAgreesWithYAML(t *testing.T) {
	files, _ := filepath.Glob(specTestdata + "/corpus/*/.cnb.yml")
	brief, _ := filepath.Glob(specTestdata + "/brief/*.yml")
	files = append(files, brief...)
	inserts := []string{"\t", " ", "  ", "[", "]", "{", "}", "'", "\"", ": ", "- ", "#", "&", "*x", "!", "@", "%", "|", ">", ",", "\\", "? ", "\n"}
	var rejected atomic.Int64
	t.Run("files", func(t *testing.T) {
		for _, p := range files {
			t.Run(filepath.Base(filepath.Dir(p))+"/"+filepath.Base(p), func(t *testing.T) {
				t.Parallel()
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				src := string(normalize(b))
				// A deterministic spread of places: the start of each line, after its
				// indentation (where a byte is deleted), and the middle of its text; elsewhere
				// something is inserted.
				var places []int
				off := 0
				for _, line := range strings.SplitAfter(src, "\n") {
					ind := len(line) - len(strings.TrimLeft(line, " "))
					places = append(places, off, off+ind, off+ind+(len(line)-ind)/2)
					off += len(line)
				}
				for i, at := range places {
					if at > len(src) {
						continue
					}
					mutated := src[:at] + inserts[i%len(inserts)] + src[at:]
					if i%3 == 1 {
						mutated = deleteByte(src, at)
					}
					var n yaml.Node
					err := yaml.Unmarshal([]byte(mutated), &n)
					f := replayYAML([]byte(mutated))
					if err == nil {
						if f != nil {
							t.Errorf("yaml.v3 accepts a mutation, the replay reports %q at %d:%d:\n%s", f.problem, f.at.line+1, f.at.col+1, mutated)
						}
						continue
					}
					rejected.Add(1)
					problem, line := splitYAMLError(err)
					switch {
					case locateYAMLError([]byte(mutated), problem, line) != nil:
					case f == nil:
						t.Errorf("yaml.v3 says %q, the replay finds nothing:\n%s", err, mutated)
					default:
						t.Errorf("yaml.v3 says %q, the replay %q (line %d):\n%s", err, f.problem, f.yamlLine(), mutated)
					}
				}
			})
		}
	})
	if rejected.Load() < 500 {
		t.Errorf("only %d mutations were rejected by yaml.v3", rejected.Load())
	}
}

func deleteByte(s string, at int) string {
	if at >= len(s) {
		return s
	}
	return s[:at] + s[at+1:]
}

// When the replay does not reach yaml.v3's verdict, the error keeps yaml.v3's message and line
// (made 1-based) and points at the first character of that line.
func TestSyntaxErrorFallback(t *testing.T) {
	src := []byte("main:\n  push:\n    - stages: [make]\n")
	for _, tt := range []struct {
		err       string
		line, col int
		msg       string
	}{
		{"yaml: line 3: something the replay never says", 3, 5, "something the replay never says"},
		{"yaml: line 1: did not find expected key", 2, 3, "did not find expected key"}, // a parser error counts from 0
		{"yaml: line 9: found unexpected end of stream", 3, 5, "found unexpected end of stream"},
		{"yaml: no line at all", 0, 0, "no line at all"},
	} {
		got := Locate(src, errors.New(tt.err))
		if got.Line != tt.line || got.Column != tt.col || got.Msg != tt.msg {
			t.Errorf("%s: %d:%d %q, want %d:%d %q", tt.err, got.Line, got.Column, got.Msg, tt.line, tt.col, tt.msg)
		}
	}
}
