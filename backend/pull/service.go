package pull

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"unicode/utf8"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/paging"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/store"
)

// Paths says where a repository's bare git directory is, and loads a request's source repository
// (repo.Service).
type Paths interface {
	Path(r *repo.Repo) string
	ByID(ctx context.Context, id int64) (*repo.Repo, *org.Org, error)
}

// Person is who does something to a request, as git records it.
type Person struct {
	ID          int64
	Name, Email string
}

// The author and committer of pre-merged commits: they are Nimbus's, not anyone's.
const (
	botName  = "Nimbus"
	botEmail = "nimbus@users.noreply.nimbus.invalid"
)

// Service keeps pull requests.
type Service struct {
	db     *gorm.DB
	paths  Paths
	clock  clock.Clock
	log    *slog.Logger
	events []func(context.Context, Event)
	checks Checks
	roles  Roles
	// merging holds a lock per repository that Merge takes, so merges through this server
	// queue instead of racing for the target; replicas still race, and retry (mergeTries).
	merging sync.Map // repo id → *sync.Mutex
}

// NewService returns the pull request service.
func NewService(db *gorm.DB, paths Paths, clk clock.Clock, log *slog.Logger) *Service {
	return &Service{db: db, paths: paths, clock: clk, log: log}
}

// What happened to a request, for Event.
const (
	Opened   = "opened"
	Reopened = "reopened"
	Pushed   = "pushed" // its source branch moved
	Edited   = "edited" // its title or description changed
	Merged   = "merged"
	// RunApproved: a maintainer approved the held request's head to run (ApproveRun).
	RunApproved = "run_approved"
)

// Event is something that happened to a request, after it is recorded: the pull_request*
// events are fired from it (subscribed in app.New to build's OnPull).
type Event struct {
	What    string
	Repo    *repo.Repo
	Request *Request
	By      Person
	// Merge is the merge, for Merged.
	Merge *MergeDone
	// Review is the review, for Approved and ChangesRequested.
	Review *Review
	// Comment is the comment, for Commented.
	Comment *Comment
}

// OnEvent subscribes fn to every Event, called synchronously after the change is committed.
// It is wiring (app.New), not for use once the service serves.
func (s *Service) OnEvent(fn func(context.Context, Event)) { s.events = append(s.events, fn) }

func (s *Service) fire(ctx context.Context, ev Event) {
	for _, fn := range s.events {
		fn(ctx, ev)
	}
}

// OpenInput is what opening a request takes.
type OpenInput struct {
	Source, Target string // branch names
	Title, Body    string
	// From is the source branch's repository when it is not the target's: a fork of it
	// (repo.Service.Fork). nil: the target's own.
	From *repo.Repo
}

func checkText(title, body string) error {
	switch {
	case strings.TrimSpace(title) == "":
		return fault.Invalid("title", "a pull request needs a title")
	case utf8.RuneCountInString(title) > MaxTitle || strings.ContainsAny(title, "\n\r"):
		return fault.Invalid("title", "a title is one line of at most %d characters", MaxTitle)
	case len(body) > MaxBody:
		return fault.Invalid("body", "the description is %d bytes, over the %d allowed", len(body), MaxBody)
	case !utf8.ValidString(title) || !utf8.ValidString(body):
		return fault.Invalid("body", "title and description must be UTF-8")
	case strings.ContainsRune(title, 0):
		return fault.Invalid("title", "a title cannot hold a NUL byte")
	case strings.ContainsRune(body, 0):
		return fault.Invalid("body", "a description cannot hold a NUL byte")
	}
	return nil
}

// head resolves a branch of the repository at path; field names the input for the error.
func head(ctx context.Context, path, field, branch string) (string, error) {
	if branch == "" || strings.HasPrefix(branch, "refs/") {
		return "", fault.Invalid(field, "name a branch (main, feature/x), not %q", branch)
	}
	sha, err := git.ResolveRef(ctx, path, "refs/heads/"+branch)
	if errors.Is(err, git.ErrUnknownRevision) || errors.Is(err, git.ErrInvalid) {
		return "", fault.Invalid(field, "branch %q does not exist", branch)
	}
	return sha, err
}

