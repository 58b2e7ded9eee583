package userpath

import (
	"errors"
	"strings"
	"testing"
)

// What users name today must stay accepted: nested folders, dots inside and at the start of a
// segment, spaces, other scripts, the longest path and segment the rule allows.
func TestCheckAccepts(t *testing.T) {
	for _, p := range []string{
		"env.yml", ".env", "a..b", "v1.2.3", "models/bert/config.json", "dir/.hidden/x",
		"with space.yml", "模型/权重.bin", "a-b_c+d@e=f,g~h", "...", "x.",
		strings.Repeat("a", MaxSegment),
		strings.Repeat(strings.Repeat("a", 254)+"/", 4) + strings.Repeat("b", MaxLen-4*255),
	} {
		if err := Check(p); err != nil {
			t.Errorf("Check(%.40q) = %v, want nil", p, err)
		}
	}
}

// Each refusal names the path and says why, so a user can fix it.
func TestCheckRefuses(t *testing.T) {
	for _, c := range []struct{ in, reason string }{
		{"", "is empty"},
		{"/etc/x.yml", `starts with "/"`},
		{"//etc/x.yml", `starts with "/"`},
		{"a//b.yml", "empty segment"},
		{"dir/", "empty segment"},
		{"./a.yml", `"." segment`},
		{"a/./b", `"." segment`},
		{"..", `".." segment`},
		{"../a", `".." segment`},
		{"a/../../b", `".." segment`},
		{`a\b`, "backslash"},
		{`..\x`, "backslash"},
		{"a\x00b", "control character (U+0000)"},
		{"a\nb", "control character (U+000A)"},
		{"a\tb", "control character (U+0009)"},
		{"a\x7fb", "control character (U+007F)"},
		{"a\u0085b", "control character (U+0085)"},
		{"a\xffb", "not valid UTF-8"},
		{strings.Repeat("a", MaxSegment+1), "segment of 256 bytes"},
		{strings.Repeat("a/", MaxLen/2) + "a", "bytes long (at most 1024)"},
	} {
		err := Check(c.in)
		var pe *Error
		if !errors.As(err, &pe) {
			t.Errorf("Check(%.40q) = %v, want an *Error", c.in, err)
			continue
		}
		if !strings.Contains(pe.Reason, c.reason) {
			t.Errorf("Check(%.40q): reason %q, want it to say %q", c.in, pe.Reason, c.reason)
		}
		if want := c.in; len(want) <= 256 && pe.Path != want {
			t.Errorf("Check(%.40q): the error names %q", c.in, pe.Path)
		}
		if len(pe.Path) > 256 || len(err.Error()) > 400 {
			t.Errorf("Check(%.40q): an error of %d bytes about a long path", c.in, len(err.Error()))
		}
	}
}

func TestName(t *testing.T) {
	for _, ok := range []string{"weights.bin", ".env", "a..b", "v1"} {
		if err := Name(ok); err != nil {
			t.Errorf("Name(%q) = %v", ok, err)
		}
	}
	for _, c := range []struct{ in, reason string }{
		{"a/b", "one segment"},
		{"..", `".." segment`},
		{"/a", `starts with "/"`},
		{"", "is empty"},
	} {
		var pe *Error
		if err := Name(c.in); !errors.As(err, &pe) || !strings.Contains(pe.Reason, c.reason) {
			t.Errorf("Name(%q) = %v, want a reason saying %q", c.in, err, c.reason)
		}
	}
}

// Clean accepts every spelling of a file inside its folder and refuses what leaves it.
func TestClean(t *testing.T) {
	for in, want := range map[string]string{
		"env.yml": "env.yml", "./env.yml": "env.yml", "a//b/": "a/b", "a/../b": "b", ".": ".", "./": ".",
		"dist/*.tar.gz": "dist/*.tar.gz",
	} {
		if got, err := Clean(in); err != nil || got != want {
			t.Errorf("Clean(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, c := range []struct{ in, reason string }{
		{"..", "leads out"},
		{"a/../../b", "leads out"},
		{"/etc/passwd", `starts with "/"`},
		{`a\..\..\b`, "backslash"},
		{"a\x00", "control character"},
		{"", "is empty"},
	} {
		_, err := Clean(c.in)
		var pe *Error
		if !errors.As(err, &pe) || !strings.Contains(pe.Reason, c.reason) || pe.Path != c.in {
			t.Errorf("Clean(%q) = %v, want the path and a reason saying %q", c.in, err, c.reason)
		}
	}
}
