package git

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Line maps: where a line of a file at one commit is at another, for review comments that stay
// on their line as new commits arrive (GitHub's and GitLab's "outdated" rule). A line that the
// change between the two commits touched has no place: the comment is outdated.

// Hunk is one hunk of a zero-context diff: Old lines from OldStart replaced by New lines from
// NewStart (1-based; a count of 0 is an insertion after, or a deletion before, that line).
type Hunk struct {
	OldStart, OldLines, NewStart, NewLines int
}

// LineMap is the hunks of one file between two commits.
type LineMap struct {
	Hunks []Hunk
}

// Map returns where line (1-based, of the old commit's file) is in the new commit's, and false
// when the change touched it (or removed the file).
func (m *LineMap) Map(line int) (int, bool) {
	delta := 0
	for _, h := range m.Hunks {
		if h.OldLines == 0 {
			// Lines inserted after OldStart: those after it move down.
			if line <= h.OldStart {
				break
			}
			delta += h.NewLines
			continue
		}
		end := h.OldStart + h.OldLines - 1
		if line < h.OldStart {
			break
		}
		if line <= end {
			return 0, false
		}
		delta += h.NewLines - h.OldLines
	}
	return line + delta, true
}

// LinesBetween reads the hunks of path from commit from to commit to (`git diff -U0`, no rename
// detection: a renamed file's lines have no place). The same commit twice maps every line to
// itself.
func LinesBetween(ctx context.Context, repoPath, from, to, path string) (*LineMap, error) {
	if from == to {
		return &LineMap{}, nil
	}
	if err := checkRev(from); err != nil {
		return nil, err
	}
	if err := checkRev(to); err != nil {
		return nil, err
	}
	out, err := run(ctx, repoPath, nil, "diff", "-U0", "--no-color", "--no-ext-diff", "--no-renames", "--no-textconv", from, to, "--", ":(literal)"+path)
	if err != nil {
		return nil, err
	}
	return ParseHunks(out)
}

// ParseHunks reads the @@ headers of a unified diff.
func ParseHunks(diff []byte) (*LineMap, error) {
	m := &LineMap{}
	sc := bufio.NewScanner(bytes.NewReader(diff))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "@@ -") {
			continue
		}
		// @@ -a[,b] +c[,d] @@ …
		fields := strings.Fields(line)
		if len(fields) < 4 || fields[3] != "@@" {
			return nil, fmt.Errorf("git: hunk header %q", line)
		}
		var h Hunk
		var err error
		if h.OldStart, h.OldLines, err = hunkRange(fields[1], "-"); err != nil {
			return nil, fmt.Errorf("git: hunk header %q: %w", line, err)
		}
		if h.NewStart, h.NewLines, err = hunkRange(fields[2], "+"); err != nil {
			return nil, fmt.Errorf("git: hunk header %q: %w", line, err)
		}
		m.Hunks = append(m.Hunks, h)
	}
	return m, sc.Err()
}

func hunkRange(s, sign string) (start, n int, err error) {
	s, ok := strings.CutPrefix(s, sign)
	if !ok {
		return 0, 0, fmt.Errorf("range %q", s)
	}
	a, b, has := strings.Cut(s, ",")
	if start, err = strconv.Atoi(a); err != nil {
		return 0, 0, err
	}
	n = 1
	if has {
		if n, err = strconv.Atoi(b); err != nil {
			return 0, 0, err
		}
	}
	return start, n, nil
}
