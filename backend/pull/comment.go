package pull

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// Comments: on the whole request, or on a line of a file the request changes (the source head's
// side of the diff, as GitHub's default). A line comment follows its line as the source moves:
// each sync maps it through the diff between the commit it was on and the new head
// (git.LinesBetween); a line that diff touched leaves the comment outdated, shown but no longer
// placed.
//
// A pipeline may comment with its job token (an evaluation report, say; CNB's repo-notes:rw
// scope): such a comment records its pipeline and does not fire pull_request.comment, so a
// pipeline that comments on every comment cannot loop (GitHub's rule for GITHUB_TOKEN).

// Commented is the event of a comment by a person (pull_request.comment).
const Commented = "commented"

// maxCommentFiles bounds the changed-file listing a line comment is checked against.
const maxCommentFiles = 10000

// Comment is one comment (table pull_comments).
type Comment struct {
	ID       int64 `gorm:"primaryKey"`
	PullID   int64 `gorm:"not null"`
	AuthorID int64 `gorm:"not null"`
	// PipelineID is the pipeline that posted it with its job token; nil for a person's.
	PipelineID *int64
	Body       string `gorm:"not null"`
	// Path and Line place a line comment: Line (from 1) of Path at CommitSHA. "" and 0 for a
	// comment on the whole request.
	Path      string `gorm:"not null"`
	Line      int    `gorm:"not null"`
	CommitSHA string `gorm:"column:commit_sha;not null"`
	// Outdated is set when a push changed the comment's line.
	Outdated  bool      `gorm:"not null"`
	CreatedAt time.Time `gorm:"not null"`
	UpdatedAt time.Time `gorm:"not null"`
}

// TableName is the table of Comment.
func (Comment) TableName() string { return "pull_comments" }

// CommentInput is a new comment: Path and Line both, for a line comment, or neither.
type CommentInput struct {
	Body string
	Path string
	Line int
}

// Comment adds a comment by by to request number of r; pipelineID is the job token's pipeline
// (0 for a person). Comments are taken in every state, as on GitHub; a line comment needs an
// open request (its diff is the open one).
func (s *Service) Comment(ctx context.Context, r *repo.Repo, number int64, by Person, in CommentInput, pipelineID int64) (*Comment, error) {
	if strings.TrimSpace(in.Body) == "" {
		return nil, fault.Invalid("body", "a comment needs text")
	}
	if len(in.Body) > MaxBody || !utf8.ValidString(in.Body) {
		return nil, fault.Invalid("body", "a comment is UTF-8 of at most %d bytes", MaxBody)
	}
	if in.Path == "" && in.Line != 0 {
		return nil, fault.Invalid("path", "a line comment names its file")
	}
	if len(in.Path) > 4096 || !utf8.ValidString(in.Path) || strings.ContainsAny(in.Path, "\x00\n") {
		return nil, fault.Invalid("path", "a file path is UTF-8 of at most 4096 bytes on one line")
	}
	if in.Path != "" && in.Line <= 0 {
		return nil, fault.Invalid("line", "a line comment names its line, from 1")
	}
	pr, err := s.Get(ctx, r, number)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now().UTC()
	c := &Comment{PullID: pr.ID, AuthorID: by.ID, Body: in.Body, CreatedAt: now, UpdatedAt: now}
	if pipelineID != 0 {
		c.PipelineID = &pipelineID
	}
	if in.Path != "" {
		if err := s.checkLine(ctx, r, pr, in.Path, in.Line); err != nil {
			return nil, err
		}
		c.Path, c.Line, c.CommitSHA = in.Path, in.Line, pr.HeadSHA
	}
	if err := s.db.WithContext(ctx).Create(c).Error; err != nil {
		return nil, err
	}
	if pipelineID == 0 {
		s.fire(ctx, Event{What: Commented, Repo: r, Request: pr, By: by, Comment: c})
	}
	return c, nil
}

// checkLine refuses a line comment on a file the request does not change, or past its end.
func (s *Service) checkLine(ctx context.Context, r *repo.Repo, pr *Request, path string, line int) error {
	if pr.State != StateOpen {
		return fault.Conflict("pull request #%d is %s: comment on the whole request instead of a line", pr.Number, pr.State)
	}
	bare := s.paths.Path(r)
	rd, err := git.OpenReader(ctx, bare)
	if err != nil {
		return err
	}
	changed, err := rd.ChangedFiles(pr.MergeBase, pr.HeadSHA, maxCommentFiles+1)
	rd.Close()
	if err != nil {
		return err
	}
	if len(changed) <= maxCommentFiles && !slices.Contains(changed, path) {
		return fault.Invalid("path", "%s is not among the files pull request #%d changes", path, pr.Number)
	}
	b, err := git.ReadFile(ctx, bare, pr.HeadSHA, path)
	if errors.Is(err, git.ErrNotExist) || errors.Is(err, git.ErrNotFile) {
		return fault.Invalid("path", "%s is not a file at the request's head (deleted files take comments on the whole request)", path)
	}
	if err != nil {
		var tl *git.TooLargeError
		if errors.As(err, &tl) {
			return fault.Invalid("path", "%s is too large to comment on by line", path)
		}
		return err
	}
	n := strings.Count(string(b), "\n")
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	if line > n {
		return fault.Invalid("line", "%s has %d lines at the request's head, not %d", path, n, line)
	}
	return nil
}

// Comments returns a request's comments, oldest first.
func (s *Service) Comments(ctx context.Context, pr *Request) ([]Comment, error) {
	var out []Comment
	err := s.db.WithContext(ctx).Where("pull_id = ?", pr.ID).Order("id").Find(&out).Error
	return out, err
}

// reanchor moves the line comments of pr that are not on its head to their line at the head, or
// marks them outdated. Each update is fenced on the commit the comment was on, so two syncs at
// once move a comment once; a failure leaves the comment where it was, for the next sync.
func (s *Service) reanchor(ctx context.Context, bare string, pr *Request) error {
	var cs []Comment
	if err := s.db.WithContext(ctx).Where("pull_id = ? AND path <> ? AND outdated = ? AND commit_sha <> ?", pr.ID, "", false, pr.HeadSHA).
		Order("id").Find(&cs).Error; err != nil {
		return err
	}
	maps := map[[2]string]*git.LineMap{}
	now := s.clock.Now().UTC()
	for _, c := range cs {
		key := [2]string{c.CommitSHA, c.Path}
		m, ok := maps[key]
		if !ok {
			var err error
			if m, err = git.LinesBetween(ctx, bare, c.CommitSHA, pr.HeadSHA, c.Path); err != nil {
				return fmt.Errorf("comment %d: %w", c.ID, err)
			}
			maps[key] = m
		}
		updates := map[string]any{"updated_at": now}
		if line, kept := m.Map(c.Line); kept {
			updates["line"], updates["commit_sha"] = line, pr.HeadSHA
		} else {
			updates["outdated"] = true
		}
		if err := s.db.WithContext(ctx).Model(&Comment{}).Where("id = ? AND commit_sha = ? AND outdated = ?", c.ID, c.CommitSHA, false).
			Updates(updates).Error; err != nil {
			return err
		}
	}
	return nil
}
