package logs

import "testing"

func TestAppendData(t *testing.T) {
	cases := []struct{ text, want string }{
		{"plain", "data: plain\n"},
		{"line\n", "data: line\ndata: \n"},
		{"a\nb", "data: a\ndata: b\n"},
		{"\n\n", "data: \ndata: \ndata: \n"},
		{" leading space", "data:  leading space\n"},
		{"\x1b[31mred\x1b[0m\n", "data: \x1b[31mred\x1b[0m\ndata: \n"},
		{"50%\r100%", "data: 50%\x1b[1G100%\n"},
		{"dos\r\nline", "data: dos\x1b[1G\ndata: line\n"},
		{"\r", "data: \x1b[1G\n"},
	}
	for _, tc := range cases {
		if got := string(appendData(nil, []byte(tc.text))); got != tc.want {
			t.Errorf("appendData(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

func TestCompleteUTF8(t *testing.T) {
	const tick = "✓"  // 3 bytes
	const emoji = "🚀" // 4 bytes
	cases := []struct {
		text string
		want int
	}{
		{"", 0},
		{"ascii", 5},
		{"a" + tick, 4},
		{"a" + tick[:1], 1},
		{"a" + tick[:2], 1},
		{emoji[:3], 0},
		{"x" + emoji, 5},
		{"bad \xff", 5},     // invalid bytes are not held back
		{"bad \x80\x80", 6}, // nor lone continuation bytes
	}
	for _, tc := range cases {
		if got := completeUTF8([]byte(tc.text)); got != tc.want {
			t.Errorf("completeUTF8(%q) = %d, want %d", tc.text, got, tc.want)
		}
	}
}
