package app

import (
	"context"
	"strings"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/pull"
)

// pullEvents turns what happens to pull requests into builds (cnb-reference §3.1):
//
//	opened, reopened, source pushed  pull_request and pull_request.update on the pre-merged
//	                                 commit, pull_request.target on the target head
//	title or description edited      pull_request.update
//	approved, changes requested      pull_request.approved / .changes_requested (pre-merged)
//	merged                           pull_request.merged on the merged commit, and the push
//	                                 of the target (and of the deleted source) as a git push
//	                                 would fire them; open requests on that target re-sync
//	run approved                     what opening fires, for the approved head
//
// A request whose proposed code waits for "Approve and run" (pull.Service.RunHeld: a fork's,
// by someone outside the team) fires nothing but pull_request.mergeable and .merged, which
// run the target's own code after a maintainer acted. Builds of a fork's proposed code are
// untrusted (build.Build.Untrusted): no secrets, no secret files, caches of their own.
func (a *App) pullEvents(publicURL string) func(context.Context, pull.Event) {
	return func(ctx context.Context, ev pull.Event) {
		pr := ev.Request
		if ev.What != pull.Mergeable && ev.What != pull.Merged {
			held, err := a.Pulls.RunHeld(ctx, ev.Repo, pr)
			if err != nil {
				a.Log.ErrorContext(ctx, "pull events: is the request held", "repo_id", ev.Repo.ID, "pull", pr.Number, "err", err)
				return
			}
			if held {
				a.Log.InfoContext(ctx, "pull request from a fork waits for a maintainer to approve it to run", "repo_id", ev.Repo.ID,
					"pull", pr.Number, "head", pr.HeadSHA, "event", ev.What)
				return
			}
		}
		var user *auth.User
		if ev.By.ID != 0 {
			user, _ = a.Auth.UserByID(ctx, ev.By.ID)
		}
		_, o, err := a.Repos.ByID(ctx, ev.Repo.ID)
		if err != nil {
			a.Log.ErrorContext(ctx, "pull events: load repo", "repo_id", ev.Repo.ID, "err", err)
			return
		}
		slug := o.Name + "/" + ev.Repo.Name
		if pr.SourceRepoID != ev.Repo.ID {
			if from, fo, err := a.Repos.ByID(ctx, pr.SourceRepoID); err == nil {
				slug = fo.Name + "/" + from.Name
			}
		}
		base := build.PullEvent{ID: pr.ID, Number: pr.Number, Title: pr.Title, SourceBranch: pr.SourceBranch,
			TargetBranch: pr.TargetBranch, SourceSlug: slug, HeadSHA: pr.HeadSHA, BaseSHA: pr.BaseSHA, MergeSHA: pr.MergeSHA,
			MergeBase: pr.MergeBase, URL: pull.URL(publicURL, o.Name, ev.Repo.Name, pr.Number), Fork: pr.SourceRepoID != ev.Repo.ID}
		if u, err := a.Auth.UserByID(ctx, pr.AuthorID); err == nil {
			base.Proposer = u.Username
		}
		if ids, err := a.Pulls.Reviewers(ctx, pr); err == nil {
			var names []string
			for _, id := range ids {
				if u, err := a.Auth.UserByID(ctx, id); err == nil {
					names = append(names, u.Username)
				}
			}
			base.Reviewers = strings.Join(names, ",")
		}
		var evs []build.PullEvent
		with := func(event, action, commit string) {
			e := base
			e.Event, e.Action, e.Commit = event, action, commit
			evs = append(evs, e)
		}
		switch ev.What {
		case pull.Opened, pull.Reopened, pull.Pushed, pull.RunApproved:
			action := "created"
			if ev.What == pull.Pushed {
				action = "code_update"
			}
			with(build.EventPull, action, pr.MergeSHA)
			with(build.EventPullUpdate, action, pr.MergeSHA)
			with(build.EventPullTarget, action, pr.BaseSHA)
		case pull.Edited:
			with(build.EventPullUpdate, "status_update", pr.MergeSHA)
		case pull.Approved, pull.ChangesRequested:
			event, state := build.EventPullApproved, "approve"
			if ev.What == pull.ChangesRequested {
				event, state = build.EventPullChangesRequested, "unapprove"
			}
			var approvers []string
			if reviews, err := a.Pulls.Reviews(ctx, pr); err == nil {
				for _, id := range pull.Summarize(pr, reviews).Approvals {
					if u, err := a.Auth.UserByID(ctx, id); err == nil {
						approvers = append(approvers, u.Username)
					}
				}
			}
			base.ReviewState, base.ReviewedBy, base.LastReviewedBy = state, strings.Join(approvers, ","), ev.By.Name
			with(event, "status_update", pr.MergeSHA)
		case pull.Commented:
			commit := pr.MergeSHA
			if commit == "" {
				commit = pr.HeadSHA
			}
			base.CommentID, base.CommentBody = ev.Comment.ID, ev.Comment.Body
			with(build.EventPullComment, "", commit)
		case pull.Mergeable:
			with(build.EventPullMergeable, "", pr.BaseSHA)
		case pull.Merged:
			with(build.EventPullMerged, "", ev.Merge.Target.New)
			updates := []git.RefUpdate{ev.Merge.Target}
			if ev.Merge.SourceDeleted {
				updates = append(updates, git.RefUpdate{Old: pr.HeadSHA, New: git.ZeroSHA, Ref: "refs/heads/" + pr.SourceBranch})
			}
			a.Builds.OnPush(ctx, ev.Repo.ID, user, updates)
			a.Pulls.OnPush(ctx, ev.Repo, ev.By, updates)
		}
		a.Builds.OnPull(ctx, ev.Repo.ID, user, evs)
	}
}