// sourceHead resolves the request's source branch, in its source repository, and brings that
// commit into r's object store when the source is a fork. A deleted source branch or fork is
// a fault.Invalid on "source_branch" (or "source_repo").
func (s *Service) sourceHead(ctx context.Context, r *repo.Repo, pr *Request) (string, error) {
	if pr.SourceRepoID == 0 {
		// The fork is gone (migration 00030). Its last head is kept in r (refs/pull/N/head), and
		// the request still follows its target, so it can merge after the target moves.
		return pr.HeadSHA, nil
	}
	if pr.SourceRepoID == r.ID {
		return head(ctx, s.paths.Path(r), "source_branch", pr.SourceBranch)
	}
	from, _, err := s.paths.ByID(ctx, pr.SourceRepoID)
	if err != nil {
		if fault.KindOf(err) == fault.KindNotFound {
			return "", fault.Invalid("source_repo", "the fork is gone")
		}
		return "", err
	}
	sha, err := head(ctx, s.paths.Path(from), "source_branch", pr.SourceBranch)
	if err != nil || sha == pr.HeadSHA {
		return sha, err // an unmoved head is in r already (refs/pull/N/head keeps it)
	}
	if err := git.FetchCommit(ctx, s.paths.Path(r), s.paths.Path(from), sha); err != nil {
		return "", err
	}
	return sha, nil
}

// Open proposes in.Source for merging into in.Target, both branches of r. The request gets the
// repository's next number; a second open request for the same two branches is refused, as is
// a source with nothing the target does not have.
func (s *Service) Open(ctx context.Context, r *repo.Repo, author Person, in OpenInput) (*Request, error) {
	in.Title = strings.TrimSpace(in.Title)
	if err := checkText(in.Title, in.Body); err != nil {
		return nil, err
	}
	if r.Archived {
		return nil, fault.Conflict("the repository is archived")
	}
	path := s.paths.Path(r)
	from := r
	if in.From != nil && in.From.ID != r.ID {
		if in.From.ForkOf == nil || *in.From.ForkOf != r.ID {
			return nil, fault.Invalid("source_repo", "%s is not a fork of this repository", in.From.Name)
		}
		from = in.From
	}
	src, err := head(ctx, s.paths.Path(from), "source_branch", in.Source)
	if err != nil {
		return nil, err
	}
	dst, err := head(ctx, path, "target_branch", in.Target)
	if err != nil {
		return nil, err
	}
	if in.Source == in.Target && from == r {
		return nil, fault.Invalid("source_branch", "source and target are the same branch")
	}
	if from != r {
		// The fork's commits come into the target's object store: the pre-merged commit, the
		// checks and the merge all happen there. Only what the target lacks travels.
		if err := git.FetchCommit(ctx, path, s.paths.Path(from), src); err != nil {
			return nil, err
		}
	}
	if base, err := git.MergeBase(ctx, path, dst, src); err != nil {
		return nil, err
	} else if base == src {
		return nil, fault.Invalid("source_branch", "%s has no commits that %s does not have", in.Source, in.Target)
	}
	now := s.clock.Now().UTC()
	pr := &Request{RepoID: r.ID, SourceRepoID: from.ID, SourceBranch: in.Source, TargetBranch: in.Target, Title: in.Title,
		Body: in.Body, State: StateOpen, AuthorID: author.ID, Conflicts: "[]", CreatedAt: now, UpdatedAt: now}
	if err := s.merged(ctx, path, pr, src, dst); err != nil {
		return nil, err
	}
	err = store.Tx(ctx, s.db, func(tx *gorm.DB) error {
		if err := store.Lock(tx, fmt.Sprintf("pull-number:%d", r.ID)); err != nil {
			return err
		}
		var dup Request
		err := tx.Select("number").Where("repo_id = ? AND source_repo_id = ? AND source_branch = ? AND target_branch = ? AND state = ?",
			r.ID, from.ID, in.Source, in.Target, StateOpen).Take(&dup).Error
		if err == nil {
			return fault.Conflict("pull request #%d already proposes %s for %s", dup.Number, in.Source, in.Target)
		}
		if !errors.Is(err, gorm.ErrRecordNotFound) {
			return err
		}
		var last int64
		if err := tx.Model(&Request{}).Where("repo_id = ?", r.ID).Select("COALESCE(MAX(number), 0)").Scan(&last).Error; err != nil {
			return err
		}
		pr.Number = last + 1
		return tx.Create(pr).Error
	})
	if err != nil {
		return nil, err
	}
	if err := s.writeRefs(ctx, path, pr); err != nil {
		return pr, err
	}
	s.fire(ctx, Event{What: Opened, Repo: r, Request: pr, By: author})
	return pr, nil
}

