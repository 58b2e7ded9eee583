package runner

import (
	"bytes"
	"fmt"
	"io"
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

// A multi-line secret used to be masked only whole, so a tool printing it line by line showed
// it. Every line of MinSecretLine bytes or more (blanks trimmed) is now a secret of its own, in
// any stream split; shorter lines are not, or every "ab" of a log would go.
func TestMaskerLinesOfMultiLineSecrets(t *testing.T) {
	secrets := []string{"line1-AAAA1111\nline2-BBBB2222\r\nab\n   cd  \n\tindented-CCCC\t\n", "x", "one-line"}
	tests := []struct{ in, want string }{
		{"line1-AAAA1111\nline2-BBBB2222\r\nab\n   cd  \n\tindented-CCCC\t\n", "***"},
		{"last: line2-BBBB2222\n", "last: ***\n"},
		{"MULTI=line1-AAAA1111\nline2-BBBB2222\r\n", "MULTI=***\n***\r\n"},
		{"indented-CCCC", "***"},
		{"ab cd abcd", "ab cd abcd"},
		{"a one-byte secret: x", "a one-byte secret: ***"},
		{"one-line\n", "***\n"},
	}
	for _, tt := range tests {
		whole := maskString(tt.in, secrets)
		if whole != tt.want {
			t.Errorf("%q: %q, want %q", tt.in, whole, tt.want)
		}
		for cut := 1; cut < len(tt.in); cut++ {
			var out bytes.Buffer
			m := newMasker(&out, secrets)
			m.Write([]byte(tt.in[:cut]))
			m.Write([]byte(tt.in[cut:]))
			m.Flush()
			if out.String() != tt.want {
				t.Errorf("%q cut at %d: %q, want %q", tt.in, cut, out.String(), tt.want)
			}
		}
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

// BenchmarkMaskLog is the masker's share of a job's log: 1 MiB of build output per op, in the
// writes of a few KiB an executor makes, through a masker holding ten tokens and a 2048-bit
// certificate's PEM (a multi-line secret: each of its lines is masked too).
//
//	go test -run '^$' -bench MaskLog -benchmem ./agent/runner
func BenchmarkMaskLog(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	word := func(n int, alphabet string) string {
		var s strings.Builder
		for range n {
			s.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		return s.String()
	}
	var secrets []string
	for i := range 10 {
		secrets = append(secrets, fmt.Sprintf("tok-%d-%s", i, word(24, b64)))
	}
	cert := "-----BEGIN CERTIFICATE-----\n"
	for range 20 {
		cert += word(64, b64) + "\n"
	}
	secrets = append(secrets, cert+"-----END CERTIFICATE-----\n")
	var in strings.Builder
	words := []string{"Collecting", "torch==2.3.1", "Downloading", "https://files.example/pkg.whl", "(2.1 MB)", "----",
		"Successfully", "installed", "numpy-1.26.4", "Step", "3/12", ":", "RUN", "make", "-j8", "ok", "PASS", "--- PASS:", "Test", "0.01s"}
	for in.Len() < 1<<20 {
		in.WriteString(words[rng.IntN(len(words))])
		if rng.IntN(8) == 0 {
			in.WriteByte('\n')
		} else {
			in.WriteByte(' ')
		}
	}
	data := []byte(in.String())
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		m := newMasker(io.Discard, secrets)
		for p := data; len(p) > 0; {
			n := min(len(p), 4096)
			m.Write(p[:n])
			p = p[n:]
		}
		m.Flush()
	}
}
