package runner

import (
	"bytes"
	"io"
	"slices"
	"strings"
)

// Mask is what a secret value turns into in a log.
const Mask = "***"

// masker replaces every secret value in a byte stream with Mask before the bytes reach w. A
// secret may arrive split across two writes (a process prints in pieces, the executor reads in
// pieces), so a tail that could still become a secret is held back until the next write shows
// whether it does; that tail is always shorter than the longest secret, so the log is never more
// than len(longest)-1 bytes behind. Where secrets overlap, the longest one at a position wins.
//
// Finding secrets costs little whatever their number: a position is looked at only when its
// byte starts a secret (first) and the next byte is the second of one starting so (pairs), and
// then only the secrets starting with that byte are compared. A certificate's base64 lines start
// with almost any letter; without the pair test nearly every byte of a log was compared with
// every secret.
//
// A masker is not safe for concurrent use; the job log serialises its writers.
type masker struct {
	w       io.Writer
	secrets [][]byte        // longest first
	first   [256]bool       // bytes a secret starts with: everything else is copied without a look
	pairs   [1 << 10]uint64 // bit a<<8|b: a secret starts with the bytes a, b (a one-byte secret: with a, then anything)
	byFirst [256][][]byte   // the secrets that start with each byte, longest first
	pending []byte          // held-back tail
	join    []byte          // reused buffer of the tail and the next write
	out     []byte          // reused output buffer
}

// newMasker masks the non-empty values of secrets in what is written to w.
func newMasker(w io.Writer, secrets []string) *masker {
	m := &masker{w: w}
	m.add(secrets)
	return m
}

// MinSecretLine is the shortest line of a multi-line secret that is masked on its own. Tools
// print such a value line by line (`tail -n1`, `env`, a certificate's PEM body), so each line is
// masked as well as the whole, as GitHub Actions does; a line shorter than this (after its
// surrounding blanks are trimmed: `}`, `ab`, an indentation) is too common a string to mask
// everywhere, and shows when printed alone. A one-line secret is masked whatever its length.
const MinSecretLine = 4

// add masks more values from now on (a job's imports from a secret repository, known once it
// starts).
func (m *masker) add(secrets []string) {
	for _, s := range secrets {
		m.addOne(s)
		if !strings.ContainsAny(s, "\r\n") {
			continue
		}
		for line := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
			if line = strings.TrimSpace(line); len(line) >= MinSecretLine {
				m.addOne(line)
			}
		}
	}
	slices.SortStableFunc(m.secrets, func(a, b []byte) int { return len(b) - len(a) })
	m.byFirst = [256][][]byte{}
	for _, s := range m.secrets {
		m.byFirst[s[0]] = append(m.byFirst[s[0]], s)
	}
}

func (m *masker) addOne(s string) {
	if s == "" || slices.ContainsFunc(m.secrets, func(b []byte) bool { return string(b) == s }) {
		return
	}
	m.secrets = append(m.secrets, []byte(s))
	m.first[s[0]] = true
	if len(s) == 1 {
		for c := range 256 {
			m.setPair(s[0], byte(c))
		}
		return
	}
	m.setPair(s[0], s[1])
}

func (m *masker) setPair(a, b byte) {
	i := int(a)<<8 | int(b)
	m.pairs[i>>6] |= 1 << (i & 63)
}

// pair says whether a secret starts with a, b.
func (m *masker) pair(a, b byte) bool {
	i := int(a)<<8 | int(b)
	return m.pairs[i>>6]&(1<<(i&63)) != 0
}

// Write masks p (with any held-back tail before it) and passes on everything that can no longer
// be the start of a secret. It reports len(p) written unless w fails.
func (m *masker) Write(p []byte) (int, error) {
	if len(m.secrets) == 0 {
		return m.w.Write(p)
	}
	data := p
	if len(m.pending) > 0 {
		data = append(append(m.join[:0], m.pending...), p...)
		m.join = data
	}
	rest, err := m.emit(data, false)
	// rest aliases p or m.join, never m.pending.
	m.pending = append(m.pending[:0], rest...)
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush passes on the held-back tail: the stream has ended, so it cannot grow into a secret.
func (m *masker) Flush() error {
	if len(m.pending) == 0 {
		return nil
	}
	data := append(m.join[:0], m.pending...)
	m.join, m.pending = data, m.pending[:0]
	_, err := m.emit(data, true)
	return err
}

// emit writes data masked and returns the tail to hold back (none when final).
func (m *masker) emit(data []byte, final bool) ([]byte, error) {
	out := m.out[:0]
	start := 0
	var hold []byte
	for i := 0; i < len(data); i++ {
		if !m.first[data[i]] || i+1 < len(data) && !m.pair(data[i], data[i+1]) {
			continue
		}
		match, partial := m.matchAt(data[i:], final)
		if partial {
			hold = data[i:]
			data = data[:i]
			break
		}
		if match > 0 {
			out = append(out, data[start:i]...)
			out = append(out, Mask...)
			i += match - 1
			start = i + 1
		}
	}
	out = append(out, data[start:]...)
	m.out = out
	if len(out) > 0 {
		if _, err := m.w.Write(out); err != nil {
			return hold, err
		}
	}
	return hold, nil
}

// matchAt returns the length of the longest secret that b starts with, and whether b, which ends
// the data seen so far, is the beginning of a longer secret that may be completed by the next
// write (never when final).
func (m *masker) matchAt(b []byte, final bool) (int, bool) {
	for _, s := range m.byFirst[b[0]] {
		if len(b) >= len(s) {
			if bytes.HasPrefix(b, s) {
				return len(s), false // the longest full match; shorter ones cannot beat it
			}
			continue
		}
		if !final && bytes.HasPrefix(s, b) {
			return 0, true
		}
	}
	return 0, false
}

// maskString masks a whole string at once, for messages and exported values.
func maskString(s string, secrets []string) string {
	var b bytes.Buffer
	m := newMasker(&b, secrets)
	m.Write([]byte(s))
	m.Flush()
	return b.String()
}
