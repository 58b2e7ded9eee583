package git

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Reader answers many questions about one repository through one `git cat-file
// --batch-command` process: every revision it resolves, file it reads and commit it describes is
// a line on that process's stdin, not a process of its own. The build trigger opens one per ref
// update, so one push reads .cnb.yml, its includes and the commit through a single git.
//
// A Reader belongs to the context it was opened with (the process is killed when it ends) and is
// not safe for concurrent use. Close it. After a read fails at the protocol level (git died, ctx
// ended) every later call fails with the same error.
type Reader struct {
	ctx    context.Context
	repo   string
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *capWriter
	broken error
}

// OpenReader starts the reader's git process on the repository at repoPath.
func OpenReader(ctx context.Context, repoPath string) (*Reader, error) {
	cmd := command(ctx, repoPath, "cat-file", "--batch-command")
	stderr := &capWriter{max: maxStderr}
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("git: reader of %s: %w", repoPath, err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("git: reader of %s: %w", repoPath, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("git: reader of %s: %w", repoPath, err)
	}
	return &Reader{ctx: ctx, repo: repoPath, cmd: cmd, in: in, out: bufio.NewReader(out), stderr: stderr}, nil
}

// Close ends the git process: closing its stdin is what tells it to exit.
func (r *Reader) Close() error {
	r.in.Close()
	err := r.cmd.Wait()
	if r.broken != nil || err == nil {
		return nil // a broken reader already reported why
	}
	return commandError([]string{"cat-file"}, err, r.stderr)
}

// fail marks the reader broken: the conversation with git is out of step and cannot go on.
func (r *Reader) fail(err error) error {
	if r.broken == nil {
		if msg := strings.TrimSpace(r.stderr.String()); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		r.broken = fmt.Errorf("git: reader of %s: %w", r.repo, err)
	}
	return r.broken
}

// ask sends one command and reads the line that heads its answer.
func (r *Reader) ask(cmd, name string) (string, error) {
	if r.broken != nil {
		return "", r.broken
	}
	if strings.ContainsAny(name, "\n\x00") {
		return "", fmt.Errorf("%w: %q", ErrInvalid, name)
	}
	if _, err := io.WriteString(r.in, cmd+" "+name+"\n"); err != nil {
		return "", r.fail(err)
	}
	line, err := r.out.ReadString('\n')
	if err != nil {
		return "", r.fail(err)
	}
	return strings.TrimSuffix(line, "\n"), nil
}

// parseObject reads "<sha> <type> <size>"; anything else ("<name> missing", "<name> ambiguous",
// whatever spaces the name itself holds) is the zero object.
func parseObject(line string) object {
	f := strings.Split(line, " ")
	if len(f) != 3 || !isSHA(f[0]) {
		return object{}
	}
	size, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return object{}
	}
	return object{sha: f[0], typ: f[1], size: size}
}

// info says what name ("<rev>", "<rev>^{commit}", "<rev>:<path>") points at; typ is "" when it
// points at nothing.
func (r *Reader) info(name string) (object, error) {
	line, err := r.ask("info", name)
	if err != nil {
		return object{}, err
	}
	return parseObject(line), nil
}

// contents reads the object o (found by info) whole.
func (r *Reader) contents(o object) ([]byte, error) {
	line, err := r.ask("contents", o.sha)
	if err != nil {
		return nil, err
	}
	if got := parseObject(line); got.sha != o.sha || got.size != o.size {
		return nil, r.fail(fmt.Errorf("asked for %s, got %q", o.sha, line))
	}
	buf := make([]byte, o.size+1) // the content and the newline after it
	if _, err := io.ReadFull(r.out, buf); err != nil {
		return nil, r.fail(err)
	}
	return buf[:o.size], nil
}

// Resolve returns the full SHA of the commit rev names (a branch, tag, SHA or any revision;
// annotated tags are peeled), like ResolveRef.
func (r *Reader) Resolve(rev string) (string, error) {
	o, err := r.commitObject(rev)
	return o.sha, err
}

// commitObject finds the commit rev names.
func (r *Reader) commitObject(rev string) (object, error) {
	if err := checkRev(rev); err != nil {
		return object{}, err
	}
	o, err := r.info(rev + "^{commit}")
	if err != nil {
		return object{}, err
	}
	if o.typ == "" {
		return object{}, fmt.Errorf("%w: %q in %s", ErrUnknownRevision, rev, r.repo)
	}
	return o, nil
}

func (r *Reader) resolveAll(revs ...string) ([]string, error) {
	shas := make([]string, len(revs))
	for i, rev := range revs {
		sha, err := r.Resolve(rev)
		if err != nil {
			return nil, err
		}
		shas[i] = sha
	}
	return shas, nil
}

