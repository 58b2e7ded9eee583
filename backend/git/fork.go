package git

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Forks share objects the way `git clone --shared` does: the fork's objects/info/alternates
// names the source's object directory, so a fork costs its refs and whatever is pushed to it
// afterwards, not a second copy of the history. The price is that the source must never lose
// an object a fork may borrow: ShareObjects sets gc.pruneExpire=never in the source (git's
// automatic gc after a push then keeps unreachable objects), and a source that goes away first
// gives every fork its own copy (Dissociate).

// ShareObjects makes the repository at path borrow every object of the one at from.
func ShareObjects(ctx context.Context, path, from string) error {
	abs, err := filepath.Abs(filepath.Join(from, "objects"))
	if err != nil {
		return fmt.Errorf("git: share objects of %s: %w", from, err)
	}
	if _, err := run(ctx, from, nil, "config", "gc.pruneExpire", "never"); err != nil {
		return fmt.Errorf("git: share objects of %s: %w", from, err)
	}
	info := filepath.Join(path, "objects", "info")
	if err := os.MkdirAll(info, 0o755); err != nil {
		return fmt.Errorf("git: share objects of %s: %w", from, err)
	}
	if err := os.WriteFile(filepath.Join(info, "alternates"), []byte(abs+"\n"), 0o644); err != nil {
		return fmt.Errorf("git: share objects of %s: %w", from, err)
	}
	return nil
}

// CopyRefs gives the repository at path the branches and tags of the one at from, which must
// be objects it can reach (ShareObjects). Other refs (pull request refs) are not copied.
func CopyRefs(ctx context.Context, path, from string) error {
	out, err := run(ctx, from, nil, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/", "refs/tags/")
	if err != nil {
		return fmt.Errorf("git: refs of %s: %w", from, err)
	}
	var cmds strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		sha, ref, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		fmt.Fprintf(&cmds, "create %s %s\n", ref, sha)
	}
	if cmds.Len() == 0 {
		return nil
	}
	if _, err := run(ctx, path, strings.NewReader(cmds.String()), "update-ref", "--stdin"); err != nil {
		return fmt.Errorf("git: copy refs of %s: %w", from, err)
	}
	return nil
}

// FetchCommit brings commit sha of the repository at from, and everything it reaches, into the
// one at path, with no ref and no FETCH_HEAD written (concurrent fetches do not race on it).
// Only what path lacks travels: a fork and its source share most objects.
func FetchCommit(ctx context.Context, path, from, sha string) error {
	if !isSHA(sha) {
		return fmt.Errorf("%w: fetch %q", ErrInvalid, sha)
	}
	abs, err := filepath.Abs(from)
	if err != nil {
		return fmt.Errorf("git: fetch from %s: %w", from, err)
	}
	if _, err := run(ctx, path, nil, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", abs, sha); err != nil {
		return fmt.Errorf("git: fetch %s from %s: %w", sha, from, err)
	}
	return nil
}

// Dissociate copies every object the repository at path borrows into its own packs and stops
// borrowing (as `git clone --dissociate` does): the fork outlives its source.
func Dissociate(ctx context.Context, path string) error {
	alt := filepath.Join(path, "objects", "info", "alternates")
	if _, err := os.Stat(alt); os.IsNotExist(err) {
		return nil
	}
	if _, err := run(ctx, path, nil, "repack", "-a", "-d", "-q"); err != nil {
		return fmt.Errorf("git: dissociate %s: %w", path, err)
	}
	if err := os.Remove(alt); err != nil {
		return fmt.Errorf("git: dissociate %s: %w", path, err)
	}
	return nil
}