// pullChecks reads a request's checks from its pull_request builds (pull.Checks); pull and build
// do not know each other.
type pullChecks struct{ builds *build.Service }

// A commit status set on the head counts too, by its context (after the pipelines, so a
// pipeline's name wins over a status of the same name).
func (c pullChecks) PullChecks(ctx context.Context, repoID, number int64, head string) ([]pull.Check, bool, error) {
	cs, found, err := c.builds.PullChecks(ctx, repoID, number, head)
	if err != nil {
		return nil, false, err
	}
	out := make([]pull.Check, len(cs))
	for i, x := range cs {
		out[i] = pull.Check{Name: x.Name, Status: x.Status, Build: x.Build}
	}
	sts, err := c.builds.Statuses(ctx, repoID, head)
	if err != nil {
		return nil, false, err
	}
	for _, st := range sts {
		status := map[string]string{build.StatePending: build.StatusRunning, build.StateSuccess: build.StatusSuccess,
			build.StateFailure: build.StatusFailed, build.StateError: "error"}[st.State]
		out = append(out, pull.Check{Name: st.Context, Status: status})
	}
	return out, found || len(sts) > 0, nil
}

// recheckPull runs the merge gate of the request whose pull_request pipeline p just ended: its
// checks may all have passed now (pull_request.mergeable). The request's author is who "did" it.
func (a *App) recheckPull(ctx context.Context, p *build.Pipeline) {
	run, ok, err := a.Builds.PullOf(ctx, p.ID)
	if err != nil {
		a.Log.ErrorContext(ctx, "merge gate after a check: read the build", "pipeline", p.ID, "err", err)
	}
	if !ok || run.Event != build.EventPull {
		return
	}
	r, _, err := a.Repos.ByID(ctx, run.RepoID)
	if err != nil {
		a.Log.ErrorContext(ctx, "merge gate after a check: load repo", "repo_id", run.RepoID, "err", err)
		return
	}
	if _, err := a.Pulls.Recheck(ctx, r, run.Number, pull.Person{}); err != nil {
		a.Log.ErrorContext(ctx, "merge gate after a check", "repo_id", run.RepoID, "pull", run.Number, "err", err)
	}
}

// jobPulls tells the pull routes which request a job token's pipeline runs for
// (pull.JobPulls).
type jobPulls struct{ builds *build.Service }

func (j jobPulls) JobPull(ctx context.Context, pipelineID int64) (string, int64, bool, error) {
	run, ok, err := j.builds.PullOf(ctx, pipelineID)
	return run.Event, run.Number, ok, err
}
