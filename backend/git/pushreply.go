package git

import (
	"bytes"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"unicode/utf8"
)

// After a push, the pusher's terminal shows the handler's own lines (OnPush's: links to the
// builds it started) as "remote: …", as GitHub shows a pull request's link. git has the place
// for them: with a side band, receive-pack's answer is a stream of pkt-lines, each tagged with
// its band, and it ends with a flush-pkt:
//
//	<len>\x01<the report-status, itself pkt-lines>   band 1: data
//	<len>\x02<a hook's output line>                  band 2: what the client prints as "remote: …"
//	0000                                             the end: the client stops reading here
//
// The post-receive hook's output comes on band 2 between the report and that flush. The
// handler's lines go to the same place: replyWriter passes git's answer on as it comes but for
// that last flush-pkt, which it holds back until OnPush has answered; then finish sends the
// lines and the flush. Anything it does not understand makes it step aside: every byte goes
// on unchanged and no line is added, so a push's answer is never corrupted.

// pushResultType is the Content-Type of receive-pack's answer.
const pushResultType = "application/x-git-receive-pack-result"

// flushPkt is the pkt-line that ends a side-band answer.
const flushPkt = "0000"

// sideBandPayload is the longest payload (band byte included) of one pkt-line on the side band
// caps asked for, or 0 when they asked for none: then the client has no "remote: …" lines.
func sideBandPayload(caps []string) int {
	switch {
	case slices.Contains(caps, "side-band-64k"):
		return maxPktLen - 4
	case slices.Contains(caps, "side-band"):
		return 1000 - 4
	}
	return 0
}

// replyWriter is the http.ResponseWriter git http-backend writes a receive-pack answer to. It
// follows the pkt-line framing only to know where each pkt-line starts, and holds back just a
// flush-pkt (4 bytes) and the first bytes of a pkt-line header split across writes (at most
// 3): the client can do nothing with either before more comes.
type replyWriter struct {
	http.ResponseWriter
	payload int // longest pkt-line payload of the side band (sideBandPayload)

	wroteHeader bool
	aside       bool    // not an answer this writer understands: bytes pass unchanged, nothing is added
	head        [4]byte // the header of the next pkt-line, as far as it came
	nHead       int
	left        int  // bytes of the current pkt-line's payload still to pass on
	band        bool // the next byte is a band byte
	held        bool // a flush-pkt came and is held back: the end, unless more follows
}

// newReplyWriter wraps w for a push whose client asked for a side band with payload bytes per
// pkt-line (sideBandPayload, > 0).
func newReplyWriter(w http.ResponseWriter, payload int) *replyWriter {
	return &replyWriter{ResponseWriter: w, payload: payload}
}

// Unwrap lets http.ResponseController reach the server's writer (flushing, full duplex). A
// flush never sends what is held back, which is what the holding is for.
func (w *replyWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// WriteHeader steps aside for any answer but a successful receive-pack result: git's own
// errors (403, 500, a plain-text body) go to the client exactly as git wrote them.
func (w *replyWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.wroteHeader = true
		if code != http.StatusOK || w.Header().Get("Content-Type") != pushResultType {
			w.aside = true
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write passes p on, minus what it must hold back (see replyWriter). It reports all of p as
// written unless the client's connection failed.
func (w *replyWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.aside {
		return w.ResponseWriter.Write(p)
	}
	n := len(p)
	// What goes on from this call, in order: pieces of p, and the held-back bytes once they
	// are known not to be the end. One Write to the server's writer per call.
	var out bytes.Buffer
	for len(p) > 0 {
		if w.left > 0 {
			if w.band {
				// Band 3 is git's fatal error: the client stops at it, so lines after it would
				// be lost. Any other byte is not a side band at all.
				if p[0] != 1 && p[0] != 2 {
					return w.stepAside(n, &out, p)
				}
				w.band = false
			}
			k := min(w.left, len(p))
			out.Write(p[:k])
			w.left -= k
			p = p[k:]
			continue
		}
		k := copy(w.head[w.nHead:], p)
		w.nHead += k
		p = p[k:]
		if w.nHead < len(w.head) {
			break
		}
		size, err := strconv.ParseUint(string(w.head[:]), 16, 32)
		if err != nil || size != 0 && (size <= 4 || int(size)-4 > w.payload) {
			// Not the framing expected (a delim-pkt, a too long line, no pkt-line at all).
			return w.stepAside(n, &out, p)
		}
		if w.held {
			// The flush held back was not the last pkt-line after all.
			out.WriteString(flushPkt)
			w.held = false
		}
		w.nHead = 0
		if size == 0 {
			w.held = true
			continue
		}
		out.Write(w.head[:])
		w.left, w.band = int(size)-4, true
	}
	if err := w.send(out.Bytes()); err != nil {
		return 0, err
	}
	return n, nil
}

// stepAside sends out, whatever is held back and rest, and makes the writer pass every later
// byte unchanged. n is what Write reports when that worked.
func (w *replyWriter) stepAside(n int, out *bytes.Buffer, rest []byte) (int, error) {
	w.aside = true
	w.releaseHeld(out)
	out.Write(rest)
	if err := w.send(out.Bytes()); err != nil {
		return 0, err
	}
	return n, nil
}

// releaseHeld appends what is held back to out, in the order it came.
func (w *replyWriter) releaseHeld(out *bytes.Buffer) {
	if w.held {
		out.WriteString(flushPkt)
		w.held = false
	}
	out.Write(w.head[:w.nHead])
	w.nHead = 0
}

func (w *replyWriter) send(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	_, err := w.ResponseWriter.Write(b)
	return err
}

// finish ends the answer once git has: when git's last pkt-line was the flush held back, it
// sends lines on band 2 (each one pkt-line, control characters as spaces, cut to fit) and then
// that flush; otherwise it only sends what is held back. It reports whether the lines went
// out, and flushes. Call it once, after git http-backend has ended.
func (w *replyWriter) finish(lines []string) (bool, error) {
	var out bytes.Buffer
	added := !w.aside && w.held && w.nHead == 0 && w.left == 0
	if added {
		for _, line := range lines {
			writePkt(&out, "\x02"+fitLine(oneLine(line), w.payload-2)+"\n")
		}
	}
	w.releaseHeld(&out)
	w.aside = true
	if err := w.send(out.Bytes()); err != nil {
		return false, err
	}
	if err := http.NewResponseController(w).Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return false, err
	}
	return added && len(lines) > 0, nil
}

// fitLine cuts s to at most max bytes, never inside a UTF-8 sequence.
func fitLine(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && cut > max-utf8.UTFMax && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