// ReadFile is the package's ReadFile on this reader's process.
func (r *Reader) ReadFile(commit, file string) ([]byte, error) {
	if err := checkPath(file); err != nil {
		return nil, err
	}
	sha, err := r.Resolve(commit)
	if err != nil {
		return nil, err
	}
	blob, err := r.info(sha + ":" + file)
	if err != nil {
		return nil, err
	}
	switch {
	case blob.typ == "":
		return nil, fmt.Errorf("%w: %s at %s", ErrNotExist, file, sha)
	case blob.typ != "blob":
		return nil, fmt.Errorf("%w: %s at %s is a %s", ErrNotFile, file, sha, blob.typ)
	case blob.size > MaxFileSize:
		return nil, &TooLargeError{File: file, Commit: sha, Size: blob.size, Limit: MaxFileSize}
	}
	data, err := r.contents(blob)
	if err != nil {
		return nil, fmt.Errorf("git: read %s at %s: %w", file, sha, err)
	}
	return data, nil
}

// Commit is the package's Commit on this reader's process: it reads the commit object and parses
// it, instead of asking `git log` to format it.
//
// Names and emails are the ones recorded in the commit; no .mailmap applies (a bare repository
// would take it from HEAD, not from the commit being built). A commit whose message declares an
// encoding other than UTF-8 is described by `git log`, which re-encodes it.
func (r *Reader) Commit(rev string) (CommitInfo, error) {
	o, err := r.commitObject(rev)
	if err != nil {
		return CommitInfo{}, err
	}
	raw, err := r.contents(o)
	if err != nil {
		return CommitInfo{}, fmt.Errorf("git: commit %s in %s: %w", o.sha, r.repo, err)
	}
	info, ok, err := parseCommit(o.sha, raw)
	if err != nil || ok {
		return info, err
	}
	return logCommit(r.ctx, r.repo, o.sha)
}

// ChangedFiles is the package's ChangedFiles, resolving the commits on this reader's process.
func (r *Reader) ChangedFiles(oldSHA, newSHA string, limit int) ([]string, error) {
	return changedFiles(r.ctx, r.repo, oldSHA, newSHA, limit, r.resolveAll)
}

// NewCommits is the package's NewCommits, resolving the commits on this reader's process.
func (r *Reader) NewCommits(oldSHA, newSHA string, max int) (int, error) {
	return newCommits(r.ctx, r.repo, oldSHA, newSHA, max, r.resolveAll)
}

// parseCommit reads a raw commit object: headers up to the first empty line, then the message.
// ok is false when the message is in an encoding of its own, which only git can convert.
func parseCommit(sha string, raw []byte) (info CommitInfo, ok bool, err error) {
	head, msg, _ := strings.Cut(string(raw), "\n\n")
	info.SHA = sha
	for _, line := range strings.Split(head, "\n") {
		key, value, _ := strings.Cut(line, " ")
		switch key {
		case "author":
			info.AuthorName, info.AuthorEmail, info.Time, err = parseIdent(value)
		case "committer":
			info.CommitterName, info.CommitterEmail, info.CommitterTime, err = parseIdent(value)
		case "encoding":
			if e := strings.ToLower(value); e != "utf-8" && e != "utf8" {
				return info, false, nil
			}
		}
		if err != nil {
			return info, false, fmt.Errorf("git: commit %s: %s: %w", sha, key, err)
		}
	}
	info.Message = strings.TrimRight(msg, "\n")
	title, _, _ := strings.Cut(info.Message, "\n")
	info.Title = strings.TrimSpace(title)
	// The database and JSON want valid text; a commit can hold any bytes.
	for _, s := range []*string{&info.Message, &info.Title, &info.AuthorName, &info.AuthorEmail, &info.CommitterName, &info.CommitterEmail} {
		if !utf8.ValidString(*s) {
			*s = strings.ToValidUTF8(*s, "\uFFFD")
		}
	}
	return info, true, nil
}

// parseIdent reads "Name <email> 1700000000 +0800" into the name, the email and the time in the
// zone it was recorded in.
func parseIdent(s string) (name, email string, at time.Time, err error) {
	lt := strings.LastIndexByte(s, '<')
	gt := strings.LastIndexByte(s, '>')
	if lt < 0 || gt < lt {
		return "", "", time.Time{}, fmt.Errorf("malformed identity %q", s)
	}
	name, email = strings.TrimSpace(s[:lt]), s[lt+1:gt]
	f := strings.Fields(s[gt+1:])
	if len(f) != 2 || len(f[1]) != 5 || (f[1][0] != '+' && f[1][0] != '-') {
		return "", "", time.Time{}, fmt.Errorf("malformed date in %q", s)
	}
	secs, err1 := strconv.ParseInt(f[0], 10, 64)
	hh, err2 := strconv.Atoi(f[1][1:3])
	mm, err3 := strconv.Atoi(f[1][3:5])
	if err := errors.Join(err1, err2, err3); err != nil {
		return "", "", time.Time{}, fmt.Errorf("malformed date in %q: %w", s, err)
	}
	offset := hh*3600 + mm*60
	if f[1][0] == '-' {
		offset = -offset
	}
	return name, email, time.Unix(secs, 0).In(time.FixedZone("", offset)), nil
}
