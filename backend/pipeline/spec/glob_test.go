package spec

import (
	"strings"
	"testing"
	"time"
)

func TestGlobMatch(t *testing.T) {
	tests := []struct {
		pattern string
		yes     []string
		no      []string
	}{
		{"main", []string{"main"}, []string{"mainx", "xmain", "dev/main", ""}},
		{"dev/*", []string{"dev/a", "dev/feature-1", "dev/"}, []string{"dev", "dev/a/b", "xdev/a"}},
		{"feature/**", []string{"feature/a", "feature/a/b/c", "feature"}, []string{"features/a", "x/feature/a"}},
		{"release*", []string{"release", "release-1.0"}, []string{"release/1.0", "pre-release"}},
		{"(main|dev)", []string{"main", "dev"}, []string{"maindev", "test", "dev/x"}},
		{"@(main|dev)", []string{"main", "dev"}, []string{"mai"}},
		{"**/!(main|dev)", []string{"feature", "feature/x", "a/b/c", "maintenance", "dev2"}, []string{"main", "dev", "x/main", "a/b/dev"}},
		{"!(main|dev)", []string{"feature", "maintenance"}, []string{"main", "dev", "feature/x"}},
		{"**", []string{"main", "a/b/c", ""}, nil},
		{"(**)", []string{"main", "a/b/c"}, nil},
		{"*", []string{"main", "v1.0"}, []string{"dev/a"}},
		{"v1.0.*", []string{"v1.0.1", "v1.0."}, []string{"v1.1.0", "v1.0.1/x"}},
		{"release.*.*.*", []string{"release.1.2.3"}, []string{"release.1.2"}},
		{"a/**/b", []string{"a/b", "a/x/b", "a/x/y/b"}, []string{"a/xb", "ab"}},
		{"**/*.js", []string{"a.js", "src/a.js", "src/x/a.js"}, []string{"a.ts", "src/a.jsx"}},
		{"*.js", []string{"a.js"}, []string{"src/a.js"}},
		{"src/**", []string{"src/a", "src/a/b", "src"}, []string{"srcx", "lib/src/a"}},
		{"file?.txt", []string{"file1.txt"}, []string{"file.txt", "file12.txt", "file/.txt"}},
		{"[abc]-x", []string{"a-x", "c-x"}, []string{"d-x", "ab-x"}},
		{"[!abc]-x", []string{"d-x"}, []string{"a-x", "/-x"}},
		{"[a-c]*", []string{"apple", "cat"}, []string{"dog"}},
		{"{main,dev}", []string{"main", "dev"}, []string{"main,dev"}},
		{"*.{md,txt}", []string{"a.md", "a.txt"}, []string{"a.go"}},
		{"?(x)y", []string{"y", "xy"}, []string{"xxy"}},
		{"+(ab)c", []string{"abc", "ababc"}, []string{"c", "abac"}},
		{"*(ab)c", []string{"c", "abc", "ababc"}, []string{"abab"}},
		{`a\*b`, []string{"a*b"}, []string{"axb"}},
		{"a,b", []string{"a,b"}, []string{"a"}},
		{"[unclosed", []string{"[unclosed"}, []string{"u"}},
		{"(a|b/**)", []string{"a", "b", "b/c/d"}, []string{"c", "a/x"}},
		{"!(legacy/**)", []string{"src/a.go", "legacyx/a"}, []string{"legacy", "legacy/a/b"}},
		{"分支/*", []string{"分支/一"}, []string{"分支"}},
	}
	for _, tt := range tests {
		g, err := CompileGlob(tt.pattern)
		if err != nil {
			t.Errorf("CompileGlob(%q): %v", tt.pattern, err)
			continue
		}
		for _, s := range tt.yes {
			if !g.Match(s) {
				t.Errorf("%q should match %q", tt.pattern, s)
			}
		}
		for _, s := range tt.no {
			if g.Match(s) {
				t.Errorf("%q should not match %q", tt.pattern, s)
			}
		}
	}
}

func TestGlobCompileErrors(t *testing.T) {
	for _, p := range []string{"(main|dev", "main)", "a|b", "@(a", "{a,b", `trailing\`, strings.Repeat("a", maxGlobLen+1), "\xff",
		strings.Repeat("(", maxGlobDepth+1) + "a" + strings.Repeat(")", maxGlobDepth+1)} {
		if _, err := CompileGlob(p); err == nil {
			t.Errorf("CompileGlob(%q) succeeded, want an error", p)
		}
	}
}

// A pattern that makes a backtracking matcher explode must stay fast here.
func TestGlobPathologicalIsFast(t *testing.T) {
	pattern := strings.Repeat("*(a|aa)", 12) + "b"
	g, err := CompileGlob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if g.Match(strings.Repeat("a", 200)) {
		t.Fatal("should not match")
	}
	g2, _ := CompileGlob(strings.Repeat("!(*a*)", 20))
	g2.Match(strings.Repeat("ab", 100))
	// Nested quantifiers: each level would multiply the work of a naive matcher by the length.
	g3, err := CompileGlob(strings.Repeat("*(", 8) + "a|b" + strings.Repeat(")", 8) + "c")
	if err != nil {
		t.Fatal(err)
	}
	if g3.Match(strings.Repeat("ab", 150)) {
		t.Fatal("should not match")
	}
	if !g3.Match(strings.Repeat("ab", 150) + "c") {
		t.Fatal("should match")
	}
	if d := time.Since(start); d > 10*time.Second { // backtracking would take minutes; the bound leaves -race on a loaded machine room
		t.Fatalf("matching took %s", d)
	}
}

func TestPathFilter(t *testing.T) {
	tests := []struct {
		patterns []string
		path     string
		want     bool
	}{
		{[]string{"**/*.js"}, "web/app.js", true},
		{[]string{"*.js"}, "web/app.js", false},
		{[]string{"*.js"}, "app.js", true},
		{[]string{"**", "!(legacy/**)", "!(**/*.md)", "!*.md"}, "src/main.go", true},
		{[]string{"**", "!(legacy/**)", "!(**/*.md)", "!*.md"}, "legacy/old.go", false},
		{[]string{"**", "!(legacy/**)", "!(**/*.md)", "!*.md"}, "docs/guide.md", false},
		{[]string{"**", "!(legacy/**)", "!(**/*.md)", "!*.md"}, "README.md", false},
		{[]string{"src/**", "!(src/legacy/**)"}, "src/a/b.go", true},
		{[]string{"src/**", "!(src/legacy/**)"}, "src/legacy/b.go", false},
		{[]string{"src/**", "!(src/legacy/**)"}, "lib/b.go", false},
		{[]string{"!*.md"}, "main.go", true}, // only negatives: everything else
		{[]string{"!*.md"}, "a.md", false},
		{[]string{"./src/**"}, "src/x", false}, // patterns are not cleaned, paths are
		{[]string{"src/**"}, "./src/x", true},
	}
	for _, tt := range tests {
		f, err := compilePathFilter(tt.patterns)
		if err != nil {
			t.Fatalf("%v: %v", tt.patterns, err)
		}
		if got := f.match(tt.path); got != tt.want {
			t.Errorf("%v on %q = %v, want %v", tt.patterns, tt.path, got, tt.want)
		}
	}
}
