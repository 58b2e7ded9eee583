package runner

import (
	"bytes"
	"io"
	"slices"
)

// Mask is what a secret value turns into in a log.
const Mask = "***"

// masker replaces every secret value in a byte stream with Mask before the bytes reach w. A
// secret may arrive split across two writes (a process prints in pieces, the executor reads in
// pieces), so a tail that could still become a secret is held back until the next write shows
// whether it does; that tail is always shorter than the longest secret, so the log is never more
// than len(longest)-1 bytes behind. Where secrets overlap, the longest one at a position wins.
//
// A masker is not safe for concurrent use; the job log serialises its writers.
type masker struct {
	w       io.Writer
	secrets [][]byte  // longest first
	first   [256]bool // bytes a secret starts with: everything else is copied without a look
	pending []byte    // held-back tail
	out     []byte    // reused output buffer
}

// newMasker masks the non-empty values of secrets in what is written to w.
func newMasker(w io.Writer, secrets []string) *masker {
	m := &masker{w: w}
	m.add(secrets)
	return m
}

// add masks more values from now on (a job's imports from a secret repository, known once it
// starts).
func (m *masker) add(secrets []string) {
	for _, s := range secrets {
		if s != "" && !slices.ContainsFunc(m.secrets, func(b []byte) bool { return string(b) == s }) {
			m.secrets = append(m.secrets, []byte(s))
			m.first[s[0]] = true
		}
	}
	slices.SortStableFunc(m.secrets, func(a, b []byte) int { return len(b) - len(a) })
}

// Write masks p (with any held-back tail before it) and passes on everything that can no longer
// be the start of a secret. It reports len(p) written unless w fails.
func (m *masker) Write(p []byte) (int, error) {
	if len(m.secrets) == 0 {
		return m.w.Write(p)
	}
	data := p
	if len(m.pending) > 0 {
		data = append(m.pending, p...)
	}
	rest, err := m.emit(data, false)
	// rest aliases data, which may alias m.pending: copy before reusing the buffer.
	m.pending = append(m.pending[:0:0], rest...)
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
	data := m.pending
	m.pending = nil
	_, err := m.emit(data, true)
	return err
}

// emit writes data masked and returns the tail to hold back (none when final).
func (m *masker) emit(data []byte, final bool) ([]byte, error) {
	out := m.out[:0]
	start := 0
	var hold []byte
	for i := 0; i < len(data); i++ {
		if !m.first[data[i]] {
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
	for _, s := range m.secrets {
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
