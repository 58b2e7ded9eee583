package git

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Errors of the storage helpers. Each is wrapped with %w, so test with errors.Is.
var (
	// ErrNotExist: the file or path is not in the commit's tree. It wraps fs.ErrNotExist so code
	// that already checks for a missing file keeps working.
	ErrNotExist = fmt.Errorf("git: no such file in commit: %w", fs.ErrNotExist)
	// ErrUnknownRevision: a ref, SHA or revision that names no commit in the repository.
	ErrUnknownRevision = errors.New("git: unknown revision")
	// ErrInvalid: an argument (path, revision, branch name, limit) that is refused before git
	// runs, because it is malformed or could escape where it is meant to point.
	ErrInvalid = errors.New("git: invalid argument")
	// ErrTooLarge: a file bigger than MaxFileSize (the error is a *TooLargeError).
	ErrTooLarge = errors.New("git: file too large")
	// ErrNotFile: the path names a directory (tree) or a submodule (commit), not a file.
	ErrNotFile = errors.New("git: not a file")
)

// TooLargeError is ReadFile's error for a file over MaxFileSize; it matches ErrTooLarge. Its
// TooLarge method gives the sizes, for messages meant for people (the .cnb.yml engine's
// diagnostics read it).
type TooLargeError struct {
	File, Commit string
	Size, Limit  int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%v: %s at %s is %d bytes, the limit is %d", ErrTooLarge, e.File, e.Commit, e.Size, e.Limit)
}

// Is makes errors.Is(err, ErrTooLarge) hold.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// TooLarge returns the file's size and the limit it is over.
func (e *TooLargeError) TooLarge() (size, limit int64) { return e.Size, e.Limit }

// ZeroSHA is the "no object" id git uses in ref updates for a created (old) or deleted (new) ref.
const ZeroSHA = "0000000000000000000000000000000000000000"

// IsZeroSHA reports whether sha is all zeros (of either hash length): the ref did not exist
// before, or no longer exists after.
func IsZeroSHA(sha string) bool {
	return sha != "" && strings.Trim(sha, "0") == ""
}

// isSHA reports whether s is a full object id: 40 (SHA-1) or 64 (SHA-256) lowercase hex digits.
func isSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// checkRev refuses a revision that could be anything but a revision: empty, an option, or
// containing whitespace, control characters or ":" (which would turn it into a path lookup).
// Revisions reach git on the stdin of cat-file --batch-check, one per line, never as arguments.
func checkRev(rev string) error {
	if rev == "" || strings.HasPrefix(rev, "-") || len(rev) > 1024 {
		return fmt.Errorf("%w: revision %q", ErrInvalid, rev)
	}
	for _, c := range rev {
		if c <= ' ' || c == 0x7f || c == ':' {
			return fmt.Errorf("%w: revision %q", ErrInvalid, rev)
		}
	}
	return nil
}

// checkBranch refuses what git would not accept as a branch name (git check-ref-format rules),
// and names that start with "-", which git branch refuses too.
func checkBranch(ctx context.Context, name string) error {
	if name == "" || strings.HasPrefix(name, "-") {
		return fmt.Errorf("%w: branch name %q", ErrInvalid, name)
	}
	if _, err := run(ctx, "", nil, "check-ref-format", "refs/heads/"+name); err != nil {
		if exitCode(err) == 1 {
			return fmt.Errorf("%w: branch name %q", ErrInvalid, name)
		}
		return err
	}
	return nil
}

// InitBare creates an empty bare repository at path whose HEAD points at refs/heads/<defaultBranch>.
// The parent directories are created as needed. It is not idempotent on purpose: when path
// already exists the error wraps fs.ErrExist and nothing there is touched, so two repos can
// never end up sharing a directory. A failed init removes what it created.
func InitBare(ctx context.Context, path, defaultBranch string) error {
	if err := checkBranch(ctx, defaultBranch); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("git: init %s: %w", path, err)
	}
	// Mkdir fails when path exists, which makes creation atomic even between two servers.
	if err := os.Mkdir(path, 0o755); err != nil {
		return fmt.Errorf("git: init %s: %w", path, err)
	}
	// An empty template: no sample hooks or description files; hooks come from the handler.
	cmd := command(ctx, "", "init", "--quiet", "--bare", "--template=", "--initial-branch="+defaultBranch)
	cmd.Dir = path
	stderr := &capWriter{max: maxStderr}
	cmd.Stderr = stderr
	if err := cmd.Run(); err != nil {
		_ = os.RemoveAll(path)
		return fmt.Errorf("git: init %s: %w", path, commandError([]string{"init"}, err, stderr))
	}
	return nil
}