// merged fills pr's heads, merge base, pre-merged commit and conflicts for source head src and
// target head dst. The pre-merged commit depends only on the two heads and the request's
// creation time, so syncing twice with nothing moved gives the same commit.
func (s *Service) merged(ctx context.Context, path string, pr *Request, src, dst string) error {
	base, err := git.MergeBase(ctx, path, dst, src)
	if err != nil {
		return err
	}
	res, err := git.MergeTree(ctx, path, dst, src)
	if err != nil {
		return err
	}
	pr.HeadSHA, pr.BaseSHA, pr.MergeBase, pr.MergeSHA = src, dst, base, ""
	conflicts, _ := json.Marshal(append([]string{}, res.Conflicts...))
	pr.Conflicts = string(conflicts)
	if !res.Clean() {
		return nil
	}
	bot := git.Signature{Name: botName, Email: botEmail, When: pr.CreatedAt}
	pr.MergeSHA, err = git.CommitTree(ctx, path, git.NewCommit{Tree: res.Tree, Parents: []string{dst, src},
		Message: fmt.Sprintf("Merge %s into %s", src, dst), Author: bot, Committer: bot})
	return err
}

// writeRefs points the request's hidden refs at what the row says.
func (s *Service) writeRefs(ctx context.Context, path string, pr *Request) error {
	if err := setRef(ctx, path, HeadRef(pr.Number), pr.HeadSHA); err != nil {
		return fmt.Errorf("pull #%d: %w", pr.Number, err)
	}
	if err := setRef(ctx, path, MergeRef(pr.Number), pr.MergeSHA); err != nil {
		return fmt.Errorf("pull #%d: %w", pr.Number, err)
	}
	return nil
}

// setRef points a hidden ref at sha ("" deletes it), from whatever it held.
func setRef(ctx context.Context, path, ref, sha string) error {
	cur, err := git.ResolveRef(ctx, path, ref)
	if errors.Is(err, git.ErrUnknownRevision) {
		cur, err = git.ZeroSHA, nil
	}
	switch {
	case err != nil:
		return err
	case cur == sha, sha == "" && git.IsZeroSHA(cur):
		return nil
	case sha == "":
		return git.DeleteRef(ctx, path, ref, cur)
	}
	return git.UpdateRef(ctx, path, ref, sha, cur)
}

// Get returns request number of r.
func (s *Service) Get(ctx context.Context, r *repo.Repo, number int64) (*Request, error) {
	var pr Request
	err := s.db.WithContext(ctx).Where("repo_id = ? AND number = ?", r.ID, number).Take(&pr).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fault.NotFound("pull request #%d not found", number)
	}
	return &pr, err
}

// Filter narrows List.
type Filter struct {
	State    string // "" or "all": every state
	AuthorID int64  // 0: anyone's
	// ReviewerID keeps the requests that person reviewed (approved, asked for changes or
	// commented in a review); 0: any.
	ReviewerID int64
}

// List returns a page of r's requests, newest first: up to page.Limit+1 (the extra one says
// there is a next page), numbered below page.After when it is set.
func (s *Service) List(ctx context.Context, r *repo.Repo, f Filter, page paging.Page) ([]Request, error) {
	q := s.db.WithContext(ctx).Where("repo_id = ?", r.ID)
	switch f.State {
	case "", "all":
	case StateOpen, StateClosed, StateMerged:
		q = q.Where("state = ?", f.State)
	default:
		return nil, fault.Invalid("state", "state is open, closed, merged or all, not %q", f.State)
	}
	if f.AuthorID != 0 {
		q = q.Where("author_id = ?", f.AuthorID)
	}
	if f.ReviewerID != 0 {
		q = q.Where("id IN (?)", s.db.WithContext(ctx).Model(&Review{}).Select("pull_id").Where("reviewer_id = ?", f.ReviewerID))
	}
	if page.After > 0 {
		q = q.Where("number < ?", page.After)
	}
	if page.Limit <= 0 {
		page.Limit = 100
	}
	var out []Request
	err := q.Order("number DESC").Limit(page.Limit + 1).Find(&out).Error
	return out, err
}

