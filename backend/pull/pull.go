// Package pull is pull requests: a source branch proposed for merging into a target branch of
// the same repository, reviewed, checked by its pipelines and merged by Nimbus. README.md draws
// the whole flow.
//
// Opening, editing, closing and reopening a request, keeping it in step with its branches, and
// merging it in the bare repository:
//
//	Open ──► number (the repo's own sequence, under a lock) ──► Sync
//	Sync: source and target heads ─► git.MergeTree ─► clean: the pre-merged commit
//	      (target + source, on refs/pull/<n>/merge) · conflicts: their paths, no merge ref
//	      refs/pull/<n>/head is the source head, so the request's commits outlive its branch
//	Merge: Sync, the gate (gate.go), then by mode (merge commit, squash, rebase) a commit made
//	      by the merging user ─► git.UpdateRef of the target from the head Sync saw (a push
//	      meanwhile is a 409) ─► the row says merged; the source branch is deleted if asked
//
// Around it: the routes (http.go), reviews (review.go), branch rules and the push guard
// (rules.go), the merge gate and pull_request.mergeable (gate.go); the pull_request* events are
// fired from app.New into build.OnPull. Not here yet: comments and forks (issue 34's closing
// notes). The git refs are derived data: a failure after the row is written leaves a request
// that the next Sync repairs.
package pull

import (
	"encoding/json"
	"strconv"
	"time"
)

// States of a request.
const (
	StateOpen   = "open"
	StateClosed = "closed"
	StateMerged = "merged"
)

// Merge modes.
const (
	ModeMerge  = "merge"  // a merge commit of target and source
	ModeSquash = "squash" // one commit on the target with the change of the whole request
	ModeRebase = "rebase" // the source's commits replayed onto the target, no merge commit
	// ModeAuto is the first mode the repository allows, in the order above (git:auto-merge's
	// mergeType auto).
	ModeAuto = "auto"
)

// Limits on what people write.
const (
	MaxTitle = 256
	MaxBody  = 64 << 10
)

// Request is one pull request (table pull_requests, migration 00028).
type Request struct {
	ID           int64  `gorm:"primaryKey"`
	RepoID       int64  `gorm:"not null"`
	Number       int64  `gorm:"not null"`
	SourceRepoID int64  // 0 (NULL) once the fork it came from is deleted (migration 00030)
	SourceBranch string `gorm:"not null"`
	TargetBranch string `gorm:"not null"`
	Title        string `gorm:"not null"`
	Body         string `gorm:"not null"`
	State        string `gorm:"not null"`
	AuthorID     int64  `gorm:"not null"`
	// HeadSHA and BaseSHA are the source and target heads the request was last synced with.
	HeadSHA string `gorm:"not null"`
	BaseSHA string `gorm:"not null"`
	// MergeBase is their best common ancestor: the files changed are those of MergeBase..HeadSHA.
	MergeBase string `gorm:"not null"`
	// MergeSHA is the pre-merged commit (refs/pull/<n>/merge); "" while they conflict.
	MergeSHA string `gorm:"column:merge_sha;not null"`
	// Conflicts is a JSON array of the conflicting paths ("[]" when clean).
	Conflicts string `gorm:"not null"`
	// MergeableSHA is the source head pull_request.mergeable last fired for ("" before).
	MergeableSHA string `gorm:"column:mergeable_sha;not null"`
	// RunApprovedSHA is the source head a maintainer approved to run (ApproveRun), for a
	// request whose proposed code waits for that (RunHeld); RunApprovedBy who did.
	RunApprovedSHA string `gorm:"column:run_approved_sha;not null"`
	RunApprovedBy  *int64 `gorm:"column:run_approved_by"`
	MergedBy       *int64
	MergedAt       *time.Time
	MergeCommit    string `gorm:"not null"`
	MergeMode      string `gorm:"not null"`
	ClosedAt       *time.Time
	CreatedAt      time.Time `gorm:"not null"`
	UpdatedAt      time.Time `gorm:"not null"`
}

// TableName is the table of Request.
func (Request) TableName() string { return "pull_requests" }

// ConflictPaths are the paths that keep the request from merging.
func (r *Request) ConflictPaths() []string {
	var out []string
	json.Unmarshal([]byte(r.Conflicts), &out)
	return out
}

// HeadRef is the hidden ref that keeps the request's source commits.
func HeadRef(number int64) string { return "refs/pull/" + itoa(number) + "/head" }

// MergeRef is the hidden ref of the pre-merged commit.
func MergeRef(number int64) string { return "refs/pull/" + itoa(number) + "/merge" }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
