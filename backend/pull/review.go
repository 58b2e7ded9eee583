package pull

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// Review states, as people give them.
const (
	ReviewApprove        = "approve"
	ReviewRequestChanges = "request_changes"
	ReviewComment        = "comment"
)

// What happened, for Event: a review that approves or asks for changes.
const (
	Approved         = "approved"
	ChangesRequested = "changes_requested"
)

// Review is one review of a request (table pull_reviews).
type Review struct {
	ID         int64  `gorm:"primaryKey"`
	PullID     int64  `gorm:"not null"`
	ReviewerID int64  `gorm:"not null"`
	State      string `gorm:"not null"`
	Body       string `gorm:"not null"`
	// CommitSHA is the source head the review was given on: an approval of an older head is
	// stale (ReviewSummary).
	CommitSHA string    `gorm:"not null"`
	CreatedAt time.Time `gorm:"not null"`
}

// TableName is the table of Review.
func (Review) TableName() string { return "pull_reviews" }

// Review records a review of an open request by by: approve, request changes, or comment. The
// request's author reviews only with comments (as on GitHub: nobody approves their own change);
// asking for changes and commenting need a body. An approval or a request for changes fires
// its event (pull_request.approved, pull_request.changes_requested).
func (s *Service) Review(ctx context.Context, r *repo.Repo, number int64, by Person, state, body string) (*Review, error) {
	switch state {
	case ReviewApprove, ReviewRequestChanges, ReviewComment:
	default:
		return nil, fault.Invalid("state", "state is approve, request_changes or comment, not %q", state)
	}
	if len(body) > MaxBody || !utf8.ValidString(body) {
		return nil, fault.Invalid("body", "a review's text is UTF-8 of at most %d bytes", MaxBody)
	}
	if state != ReviewApprove && strings.TrimSpace(body) == "" {
		return nil, fault.Invalid("body", "say what to change, or what you think")
	}
	pr, err := s.Get(ctx, r, number)
	if err != nil {
		return nil, err
	}
	if pr.State != StateOpen {
		return nil, fault.Conflict("pull request #%d is %s: it takes no more reviews", number, pr.State)
	}
	if pr.AuthorID == by.ID && state != ReviewComment {
		return nil, fault.Invalid("state", "the author of a pull request cannot %s it", strings.ReplaceAll(state, "_", " "))
	}
	rv := &Review{PullID: pr.ID, ReviewerID: by.ID, State: state, Body: body, CommitSHA: pr.HeadSHA, CreatedAt: s.clock.Now().UTC()}
	if err := s.db.WithContext(ctx).Create(rv).Error; err != nil {
		return nil, err
	}
	switch state {
	case ReviewApprove:
		s.fire(ctx, Event{What: Approved, Repo: r, Request: pr, By: by, Review: rv})
		s.recheck(ctx, r, number, by)
	case ReviewRequestChanges:
		s.fire(ctx, Event{What: ChangesRequested, Repo: r, Request: pr, By: by, Review: rv})
	}
	return rv, nil
}

// Reviews returns a request's reviews, oldest first.
func (s *Service) Reviews(ctx context.Context, pr *Request) ([]Review, error) {
	var out []Review
	err := s.db.WithContext(ctx).Where("pull_id = ?", pr.ID).Order("id").Find(&out).Error
	return out, err
}

// ReviewSummary is where the reviews of a request stand: each reviewer's last approval or
// request for changes counts (a comment changes nothing), and an approval given on an older
// source head is stale.
type ReviewSummary struct {
	// Approvals are the reviewers whose last word approves the current head.
	Approvals []int64
	// Stale are those whose approval was of an older head.
	Stale []int64
	// ChangesRequested are those whose last word asks for changes.
	ChangesRequested []int64
}

// Summarize reads the reviews of pr as they stand on its current head.
func Summarize(pr *Request, reviews []Review) ReviewSummary {
	last := map[int64]Review{}
	var order []int64
	for _, rv := range reviews {
		if rv.State == ReviewComment {
			continue
		}
		if _, seen := last[rv.ReviewerID]; !seen {
			order = append(order, rv.ReviewerID)
		}
		last[rv.ReviewerID] = rv
	}
	var out ReviewSummary
	for _, id := range order {
		rv := last[id]
		switch {
		case rv.State == ReviewRequestChanges:
			out.ChangesRequested = append(out.ChangesRequested, id)
		case rv.CommitSHA == pr.HeadSHA:
			out.Approvals = append(out.Approvals, id)
		default:
			out.Stale = append(out.Stale, id)
		}
	}
	return out
}
