package spec

import (
	"fmt"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// A YAML syntax error is reported at the offending token (located by internal/yamlpos, whose
// own tests check the replay against yaml.v3), with its line and a 1-based column.
// Syntax errors used to point at the line where the enclosing block or flow collection started
// (a misindented key on line 7 came out at line 6 or earlier), sometimes at no line at all, and
// always with column 0. Each expected position below is where the mistake is in the text, found
// by reading the file, not by running the code.
func TestSyntaxErrorPositions(t *testing.T) {
	tests := []struct {
		name      string
		src       string
		line, col int
		msg       string // part of the message
	}{
		{
			// Line 7 is indented one space less than "name:" above it, one more than the '-'.
			name: "bad indentation deep in a file",
			src: `main:
  push:
    - docker:
        image: golang:1.22
      stages:
        - name: build
         script: go build ./...
        - name: test
          script: go test ./...
`,
			line: 7, col: 10, msg: "indented more than the list it continues",
		},
		{
			name: "tab indentation",
			src:  "main:\n  push:\n    - stages:\n\t- make\n",
			line: 4, col: 1, msg: "tab character",
		},
		{
			// The tab starts a line that would continue the value "1".
			name: "tab indenting the line after a value",
			src:  "main:\n  push:\n    - name: 1\n\t  stages: [make]\n",
			line: 4, col: 1, msg: "tab character",
		},
		{
			name: "tab indentation inside a block scalar",
			src:  "main:\n  push:\n    - stages:\n        - script: |\n            make\n\t    make test\n",
			line: 6, col: 1, msg: "tab character",
		},
		{
			// The list never closes: the next line is already the next item.
			name: "unclosed [",
			src: `main:
  push:
    - stages: [build, test
    - name: other
      stages: [make]
`,
			line: 3, col: 15, msg: "'[' is never closed",
		},
		{
			name: "unclosed [ at the end of the file",
			src:  "main:\n  push:\n    - stages: [build,\n",
			line: 3, col: 15, msg: "'[' is never closed",
		},
		{
			name: "unclosed {",
			src: `main:
  push:
    - runner: {tags: cnb:arch:amd64, cpus: 8
      stages: [make]
`,
			line: 3, col: 15, msg: "'{' is never closed",
		},
		{
			name: "unterminated double quote",
			src: `main:
  push:
    - name: "build
      stages: [make]
`,
			line: 3, col: 13, msg: "unterminated quoted string",
		},
		{
			// '' is an escaped quote; the string is still open at the end of the file.
			name: "unterminated single quote",
			src: `main:
  push:
    - name: 'it''s the build
      stages: [make]
`,
			line: 3, col: 13, msg: "unterminated quoted string",
		},
		{
			// The second ':' makes "build: fast" a map where a plain value is.
			name: "a: b: c",
			src: `main:
  push:
    - name: build: fast
      stages: [make]
`,
			line: 3, col: 18, msg: "mapping values are not allowed here",
		},
		{
			// Line 4 is indented under "name: build", so it reads as more of that value.
			name: "line indented under a scalar value",
			src: `main:
  push:
    - name: build
        stages: [make]
`,
			line: 4, col: 9, msg: "indented more than the block it continues",
		},
		{
			name: "stray list item among the keys of a map",
			src: `main:
  push:
    - stages: [make]
  - vscode
`,
			line: 4, col: 3, msg: "'-' list item",
		},
		{
			// The second item's '-' is one column right of the first's.
			name: "misindented list item",
			src: `main:
  push:
    - name: a
      stages: [make]
     - name: b
       stages: [make]
`,
			line: 5, col: 6, msg: "indented more than the list it continues",
		},
		{
			name: "key among the items of a list",
			src: `main:
  push:
    - stages:
        - make
        - test
        name: x
`,
			line: 6, col: 9, msg: "among the '-' items of a list",
		},
		{
			name: "key without a colon inside a map",
			src: `main:
  push:
    - name: build
      stages
      runner: {cpus: 8}
`,
			line: 4, col: 7, msg: `missing ':' after "stages"`,
		},
		{
			// "deploy" sits at the indentation of the list's items without a '- '.
			name: "list item without its '-'",
			src: `main:
  push:
    - stages:
        - make
        - test
        deploy
`,
			line: 6, col: 9, msg: `expected '- ' before "deploy"`,
		},
		{
			name: "alias of an anchor that does not exist",
			src: `.defaults: &defaults
  runner: {cpus: 8}
main:
  push:
    - <<: *default
      stages: [make]
`,
			line: 5, col: 11, msg: "alias *default",
		},
		{
			// An anchor name is letters, digits, '-' and '_': the '.' ends it too early.
			name: "bad anchor name",
			src: `.base: &base.tpl
  stages: [make]
main:
  push:
    - <<: *base
`,
			line: 1, col: 8, msg: "anchor name",
		},
		{
			name: "anchor with no name",
			src:  "main: &\n  push:\n    - stages: [make]\n",
			line: 1, col: 7, msg: "anchor name",
		},
		{
			name: "reserved @ at the start of a scalar",
			src: `main:
  push:
    - stages:
        - script: @echo hi
`,
			line: 4, col: 19, msg: "'@' is reserved",
		},
		{
			name: "reserved backtick at the start of a scalar",
			src:  "main:\n  push:\n    - stages:\n        - script: `make`\n",
			line: 4, col: 19, msg: "'`' is reserved",
		},
		{
			name: "% at the start of a scalar",
			src:  "main:\n  push:\n    - name: %release\n      stages: [make]\n",
			line: 3, col: 13, msg: "'%' cannot start a plain value",
		},
		{
			// A line that starts with '%' is a directive, and there is no %TAGS.
			name: "unknown directive in the middle of a file",
			src:  "main:\n  push: [make]\n%TAGS\n",
			line: 3, col: 1, msg: "unknown directive %TAGS",
		},
		{
			name: "duplicate %YAML directive",
			src:  "%YAML 1.1\n%YAML 1.1\n---\nmain: {}\n",
			line: 2, col: 1, msg: "duplicate %YAML directive",
		},
		{
			// The comma between the two entries is missing: it belongs before "cpus".
			name: "flow mapping missing a comma",
			src: `main:
  push:
    - runner: {tags: cnb:arch:amd64 cpus: 8}
      stages: [make]
`,
			line: 3, col: 37, msg: "missing ',' before \"cpus\"",
		},
		{
			name: "flow sequence closed by }",
			src: `main:
  push:
    - name: build
      stages: [build, test}
`,
			line: 4, col: 27, msg: "'}' does not close the '[' opened at line 4, column 15",
		},
		{
			name: "trailing ]",
			src: `main:
  push:
    - name: build
      stages: [build, test]]
`,
			line: 4, col: 28, msg: "unexpected ']'",
		},
		{
			name: "list item after a value on the same line",
			src:  "main:\n  push:\n    - stages: - make\n",
			line: 3, col: 15, msg: "cannot start here",
		},
		{
			// Everything up to line 3 is valid; line 4 is a top-level key indented by one space.
			name: "wrong indentation after a valid prefix",
			src: `main:
  push:
    - stages: [make]
 dev:
  push:
    - stages: [test]
`,
			line: 4, col: 2, msg: "indented more than the block it continues",
		},
		{
			// \g is no escape; the backslash is where the mistake is.
			name: "unknown escape in a double-quoted string",
			src: `main:
  push:
    - stages:
        - workdir: "C:\go\bin"
          script: make
`,
			line: 4, col: 23, msg: `unknown escape sequence "\g"`,
		},
		{
			name: "text after a flow value",
			src:  "main:\n  push:\n    - name: [build] fast\n",
			line: 3, col: 21, msg: "unexpected text after the value",
		},
		{
			name: "control character",
			src:  "main:\n  push:\n    - name: \"a\x07b\"\n",
			line: 3, col: 15, msg: "control character U+0007",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n yaml.Node
			if yaml.Unmarshal([]byte(tt.src), &n) == nil {
				t.Fatal("yaml.v3 accepts the file; the case tests nothing")
			}
			ds := Lint([]byte(tt.src), Options{})
			d, ok := findDiag(ds, SeverityError, "invalid YAML")
			if !ok {
				t.Fatalf("no invalid-YAML error; got:\n%v", ds)
			}
			if d.Pos.Line != tt.line || d.Pos.Column != tt.col {
				t.Errorf("at %d:%d, want %d:%d (%s)", d.Pos.Line, d.Pos.Column, tt.line, tt.col, d)
			}
			if !strings.Contains(d.Message, tt.msg) {
				t.Errorf("message %q does not contain %q", d.Message, tt.msg)
			}
			if want := fmt.Sprintf(".cnb.yml:%d:%d: error: invalid YAML", tt.line, tt.col); !strings.HasPrefix(d.String(), want) {
				t.Errorf("printed as %q, want it to start with %q", d.String(), want)
			}
		})
	}
}

// Far into a large file (the replay drops the tokens it is done with as it goes), the position is
// still exact.
func TestSyntaxErrorInALargeFile(t *testing.T) {
	src := genJobs(6, 6, 6)
	if len(src) < 40_000 {
		t.Fatalf("the generated file has %d bytes", len(src))
	}
	lines := strings.Count(string(src), "\n")
	for _, tt := range []struct {
		add       string
		line, col int
	}{
		{"  bad: [x\n", lines + 1, 8},               // the '[' is never closed
		{"           indented: x\n", lines + 1, 12}, // indented more than the keys above
		{"  a: 1\n  b: \"x\n", lines + 2, 6},        // the quote is never closed
		{"  a: 1\n  b\n  c: 2\n", lines + 2, 3},     // no ':'
		{"  a: *nope\n", lines + 1, 6},              // no such anchor
	} {
		ds := Lint(append(append([]byte(nil), src...), tt.add...), Options{})
		d, ok := findDiag(ds, SeverityError, "invalid YAML")
		if !ok || d.Pos.Line != tt.line || d.Pos.Column != tt.col {
			t.Errorf("%q: %v, want an invalid-YAML error at %d:%d", tt.add, ds.Filter(SeverityError), tt.line, tt.col)
		}
	}
}
