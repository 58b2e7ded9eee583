package build

import (
	"context"
	"errors"
	"strconv"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/pipeline/spec"
)

// Pull request events (backend/pull says what happened; app.New hands it here). Which commit
// each runs, and so which .cnb.yml it reads, is CNB's (cnb-reference §3.4):
//
//	pull_request, .update           the pre-merged commit (refs/pull/<n>/merge)
//	pull_request.target             the target branch's head, before the merge
//	pull_request.merged             the merged commit on the target
//	pull_request.approved,          the pre-merged commit
//	  .changes_requested
//	pull_request.mergeable          the target branch's head (the request passed its gate)
//	pull_request.comment            the pre-merged commit, or the source head while they conflict
//
// Pipelines are selected by the **target** branch (CNB_BRANCH is the target), and ifModify sees
// the request's changed files (merge base .. source head).

// Pull event names.
const (
	EventPull       = "pull_request"
	EventPullUpdate = "pull_request.update"
	EventPullTarget = "pull_request.target"
	EventPullMerged = "pull_request.merged"
	// EventPullApproved and EventPullChangesRequested run the pre-merged commit.
	EventPullApproved         = "pull_request.approved"
	EventPullChangesRequested = "pull_request.changes_requested"
	// EventPullMergeable runs the target's head: the request passed its merge gate.
	EventPullMergeable = "pull_request.mergeable"
	// EventPullComment runs the pre-merged commit (the source head while they conflict).
	EventPullComment = "pull_request.comment"
)

// ProposedCode reports whether event runs a pull request's proposed code: the pre-merged commit
// (or the source head), which anyone who can push to the source branch wrote. Its pipelines get
// the reduced job token of CNB's §3.2 (JobScopes). pull_request.target, .mergeable and .merged
// run the target's own code and config, and keep the full token, as push pipelines do.
func ProposedCode(event string) bool {
	switch event {
	case EventPull, EventPullUpdate, EventPullApproved, EventPullChangesRequested, EventPullComment:
		return true
	}
	return false
}

// JobScopes are the scopes of a pipeline's CNB_TOKEN under event. Proposed code reads the repo
// and its registry, sets commit statuses and comments on its request (CNB's repo-code:r,
// repo-registry:r, repo-commit-status:rw, repo-notes:rw): it cannot push, publish, merge,
// trigger builds or change the repo. Every other event writes the repo and its registry.
func JobScopes(event string) auth.Scopes {
	if ProposedCode(event) {
		return auth.Scopes{auth.ScopeRepoRead, auth.ScopeRegistryRead, auth.ScopeRepoStatus, auth.ScopeRepoNotes}
	}
	return auth.Scopes{auth.ScopeRepoWrite, auth.ScopeRegistryWrite}
}

// PullEvent is one pull request event to plan.
type PullEvent struct {
	Event string
	// Action is CNB_PULL_REQUEST_ACTION: created, code_update or status_update.
	Action string
	// Commit is the commit the event runs (see above).
	Commit string
	ID     int64
	Number int64
	Title  string
	// Proposer is the author's username.
	Proposer                   string
	SourceBranch, TargetBranch string
	SourceSlug                 string // the source repository, org/repo
	// Fork says the source is another repository (a fork): the builds of the request's proposed
	// code are untrusted (Build.Untrusted).
	Fork             bool
	HeadSHA, BaseSHA string // the source and target heads
	MergeSHA         string // the pre-merged commit ("" while it conflicts)
	MergeBase        string
	// URL is the request's page (CNB_EVENT_URL).
	URL string
	// ReviewState is CNB_PULL_REQUEST_REVIEW_STATE: approve or unapprove (changes requested);
	// ReviewedBy (CNB_REVIEW_REVIEWED_BY) the approvers, comma-separated; LastReviewedBy
	// (CNB_REVIEW_LAST_REVIEWED_BY) who reviewed last. Set for review events.
	ReviewState, ReviewedBy, LastReviewedBy string
	// Reviewers is CNB_PULL_REQUEST_REVIEWERS: the usernames asked to review, comma-separated.
	Reviewers string
	// CommentID and CommentBody are CNB_COMMENT_ID and CNB_COMMENT_BODY, for comment events.
	CommentID   int64
	CommentBody string
}

