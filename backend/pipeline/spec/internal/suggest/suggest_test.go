package suggest

import "testing"

func TestClosest(t *testing.T) {
	known := []string{"allowFailure", "image", "script", "stages"}
	for s, want := range map[string]string{
		"allow_failure": "allowFailure", // case, "_" and "-" are ignored first
		"imgae":         "image",        // two edits
		"stage":         "stages",
		"image":         "", // the word itself is no typo
		"deploy":        "", // too far from every known word
	} {
		if got := Closest(s, known); got != want {
			t.Errorf("Closest(%q) = %q, want %q", s, got, want)
		}
	}
	if got := Hint("imgae", known); got != `did you mean "image"?` {
		t.Errorf("Hint = %q", got)
	}
	if got := Suffix("imgae", known); got != `; did you mean "image"?` {
		t.Errorf("Suffix = %q", got)
	}
	if Hint("deploy", known) != "" || Suffix("deploy", known) != "" {
		t.Error("no hint without a close word")
	}
}
