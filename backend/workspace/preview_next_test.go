package workspace

import "testing"

// The preview login hop redirects to its next parameter. It refused "//evil.example" but let
// "/\evil.example" through, which a browser reads as "//evil.example": an open redirect on the
// preview origin. Tabs and newlines, which browsers drop from URLs, did the same.
func TestSamePage(t *testing.T) {
	for next, want := range map[string]string{
		"/":                    "/",
		"/app/?q=1#top":        "/app/?q=1#top",
		"/a/b%2Fc":             "/a/b%2Fc",
		"":                     "/",
		"app":                  "/",
		"https://evil.example": "/",
		"//evil.example":       "/",
		"/\\evil.example":      "/",
		"/\\/evil.example":     "/",
		"/a\\b":                "/",
		"/\t/evil.example":     "/",
		"/\n/evil.example":     "/",
		"/\x00x":               "/",
		"/\x7fx":               "/",
	} {
		if got := samePage(next); got != want {
			t.Errorf("samePage(%q) = %q, want %q", next, got, want)
		}
	}
}