// Edit sets a request's title and description (nil: unchanged). It says whether either changed:
// pull_request.update fires on an edit.
func (s *Service) Edit(ctx context.Context, r *repo.Repo, number int64, by Person, title, body *string) (*Request, bool, error) {
	pr, err := s.Get(ctx, r, number)
	if err != nil {
		return nil, false, err
	}
	next := *pr
	if title != nil {
		next.Title = strings.TrimSpace(*title)
	}
	if body != nil {
		next.Body = *body
	}
	if err := checkText(next.Title, next.Body); err != nil {
		return nil, false, err
	}
	if next.Title == pr.Title && next.Body == pr.Body {
		return pr, false, nil
	}
	next.UpdatedAt = s.clock.Now().UTC()
	if err := s.db.WithContext(ctx).Model(&Request{}).Where("id = ?", pr.ID).
		Updates(map[string]any{"title": next.Title, "body": next.Body, "updated_at": next.UpdatedAt}).Error; err != nil {
		return nil, false, err
	}
	if next.State == StateOpen {
		s.fire(ctx, Event{What: Edited, Repo: r, Request: &next, By: by})
	}
	return &next, true, nil
}

// Close closes an open request; its refs stay, so it can be reopened.
func (s *Service) Close(ctx context.Context, r *repo.Repo, number int64) (*Request, error) {
	now := s.clock.Now().UTC()
	return s.transition(ctx, r, number, StateOpen, StateClosed, map[string]any{"closed_at": now, "updated_at": now})
}

// Reopen opens a closed request again and syncs it with its branches, which must still exist.
// A merged request stays merged.
func (s *Service) Reopen(ctx context.Context, r *repo.Repo, number int64, by Person) (*Request, error) {
	pr, err := s.getState(ctx, r, number, StateClosed)
	if err != nil {
		return nil, err
	}
	if pr.SourceRepoID == 0 {
		return nil, fault.Conflict("the fork this request came from is deleted: it cannot be reopened")
	}
	if _, err := s.sourceHead(ctx, r, pr); err != nil {
		return nil, fault.Conflict("the source branch %s is gone: push it again to reopen", pr.SourceBranch)
	}
	var dup Request
	err = s.db.WithContext(ctx).Select("number").Where("repo_id = ? AND source_repo_id = ? AND source_branch = ? AND target_branch = ? AND state = ?",
		r.ID, pr.SourceRepoID, pr.SourceBranch, pr.TargetBranch, StateOpen).Take(&dup).Error
	if err == nil {
		return nil, fault.Conflict("pull request #%d already proposes %s for %s", dup.Number, pr.SourceBranch, pr.TargetBranch)
	}
	if pr, err = s.transition(ctx, r, number, StateClosed, StateOpen, map[string]any{"closed_at": nil, "updated_at": s.clock.Now().UTC()}); err != nil {
		return nil, err
	}
	if _, err := s.Sync(ctx, r, pr); err != nil {
		return nil, err
	}
	if pr, err = s.Get(ctx, r, number); err != nil {
		return nil, err
	}
	s.fire(ctx, Event{What: Reopened, Repo: r, Request: pr, By: by})
	s.recheck(ctx, r, number, by)
	return pr, nil
}

// getState reads request number of r, which must be in state: a 409 otherwise.
func (s *Service) getState(ctx context.Context, r *repo.Repo, number int64, state string) (*Request, error) {
	pr, err := s.Get(ctx, r, number)
	if err != nil {
		return nil, err
	}
	if pr.State != state {
		return nil, fault.Conflict("pull request #%d is %s, not %s", number, pr.State, state)
	}
	return pr, nil
}

// transition moves a request from one state to another, fenced on the state it was in.
func (s *Service) transition(ctx context.Context, r *repo.Repo, number int64, from, to string, set map[string]any) (*Request, error) {
	set["state"] = to
	res := s.db.WithContext(ctx).Model(&Request{}).Where("repo_id = ? AND number = ? AND state = ?", r.ID, number, from).Updates(set)
	if res.Error != nil {
		return nil, res.Error
	}
	if res.RowsAffected == 0 {
		pr, err := s.Get(ctx, r, number)
		if err != nil {
			return nil, err
		}
		return nil, fault.Conflict("pull request #%d is %s, not %s", number, pr.State, from)
	}
	return s.Get(ctx, r, number)
}

