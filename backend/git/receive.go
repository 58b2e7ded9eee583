package git

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// A push names its refs in the first pkt-lines of the receive-pack request, before the pack:
//
//	[shallow <oid>]…  <old> <new> <ref>\0<capabilities>  [<old> <new> <ref>]…  0000  [pack]
//
// The handler reads just that command list before git does. When every ref name passes
// CheckRefName, git gets the very same bytes and runs as usual; when one does not, git never
// runs: the handler answers the push itself in receive-pack's own report format, refusing
// every ref of it, so the client prints why and nothing is written. A hook could not do this:
// post-receive runs after the refs are updated, and a pre-receive hook would need more than
// /bin/sh to tell UTF-8 from other bytes.
//
// The whole push is refused, not only the bad ref, as with a failing pre-receive hook on
// GitHub: the pusher fixes the name and pushes again, and never ends up with half a push.
// Deleting a ref is always let through to git (so a ref created before this check can be
// removed), and OnPush never sees such a ref (Handler.servePush).

// refCommand is one ref update a push asks for.
type refCommand struct {
	old, new, ref string
}

// maxPktLen is the longest pkt-line git sends (LARGE_PACKET_MAX).
const maxPktLen = 65520

// peekCommands reads the command list at the start of a receive-pack body from br and returns
// the commands, the capabilities of the first one, and every byte it read, which the caller
// hands to git in front of the rest of br. It never fails: what it does not understand (a push
// certificate, a malformed line, a body that ends early) it leaves to git, which reads the
// same bytes and answers for itself; it then returns no commands.
func peekCommands(br *bufio.Reader) (cmds []refCommand, caps []string, consumed []byte) {
	var read bytes.Buffer
	for {
		payload, flush, ok := readPkt(br, &read)
		if !ok {
			return nil, nil, read.Bytes()
		}
		if flush {
			return cmds, caps, read.Bytes()
		}
		line := strings.TrimSuffix(string(payload), "\n")
		if strings.HasPrefix(line, "shallow ") && len(cmds) == 0 {
			continue
		}
		line, capList, hasCaps := strings.Cut(line, "\x00")
		if hasCaps && len(cmds) == 0 {
			caps = strings.Fields(capList)
		}
		old, rest, _ := strings.Cut(line, " ")
		sha, ref, _ := strings.Cut(rest, " ")
		if !isSHA(old) || !isSHA(sha) || ref == "" {
			return nil, nil, read.Bytes()
		}
		cmds = append(cmds, refCommand{old: old, new: sha, ref: ref})
	}
}

// readPkt reads one pkt-line from br, copying its raw bytes to raw. ok is false for anything
// but a data line or a flush.
func readPkt(br *bufio.Reader, raw *bytes.Buffer) (payload []byte, flush, ok bool) {
	var head [4]byte
	got, err := io.ReadFull(br, head[:])
	raw.Write(head[:got])
	if err != nil {
		return nil, false, false
	}
	n, err := strconv.ParseUint(string(head[:]), 16, 32)
	switch {
	case err != nil:
		return nil, false, false
	case n == 0:
		return nil, true, true
	case n <= 4 || n > maxPktLen:
		return nil, false, false
	}
	payload = make([]byte, n-4)
	got, err = io.ReadFull(br, payload)
	raw.Write(payload[:got])
	return payload, false, err == nil
}

// invalidRefs returns why each ref that cmds create or update may not be pushed, by name.
// Deletions are not checked.
func invalidRefs(cmds []refCommand) map[string]refusal {
	bad := map[string]refusal{}
	for _, c := range cmds {
		if IsZeroSHA(c.new) {
			continue
		}
		if err := CheckRefName(c.ref); err != nil {
			bad[c.ref] = refusal{report: "invalid ref name: " + err.Error(), message: err.Error()}
		}
	}
	return bad
}

// refusal is why a ref of a push is refused: report goes in the report-status line of the ref,
// message on the "remote: error: refusing …" line the client prints.
type refusal struct{ report, message string }

// inflatePush returns the receive-pack request as git must get it: a clone of r whose body is
// inflated when the client sent it gzip-compressed (the handler reads the commands from it),
// so it no longer says Content-Encoding, which would make git inflate it again.
func inflatePush(r *http.Request) (*http.Request, error) {
	out := r.Clone(r.Context())
	if enc := r.Header.Get("Content-Encoding"); enc != "gzip" && enc != "x-gzip" {
		return out, nil
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		return nil, err
	}
	out.Body = zr
	out.Header.Del("Content-Encoding")
	out.ContentLength = -1
	return out, nil
}

// refusePush answers a push without running git: each ref in bad is refused with its reason
// (one line: control characters become spaces) and every other ref of the push as not updated, in the report format the client asked for
// (report-status, inside side band 1 when it asked for side-band-64k), with the reasons also
// on side band 2, which the client prints as "remote: …" lines.
func refusePush(w http.ResponseWriter, body io.Reader, cmds []refCommand, caps []string, bad map[string]refusal, others string) {
	// The client sends its whole pack before it reads an answer; one that is cut off reports
	// a broken connection instead of the reasons.
	_, _ = io.Copy(io.Discard, body)

	var messages, report bytes.Buffer
	writePkt(&report, "unpack ok\n")
	for _, c := range cmds {
		reason := others
		if why, refused := bad[c.ref]; refused {
			reason = oneLine(why.report)
			fmt.Fprintf(&messages, "error: refusing %q: %s\n", c.ref, oneLine(why.message))
		}
		writePkt(&report, "ng "+c.ref+" "+reason+"\n")
	}
	report.WriteString("0000")

	has := func(name string) bool {
		for _, c := range caps {
			if c == name {
				return true
			}
		}
		return false
	}
	if !has("report-status") && !has("report-status-v2") {
		// A client that asked for no report could not tell the push failed from a 200.
		http.Error(w, strings.TrimSpace(messages.String()), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/x-git-receive-pack-result")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	band := 0
	switch {
	case has("side-band-64k"):
		band = maxPktLen - 5
	case has("side-band"):
		band = 1000 - 5
	}
	if band == 0 {
		w.Write(report.Bytes())
		return
	}
	var out bytes.Buffer
	for _, line := range strings.SplitAfter(messages.String(), "\n") {
		if line != "" {
			writePkt(&out, "\x02"+line)
		}
	}
	for b := report.Bytes(); len(b) > 0; {
		n := min(band, len(b))
		writePkt(&out, "\x01"+string(b[:n]))
		b = b[n:]
	}
	out.WriteString("0000")
	w.Write(out.Bytes())
}

// oneLine is s with its control characters as spaces: a reason goes into one pkt-line.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// writePkt appends s to b as one pkt-line.
func writePkt(b *bytes.Buffer, s string) {
	fmt.Fprintf(b, "%04x%s", len(s)+4, s)
}