// OnPull plans the events of one pull request of repoID, as user (who opened, pushed, edited or
// merged), and stores the builds. Like OnPush, failures are logged, never returned: the action
// on the request has happened already.
func (s *Service) OnPull(ctx context.Context, repoID int64, user *auth.User, evs []PullEvent) []*Build {
	began := time.Now()
	r, o, err := s.repos.ByID(ctx, repoID)
	if err != nil {
		s.log.ErrorContext(ctx, "pull trigger: load repo", "repo_id", repoID, "err", err)
		return nil
	}
	rd, err := git.OpenReader(ctx, s.repos.Path(r))
	if err != nil {
		s.log.ErrorContext(ctx, "pull trigger: open repo", "repo_id", repoID, "err", err)
		return nil
	}
	defer rd.Close()
	var changed []string
	if len(evs) > 0 && evs[0].MergeBase != "" {
		if changed, err = rd.ChangedFiles(evs[0].MergeBase, evs[0].HeadSHA, MaxChangedFiles); err != nil {
			s.log.ErrorContext(ctx, "pull trigger: changed files", "repo", o.Name+"/"+r.Name, "pull", evs[0].Number, "err", err)
			changed = nil // ifModify is then ignored: the jobs run
		} else if changed == nil {
			changed = []string{}
		}
	}
	var builds []*Build
	for _, ev := range evs {
		if ev.Commit == "" {
			continue // a pre-merged event of a request that conflicts: nothing to run
		}
		c, err := s.compile(rd, ev.Commit)
		if err == nil {
			var b *Build
			b, err = s.create(ctx, c, request{repo: r, org: o, user: user, event: ev.Event, branch: ev.TargetBranch,
				trigger: spec.Trigger{Event: ev.Event, Branch: ev.TargetBranch, Changed: changed}, pull: &ev})
			builds = append(builds, nonNil(b)...)
		}
		if err != nil {
			s.log.ErrorContext(ctx, "pull trigger failed", "repo", o.Name+"/"+r.Name, "pull", ev.Number, "event", ev.Event, "err", err)
		}
	}
	s.log.InfoContext(ctx, "pull triggered", "repo", o.Name+"/"+r.Name, "events", len(evs), "builds", len(builds),
		"elapsed_us", time.Since(began).Microseconds())
	return builds
}

// pullVars are the CNB_PULL_REQUEST* variables of an event (cnb-reference §5.2).
func pullVars(ev *PullEvent, v map[string]string) {
	isPull := ev.Event == EventPull || ev.Event == EventPullUpdate || ev.Event == EventPullTarget
	v["CNB_PULL_REQUEST"] = strconv.FormatBool(isPull)
	v["CNB_PULL_REQUEST_LIKE"] = "true"
	v["CNB_PULL_REQUEST_PROPOSER"] = ev.Proposer
	v["CNB_PULL_REQUEST_TITLE"] = ev.Title
	v["CNB_PULL_REQUEST_BRANCH"] = ev.SourceBranch
	v["CNB_PULL_REQUEST_SHA"] = ev.HeadSHA
	v["CNB_PULL_REQUEST_TARGET_SHA"] = ev.BaseSHA
	v["CNB_PULL_REQUEST_MERGE_SHA"] = ev.MergeSHA
	v["CNB_PULL_REQUEST_SLUG"] = ev.SourceSlug
	v["CNB_PULL_REQUEST_ACTION"] = ev.Action
	v["CNB_PULL_REQUEST_ID"] = strconv.FormatInt(ev.ID, 10)
	v["CNB_PULL_REQUEST_IID"] = strconv.FormatInt(ev.Number, 10)
	v["CNB_EVENT_URL"] = ev.URL
	v["CNB_PULL_REQUEST_REVIEWERS"] = ev.Reviewers
	if ev.CommentID != 0 {
		v["CNB_COMMENT_ID"] = strconv.FormatInt(ev.CommentID, 10)
		v["CNB_COMMENT_BODY"] = ev.CommentBody
	}
	if ev.ReviewState != "" {
		v["CNB_PULL_REQUEST_REVIEW_STATE"] = ev.ReviewState
		v["CNB_REVIEW_REVIEWED_BY"] = ev.ReviewedBy
		v["CNB_REVIEW_LAST_REVIEWED_BY"] = ev.LastReviewedBy
	}
}

// PullCheck is one pipeline of a request's pull_request build: a check of the merge gate
// (backend/pull/gate.go).
type PullCheck struct {
	Name   string
	Status string
	Build  int64 // the build's number in its repository
}

// PullChecks returns the pipelines of the newest pull_request build of request number of repoID
// that ran on source head head, in order; found is false when no such build exists. Only the
// pull_request event counts: pull_request.update also runs on edits, and .target runs the
// target alone, so neither says whether this head passes.
func (s *Service) PullChecks(ctx context.Context, repoID, number int64, head string) ([]PullCheck, bool, error) {
	var b Build
	err := s.db.WithContext(ctx).Where("repo_id = ? AND event = ? AND pull_number = ? AND pull_head_sha = ?", repoID, EventPull, number, head).
		Order("id DESC").Limit(1).Take(&b).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var ps []Pipeline
	if err := s.db.WithContext(ctx).Omit("plan").Where("build_id = ?", b.ID).Order("position").Find(&ps).Error; err != nil {
		return nil, false, err
	}
	out := make([]PullCheck, len(ps))
	for i, p := range ps {
		out[i] = PullCheck{Name: p.Name, Status: p.Status, Build: b.Number}
	}
	return out, true, nil
}

// PullRun is the request a pull_request* build runs for, as its pipelines' readers see it.
type PullRun struct {
	RepoID int64
	Event  string // the build's event: pull_request, pull_request.mergeable, …
	Number int64
}

// PullOf names the request whose pull_request* build pipelineID belongs to: ok is false for a
// pipeline of any other build.
func (s *Service) PullOf(ctx context.Context, pipelineID int64) (run PullRun, ok bool, err error) {
	var b Build
	err = s.db.WithContext(ctx).Select("builds.repo_id", "builds.event", "builds.pull_number").
		Joins("JOIN pipelines ON pipelines.build_id = builds.id").Where("pipelines.id = ?", pipelineID).Take(&b).Error
	if err != nil || b.PullNumber == nil {
		return PullRun{}, false, err
	}
	return PullRun{RepoID: b.RepoID, Event: b.Event, Number: *b.PullNumber}, true, nil
}
