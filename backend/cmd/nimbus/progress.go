package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// progress reports a transfer on stderr: a bar redrawn in place on a terminal, else a line now
// and then (logs of CI jobs and services stay readable).
type progress struct {
	w     io.Writer
	tty   bool
	every time.Duration // between lines when not a terminal
	name  string
	total int64 // -1 when unknown
	start time.Time

	mu    sync.Mutex
	done  int64
	begin int64 // bytes that were there before (a resumed download), not counted in the rate
	last  time.Time
}

// isTerminal reports whether w is a character device (a terminal), without a terminal library.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func newProgress(w io.Writer, name string, total, already int64, every time.Duration) *progress {
	now := time.Now()
	return &progress{w: w, tty: isTerminal(w), every: every, name: name, total: total, start: now,
		done: already, begin: already, last: now}
}

// add counts n more bytes and redraws when it is time.
func (p *progress) add(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	since := time.Since(p.last)
	if (p.tty && since >= 100*time.Millisecond) || (!p.tty && since >= p.every) {
		p.last = time.Now()
		p.draw(false)
	}
}

// finish draws the final state and ends the bar's line.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draw(true)
}

func (p *progress) draw(final bool) {
	elapsed := time.Since(p.start).Seconds()
	rate := ""
	if elapsed > 0 {
		rate = " " + humanBytes(int64(float64(p.done-p.begin)/elapsed)) + "/s"
	}
	pct, of := "", ""
	if p.total > 0 {
		pct = fmt.Sprintf(" %3d%%", p.done*100/p.total)
		of = " of " + humanBytes(p.total)
	}
	if !p.tty {
		fmt.Fprintf(p.w, "%s:%s %s%s%s\n", p.name, pct, humanBytes(p.done), of, rate)
		return
	}
	bar := ""
	if p.total > 0 {
		const width = 30
		filled := int(p.done * width / p.total)
		bar = " [" + strings.Repeat("#", filled) + strings.Repeat(".", width-filled) + "]"
	}
	end := ""
	if final {
		end = "\n"
	}
	// \r and the erase-line escape redraw the bar in place.
	fmt.Fprintf(p.w, "\r\033[K%s%s%s %s%s%s%s", p.name, bar, pct, humanBytes(p.done), of, rate, end)
}

// counter counts the bytes that pass through it into a progress.
type counter struct {
	r io.Reader
	p *progress
}

func (c counter) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.p.add(int64(n))
	return n, err
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