// Sync brings an open request up to date with its branches (after a push to either, and on
// reopen): new heads, merge base, pre-merged commit, conflicts and refs. It says whether the
// source head moved, which fires pull_request. A request whose source branch is gone keeps
// what it had.
func (s *Service) Sync(ctx context.Context, r *repo.Repo, pr *Request) (bool, error) {
	if pr.State != StateOpen {
		return false, nil
	}
	path := s.paths.Path(r)
	src, err := s.sourceHead(ctx, r, pr)
	if fault.KindOf(err) == fault.KindInvalid {
		return false, nil // the branch (or the fork) was deleted: nothing to sync to
	}
	if err != nil {
		return false, err
	}
	dst, err := head(ctx, path, "target", pr.TargetBranch)
	if err != nil {
		return false, nil
	}
	if src == pr.HeadSHA && dst == pr.BaseSHA {
		return false, s.writeRefs(ctx, path, pr) // repairs refs a failed write left behind
	}
	next := *pr
	next.UpdatedAt = s.clock.Now().UTC()
	if err := s.merged(ctx, path, &next, src, dst); err != nil {
		return false, err
	}
	res := s.db.WithContext(ctx).Model(&Request{}).Where("id = ? AND head_sha = ? AND base_sha = ? AND state = ?", pr.ID, pr.HeadSHA, pr.BaseSHA, StateOpen).
		Updates(map[string]any{"head_sha": next.HeadSHA, "base_sha": next.BaseSHA, "merge_base": next.MergeBase, "merge_sha": next.MergeSHA,
			"conflicts": next.Conflicts, "updated_at": next.UpdatedAt})
	if res.Error != nil {
		return false, res.Error
	}
	if res.RowsAffected == 0 {
		return false, nil // someone else synced (or merged) it meanwhile
	}
	moved := src != pr.HeadSHA
	*pr = next
	if moved {
		// Line comments follow their lines; derived data, so a failure waits for the next sync.
		if err := s.reanchor(ctx, path, pr); err != nil {
			s.log.ErrorContext(ctx, "pull requests: move line comments", "repo_id", r.ID, "pull", pr.Number, "err", err)
		}
	}
	return moved, s.writeRefs(ctx, path, pr)
}

// MergeInput is how to merge.
type MergeInput struct {
	Mode string // ModeMerge (default), ModeSquash or ModeRebase
	// Message is the merge or squash commit's message; "" gives GitHub's default.
	Message string
	// DeleteSource deletes the source branch after the merge, unless it moved meanwhile.
	DeleteSource bool
}

// MergeDone is what a merge did: the request, the target's move (for the push it fires) and
// whether the source branch was deleted.
type MergeDone struct {
	Request       *Request
	Target        git.RefUpdate
	SourceDeleted bool
}

// Merge merges an open, conflict-free request into its target as by, in one of the three modes.
// The target moves only from the head the merge was computed on. Merges of one repository
// through this server take turns; a push (or another replica's merge) meanwhile makes the
// merge start again from the sync, as a person pressing the button again would; after
// mergeTries such races it is a 409 and nothing changes. The gate (gate.go:
// conflicts, the allowed modes, the target's rule) is checked after each sync; a merge it stops
// is a 409 naming every unmet condition.
func (s *Service) Merge(ctx context.Context, r *repo.Repo, number int64, by Person, in MergeInput) (*MergeDone, error) {
	if in.Mode == "" {
		in.Mode = ModeMerge
	}
	if in.Mode == ModeAuto {
		set, err := s.Settings(ctx, r)
		if err != nil {
			return nil, err
		}
		in.Mode = set.Modes()[0] // SetSettings keeps one allowed
	}
	if in.Mode != ModeMerge && in.Mode != ModeSquash && in.Mode != ModeRebase {
		return nil, fault.Invalid("mode", "mode is merge, squash, rebase or auto, not %q", in.Mode)
	}
	if strings.TrimSpace(in.Message) == "" {
		in.Message = ""
	}
	if err := checkMessage(in.Message); err != nil {
		return nil, err
	}
	lock, _ := s.merging.LoadOrStore(r.ID, &sync.Mutex{})
	lock.(*sync.Mutex).Lock()
	defer lock.(*sync.Mutex).Unlock()
	for try := 1; ; try++ {
		pr, commit, err := s.mergeCommit(ctx, r, number, by, in)
		if err != nil {
			return nil, err
		}
		target := "refs/heads/" + pr.TargetBranch
		err = git.UpdateRef(ctx, s.paths.Path(r), target, commit, pr.BaseSHA)
		if errors.Is(err, git.ErrRefMoved) && try < mergeTries {
			continue
		}
		if errors.Is(err, git.ErrRefMoved) {
			return nil, fault.Conflict("%s kept moving while merging: look at the request again and retry", pr.TargetBranch)
		}
		if err != nil {
			return nil, err
		}
		return s.recordMerge(ctx, r, pr, by, in, commit)
	}
}

