package pull

import (
	"context"
	"slices"
	"time"

	"gorm.io/gorm/clause"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// Requested reviewers: people asked to review a request (GitHub's review requests, CNB's
// git:reviewer task and CNB_PULL_REQUEST_REVIEWERS). Asking records who was asked; their
// reviews are what the gate counts. Only people who may write to the repository (and so may
// approve) can be asked, never the author. The routes resolve names and eligibility
// (http.go); this keeps the rows.

// MaxReviewers bounds the reviewers of one request.
const MaxReviewers = 50

// Reviewer is one person asked to review a request (table pull_reviewers).
type Reviewer struct {
	PullID      int64 `gorm:"primaryKey;autoIncrement:false"`
	UserID      int64 `gorm:"primaryKey;autoIncrement:false"`
	RequestedBy *int64
	CreatedAt   time.Time `gorm:"not null"`
}

// TableName is the table of Reviewer.
func (Reviewer) TableName() string { return "pull_reviewers" }

// SetReviewers adds and removes reviewers of request number of r (user ids; adding one already
// asked, or removing one who was not, changes nothing) and returns the reviewers after, in the
// order they were asked. The author cannot be asked.
func (s *Service) SetReviewers(ctx context.Context, r *repo.Repo, number int64, by Person, add, remove []int64) ([]int64, error) {
	pr, err := s.Get(ctx, r, number)
	if err != nil {
		return nil, err
	}
	if pr.State != StateOpen && len(add) > 0 {
		return nil, fault.Conflict("pull request #%d is %s: it takes no more reviewers", number, pr.State)
	}
	if slices.Contains(add, pr.AuthorID) {
		return nil, fault.Invalid("add", "the author of a pull request cannot be asked to review it")
	}
	db := s.db.WithContext(ctx)
	if len(remove) > 0 {
		if err := db.Where("pull_id = ? AND user_id IN ?", pr.ID, remove).Delete(&Reviewer{}).Error; err != nil {
			return nil, err
		}
	}
	have, err := s.Reviewers(ctx, pr)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now().UTC()
	for _, id := range add {
		if slices.Contains(have, id) {
			continue
		}
		if len(have) >= MaxReviewers {
			return nil, fault.Invalid("add", "a pull request has at most %d reviewers", MaxReviewers)
		}
		rv := &Reviewer{PullID: pr.ID, UserID: id, CreatedAt: now}
		if by.ID != 0 {
			rv.RequestedBy = &by.ID
		}
		if err := db.Clauses(clause.OnConflict{DoNothing: true}).Create(rv).Error; err != nil {
			return nil, err
		}
		have = append(have, id)
	}
	return s.Reviewers(ctx, pr)
}

// Reviewers returns the ids of the people asked to review pr, in the order they were asked.
func (s *Service) Reviewers(ctx context.Context, pr *Request) ([]int64, error) {
	var rs []Reviewer
	if err := s.db.WithContext(ctx).Where("pull_id = ?", pr.ID).Order("created_at, user_id").Find(&rs).Error; err != nil {
		return nil, err
	}
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.UserID
	}
	return out, nil
}
