package runner

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestMaskerSplits(t *testing.T) {
	secrets := []string{"hunter2", "s3cr3t-token", "abc"}
	tests := []struct {
		name   string
		writes []string
		want   string
	}{
		{"whole", []string{"pw=hunter2\n"}, "pw=***\n"},
		{"split across two writes", []string{"pw=hun", "ter2\n"}, "pw=***\n"},
		{"split after the first byte", []string{"pw=h", "unter2 ok"}, "pw=*** ok"},
		{"split before the last byte", []string{"pw=hunter", "2"}, "pw=***"},
		{"one byte at a time", strings.Split("x hunter2 y", ""), "x *** y"},
		{"split over three writes", []string{"[s3c", "r3t-to", "ken]"}, "[***]"},
		{"a prefix that does not complete is passed on", []string{"hunt", "ing season"}, "hunting season"},
		{"a held prefix at the end is flushed", []string{"tail hunte"}, "tail hunte"},
		{"twice in one write", []string{"hunter2hunter2"}, "******"},
		{"back to back across writes", []string{"hunter2hun", "ter2"}, "******"},
		{"a prefix that restarts", []string{"hhunter", "2"}, "h***"},
		{"shorter secret inside a longer candidate", []string{"abcs3cr3t-token"}, "******"},
		{"nothing secret", []string{"plain ", "text\n"}, "plain text\n"},
		{"empty writes", []string{"", "hun", "", "ter2", ""}, "***"},
		{"multi-line output", []string{"a\nhunter2\nb\n"}, "a\n***\nb\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			m := newMasker(&out, secrets)
			for _, w := range tt.writes {
				n, err := m.Write([]byte(w))
				if err != nil || n != len(w) {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			if err := m.Flush(); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Fatalf("got %q, want %q", out.String(), tt.want)
			}
		})
	}
}

func TestMaskerHoldsBackLessThanTheLongestSecret(t *testing.T) {
	var out bytes.Buffer
	m := newMasker(&out, []string{"0123456789"})
	m.Write([]byte("log line 012345678"))
	// Everything up to the possible start of the secret is out already; the rest waits.
	if out.String() != "log line " || len(m.pending) != 9 {
		t.Fatalf("out %q, pending %q", out.String(), m.pending)
	}
	m.Write([]byte("X"))
	if out.String() != "log line 012345678X" || len(m.pending) != 0 {
		t.Fatalf("out %q, pending %q", out.String(), m.pending)
	}
}

func TestMaskerNoSecretsPassesThrough(t *testing.T) {
	var out bytes.Buffer
	m := newMasker(&out, []string{"", ""})
	m.Write([]byte("a"))
	if out.String() != "a" {
		t.Fatalf("%q", out.String())
	}
}

// TestMaskerRandomSplits cuts the same stream at random points: the masked result must never
// depend on where the cuts fall, and no secret may survive.
func TestMaskerRandomSplits(t *testing.T) {
	secrets := []string{"tok-ABCDEF", "ABC", "xyzzy", "\nmulti\nline\n"}
	var in strings.Builder
	rng := rand.New(rand.NewPCG(1, 2))
	parts := []string{"tok-ABCDEF", "ABC", "xyzzy", "\nmulti\nline\n", "tok-", "AB", "x", "xyz", " ", "\n", "hello"}
	for i := 0; i < 2000; i++ {
		in.WriteString(parts[rng.IntN(len(parts))])
	}
	whole := maskString(in.String(), secrets)
	for _, s := range secrets {
		if strings.Contains(whole, s) {
			t.Fatalf("secret %q survived", s)
		}
	}
	for trial := 0; trial < 200; trial++ {
		var out bytes.Buffer
		m := newMasker(&out, secrets)
		data := []byte(in.String())
		for len(data) > 0 {
			n := 1 + rng.IntN(min(len(data), 16))
			m.Write(data[:n])
			data = data[n:]
		}
		m.Flush()
		if out.String() != whole {
			t.Fatalf("trial %d: split output differs from whole-stream masking", trial)
		}
	}
}