// mergeTries is how many times Merge computes a merge whose target moved before it gives up.
const mergeTries = 3

// checkMessage refuses a merge message git cannot store, or longer than a description.
func checkMessage(msg string) error {
	if strings.ContainsRune(msg, 0) {
		return fault.Invalid("message", "a commit message cannot hold a NUL byte")
	}
	if len(msg) > MaxBody {
		return fault.Invalid("message", "the message is %d bytes, at most %d", len(msg), MaxBody)
	}
	return nil
}

// mergeCommit syncs request number, checks its gate and writes the commit the target is to
// move to, not moving anything yet.
func (s *Service) mergeCommit(ctx context.Context, r *repo.Repo, number int64, by Person, in MergeInput) (*Request, string, error) {
	pr, err := s.getState(ctx, r, number, StateOpen)
	if err != nil {
		return nil, "", err
	}
	if _, err := s.Sync(ctx, r, pr); err != nil {
		return nil, "", err
	}
	g, err := s.Gate(ctx, r, pr, in.Mode)
	if err != nil {
		return nil, "", err
	}
	if !g.Passed() {
		return nil, "", refused(number, g.Unmet)
	}
	if in.DeleteSource && pr.SourceRepoID == r.ID {
		rule, err := s.RuleFor(ctx, r.ID, pr.SourceBranch)
		if err != nil {
			return nil, "", err
		}
		if rule != nil && !rule.AllowDeletion {
			return nil, "", fault.Invalid("delete_source_branch", "%s is a protected branch (rule %q): it cannot be deleted", pr.SourceBranch, rule.Pattern)
		}
	}
	path := s.paths.Path(r)
	who := git.Signature{Name: by.Name, Email: by.Email, When: s.clock.Now().UTC()}
	tree, err := git.TreeOf(ctx, path, pr.MergeSHA)
	if err != nil {
		return nil, "", err
	}
	var commit string
	switch in.Mode {
	case ModeMerge:
		msg := in.Message
		if msg == "" {
			msg = fmt.Sprintf("Merge pull request #%d from %s\n\n%s", pr.Number, s.sourceName(ctx, r, pr), pr.Title)
		}
		commit, err = git.CommitTree(ctx, path, git.NewCommit{Tree: tree, Parents: []string{pr.BaseSHA, pr.HeadSHA},
			Message: msg, Author: who, Committer: who})
	case ModeSquash:
		msg := in.Message
		if msg == "" {
			msg = fmt.Sprintf("%s (#%d)", pr.Title, pr.Number)
		}
		// The change is the proposer's: the squashed commit keeps the author of the request's
		// head commit, as GitHub and GitLab credit the author; the merger is its committer.
		author := who
		if heads, err := git.Commits(ctx, path, []string{pr.HeadSHA}); err == nil && len(heads) == 1 {
			author = git.Signature{Name: heads[0].AuthorName, Email: heads[0].AuthorEmail, When: who.When}
		}
		commit, err = git.CommitTree(ctx, path, git.NewCommit{Tree: tree, Parents: []string{pr.BaseSHA},
			Message: msg, Author: author, Committer: who})
	case ModeRebase:
		var rb git.RebaseResult
		if rb, err = git.Rebase(ctx, path, pr.BaseSHA, pr.HeadSHA, who); err == nil && rb.Head == "" {
			return nil, "", fault.Conflict("pull request #%d does not rebase: commit %s conflicts in %s", number, rb.Conflict, strings.Join(rb.Conflicts, ", "))
		}
		commit = rb.Head
	}
	if err != nil {
		return nil, "", err
	}
	return pr, commit, nil
}