// SetHEAD points the repository's HEAD at refs/heads/<branch>: the default branch clones check
// out. The branch need not exist yet (an empty repo's HEAD points at an unborn branch too).
func SetHEAD(ctx context.Context, repoPath, branch string) error {
	if err := checkBranch(ctx, branch); err != nil {
		return err
	}
	if _, err := run(ctx, repoPath, nil, "symbolic-ref", "HEAD", "refs/heads/"+branch); err != nil {
		return fmt.Errorf("git: set HEAD of %s: %w", repoPath, err)
	}
	return nil
}

// IsEmpty reports whether the repository has no refs at all, as before its first push.
func IsEmpty(ctx context.Context, repoPath string) (bool, error) {
	out, err := run(ctx, repoPath, nil, "for-each-ref", "--count=1", "--format=%(refname)")
	if err != nil {
		return false, fmt.Errorf("git: refs of %s: %w", repoPath, err)
	}
	return len(out) == 0, nil
}

// Branches lists the short names of all branches ("main", "dev/x"), sorted by name.
func Branches(ctx context.Context, repoPath string) ([]string, error) {
	names, err := readList(ctx, repoPath, '\n', 0, "for-each-ref", "--format=%(refname:strip=2)", "refs/heads/")
	if err != nil {
		return nil, fmt.Errorf("git: branches of %s: %w", repoPath, err)
	}
	return names, nil
}

// ResolveRef returns the full SHA of the commit ref names: a branch or tag (short or full
// "refs/heads/…" name; full names are unambiguous), a SHA or any revision git understands.
// Annotated tags are peeled to their commit. A ref that names no commit is ErrUnknownRevision.
func ResolveRef(ctx context.Context, repoPath, ref string) (string, error) {
	shas, err := resolveCommits(ctx, repoPath, ref)
	if err != nil {
		return "", err
	}
	return shas[0], nil
}

// resolveCommits peels every rev to the full SHA of a commit, in one git process.
func resolveCommits(ctx context.Context, repoPath string, revs ...string) ([]string, error) {
	names := make([]string, len(revs))
	for i, rev := range revs {
		if err := checkRev(rev); err != nil {
			return nil, err
		}
		names[i] = rev + "^{commit}"
	}
	objs, err := lookup(ctx, repoPath, names...)
	if err != nil {
		return nil, err
	}
	shas := make([]string, len(revs))
	for i, o := range objs {
		if o.typ == "" {
			return nil, fmt.Errorf("%w: %q in %s", ErrUnknownRevision, revs[i], repoPath)
		}
		shas[i] = o.sha
	}
	return shas, nil
}

// object is one answer of cat-file --batch-check; typ is "" when the name matched nothing.
type object struct {
	sha, typ string
	size     int64
}

// lookup asks git what each name ("<rev>", "<rev>:<path>") points at. Names travel on stdin,
// one a line, so no name can ever be taken for an option.
func lookup(ctx context.Context, repoPath string, names ...string) ([]object, error) {
	var in strings.Builder
	for _, n := range names {
		if strings.ContainsAny(n, "\n\x00") {
			return nil, fmt.Errorf("%w: %q", ErrInvalid, n)
		}
		in.WriteString(n)
		in.WriteByte('\n')
	}
	out, err := run(ctx, repoPath, strings.NewReader(in.String()), "cat-file", "--batch-check")
	if err != nil {
		return nil, fmt.Errorf("git: look up objects in %s: %w", repoPath, err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(names) {
		return nil, fmt.Errorf("git: look up objects in %s: %d answers for %d names", repoPath, len(lines), len(names))
	}
	objs := make([]object, len(lines))
	for i, line := range lines {
		// A hit is exactly "<sha> <type> <size>"; anything else is "<name> missing" (or
		// "ambiguous"), whatever spaces the name itself holds.
		f := strings.Split(line, " ")
		if len(f) != 3 || !isSHA(f[0]) {
			continue
		}
		size, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			continue
		}
		objs[i] = object{sha: f[0], typ: f[1], size: size}
	}
	return objs, nil
}

// readList runs git and splits its stdout on sep, keeping at most limit items (0: all). Once
// limit is reached git is stopped rather than read to the end, so a huge diff costs nothing.
func readList(ctx context.Context, repoPath string, sep byte, limit int, args ...string) ([]string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := command(ctx, repoPath, args...)
	stderr := &capWriter{max: maxStderr}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w", args[0], err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("git %s: %w", args[0], err)
	}
	var items []string
	r := bufio.NewReader(stdout)
	for limit <= 0 || len(items) < limit {
		item, err := r.ReadString(sep)
		if item = strings.TrimSuffix(item, string(sep)); item != "" {
			items = append(items, item)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			_ = cmd.Wait()
			return nil, fmt.Errorf("git %s: read: %w", args[0], err)
		}
	}
	if limit > 0 && len(items) >= limit {
		// Enough: kill git instead of draining the rest; its exit error means nothing now.
		cancel()
		_ = cmd.Wait()
		return items, nil
	}
	if err := cmd.Wait(); err != nil {
		return nil, commandError(args, err, stderr)
	}
	return items, nil
}