// sourceName is the source branch as a merge message names it: "branch" in the repository
// itself, "org/branch" from a fork (GitHub's "owner/branch"), "deleted-fork/branch" once the
// fork is gone.
func (s *Service) sourceName(ctx context.Context, r *repo.Repo, pr *Request) string {
	if pr.SourceRepoID == r.ID {
		return pr.SourceBranch
	}
	if _, o, err := s.paths.ByID(ctx, pr.SourceRepoID); err == nil {
		return o.Name + "/" + pr.SourceBranch
	}
	return "deleted-fork/" + pr.SourceBranch
}

// recordMerge records the merge of pr as commit, deletes its source branch when asked and
// fires Merged.
func (s *Service) recordMerge(ctx context.Context, r *repo.Repo, pr *Request, by Person, in MergeInput, commit string) (*MergeDone, error) {
	path, target, now := s.paths.Path(r), "refs/heads/"+pr.TargetBranch, s.clock.Now().UTC()
	// The target has moved: from here on the merge has happened, whatever else fails.
	set := map[string]any{"state": StateMerged, "merged_by": by.ID, "merged_at": now, "merge_commit": commit, "merge_mode": in.Mode,
		"closed_at": now, "updated_at": now}
	if err := s.db.WithContext(ctx).Model(&Request{}).Where("id = ?", pr.ID).Updates(set).Error; err != nil {
		return nil, fmt.Errorf("pull #%d merged as %s, but recording it failed: %w", pr.Number, commit, err)
	}
	out := &MergeDone{Target: git.RefUpdate{Old: pr.BaseSHA, New: commit, Ref: target}}
	if in.DeleteSource && pr.SourceRepoID == r.ID {
		err := git.DeleteRef(ctx, path, "refs/heads/"+pr.SourceBranch, pr.HeadSHA)
		out.SourceDeleted = err == nil
		if err != nil {
			s.log.InfoContext(ctx, "source branch kept after merge", "pull", pr.Number, "branch", pr.SourceBranch, "why", err)
		}
	}
	var err error
	if out.Request, err = s.Get(ctx, r, pr.Number); err != nil {
		return nil, err
	}
	s.fire(ctx, Event{What: Merged, Repo: r, Request: out.Request, By: by, Merge: out})
	return out, nil
}

// OnPush brings the open requests of r whose source or target branch the push moved up to date,
// and fires Pushed for each whose source moved (pull_request runs again on the new pre-merged
// commit). A moved target only refreshes the pre-merged commit and the conflicts. Failures are
// logged: the push has happened.
func (s *Service) OnPush(ctx context.Context, r *repo.Repo, by Person, updates []git.RefUpdate) {
	var branches, deleted []string
	for _, u := range updates {
		if b, ok := strings.CutPrefix(u.Ref, "refs/heads/"); ok {
			branches = append(branches, b)
			if u.New == git.ZeroSHA {
				deleted = append(deleted, b)
			}
		}
	}
	if len(branches) == 0 {
		return
	}
	s.closeDeleted(ctx, r, deleted)
	var open []Request
	if err := s.db.WithContext(ctx).Where("repo_id = ? AND state = ? AND (source_branch IN ? OR target_branch IN ?)", r.ID, StateOpen, branches, branches).
		Order("number").Find(&open).Error; err != nil {
		s.log.ErrorContext(ctx, "pull requests: sync after push", "repo_id", r.ID, "err", err)
		return
	}
	s.syncAll(ctx, r, by, open)
	// The pushed repository may be a fork that requests into its source come from.
	var fromFork []Request
	if err := s.db.WithContext(ctx).Where("source_repo_id = ? AND repo_id <> ? AND state = ? AND source_branch IN ?", r.ID, r.ID, StateOpen, branches).
		Order("id").Find(&fromFork).Error; err != nil {
		s.log.ErrorContext(ctx, "pull requests: sync after a push to a fork", "repo_id", r.ID, "err", err)
		return
	}
	for i := range fromFork {
		target, _, err := s.paths.ByID(ctx, fromFork[i].RepoID)
		if err != nil {
			s.log.ErrorContext(ctx, "pull requests: sync after a push to a fork", "repo_id", fromFork[i].RepoID, "err", err)
			continue
		}
		s.syncAll(ctx, target, by, fromFork[i:i+1])
	}
}

// closeDeleted closes the open requests whose source branch, in r, was just deleted, as GitHub
// does: there is nothing left to propose. Pushing the branch again allows a reopen.
func (s *Service) closeDeleted(ctx context.Context, r *repo.Repo, deleted []string) {
	if len(deleted) == 0 {
		return
	}
	now := s.clock.Now().UTC()
	res := s.db.WithContext(ctx).Model(&Request{}).Where("source_repo_id = ? AND state = ? AND source_branch IN ?", r.ID, StateOpen, deleted).
		Updates(map[string]any{"state": StateClosed, "closed_at": now, "updated_at": now})
	if res.Error != nil {
		s.log.ErrorContext(ctx, "pull requests: close those whose source branch was deleted", "repo_id", r.ID, "err", res.Error)
		return
	}
	if res.RowsAffected > 0 {
		s.log.InfoContext(ctx, "pull requests closed: their source branch was deleted", "repo_id", r.ID, "branches", deleted, "closed", res.RowsAffected)
	}
}

// syncAll syncs open requests of r after a push, fires Pushed for those whose source moved and
// rechecks each one's gate.
func (s *Service) syncAll(ctx context.Context, r *repo.Repo, by Person, open []Request) {
	for i := range open {
		pr := &open[i]
		moved, err := s.Sync(ctx, r, pr)
		if err != nil {
			s.log.ErrorContext(ctx, "pull requests: sync after push", "repo_id", r.ID, "pull", pr.Number, "err", err)
			continue
		}
		if moved {
			s.fire(ctx, Event{What: Pushed, Repo: r, Request: pr, By: by})
		}
		// A moved target may have cleared a conflict: the gate may pass now.
		s.recheck(ctx, r, pr.Number, by)
	}
}

// Roles says what role a user has in a team (org.Service).
type Roles interface {
	RoleOf(ctx context.Context, orgID, userID int64) (org.Role, error)
}

// UseRoles gives the service the team roles RunHeld reads. It is wiring (app.New).
func (s *Service) UseRoles(r Roles) { s.roles = r }

// RunHeld reports whether the request's proposed code waits for a maintainer's "Approve and
// run" before any of its pipelines runs: it comes from a fork, its author is not a member of
// the target's team, and its current source head is not the one approved. This is GitHub's
// rule for outside contributors, applied to every new head (a push after an approval waits
// again): it keeps a stranger's code off the team's money and GPUs until someone who may write
// to the repository has read it.
func (s *Service) RunHeld(ctx context.Context, r *repo.Repo, pr *Request) (bool, error) {
	if pr.SourceRepoID == pr.RepoID || pr.RunApprovedSHA == pr.HeadSHA {
		return false, nil
	}
	if s.roles == nil {
		return true, nil
	}
	role, err := s.roles.RoleOf(ctx, r.OrgID, pr.AuthorID)
	if err != nil {
		return false, err
	}
	return !role.IsMember(), nil
}

// ApproveRun lets the held request's current head run (RunHeld) and fires RunApproved, which
// starts the pipelines its opening or last push would have started. by is a person who may
// write to r (the handler checks). Approving a request that is not held is a 409.
func (s *Service) ApproveRun(ctx context.Context, r *repo.Repo, number int64, by Person) (*Request, error) {
	pr, err := s.getState(ctx, r, number, StateOpen)
	if err != nil {
		return nil, err
	}
	if _, err := s.Sync(ctx, r, pr); err != nil {
		return nil, err
	}
	held, err := s.RunHeld(ctx, r, pr)
	if err != nil {
		return nil, err
	}
	if !held {
		return nil, fault.Conflict("pull request #%d does not wait for approval to run", number)
	}
	res := s.db.WithContext(ctx).Model(&Request{}).Where("id = ? AND head_sha = ? AND state = ?", pr.ID, pr.HeadSHA, StateOpen).
		Updates(map[string]any{"run_approved_sha": pr.HeadSHA, "run_approved_by": by.ID, "updated_at": s.clock.Now().UTC()})
	if res.Error != nil {
		return nil, res.Error
	}
	if res.RowsAffected == 0 {
		return nil, fault.Conflict("pull request #%d moved meanwhile: look at its new commits and approve again", number)
	}
	if pr, err = s.Get(ctx, r, number); err != nil {
		return nil, err
	}
	s.fire(ctx, Event{What: RunApproved, Repo: r, Request: pr, By: by})
	return pr, nil
}
