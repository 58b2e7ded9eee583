package runner

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// git:reviewer asks people to review the pipeline's pull request, or stops asking them, with the
// job token (protocol/pulls.go). Its options are CNB's:
//
//	type        add-reviewer (the default): the usernames of reviewers
//	            remove-reviewer: stop asking the usernames of reviewers
//	            add-reviewer-from-repo-members, add-reviewer-from-group-members: count (default
//	            1) more, at random among the team's members who may write (a team is both the
//	            repo's members and its group here), besides any reviewers named
//	reviewers   usernames, a list or comma-separated
//	count       how many to pick, 1 to 10
//
// The server refuses a username that is unknown or may not approve (no write access), and the
// request's author.

const typeGitReviewer = "git:reviewer"

// ReviewerSetter is the part of the agent's client that changes a request's reviewers.
type ReviewerSetter interface {
	SetReviewers(ctx context.Context, jobToken, slug string, number int64, req protocol.ReviewersRequest) (protocol.ReviewedPull, error)
}

// reviewersRequest reads git:reviewer's options.
func reviewersRequest(opts map[string]any) (protocol.ReviewersRequest, error) {
	var req protocol.ReviewersRequest
	typ, err := optionString(opts["type"])
	if err != nil {
		return req, fmt.Errorf("option type: %w", err)
	}
	var names []string
	if v, ok := opts["reviewers"].(string); ok {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
	} else if names, err = optionStrings(opts["reviewers"]); err != nil {
		return req, fmt.Errorf("option reviewers: %w", err)
	}
	count := 1
	if v, ok := opts["count"]; ok && v != nil {
		s, err := optionString(v)
		if err == nil {
			count, err = strconv.Atoi(strings.TrimSpace(s))
		}
		if err != nil || count < 1 || count > 10 {
			return req, fmt.Errorf("option count: a number from 1 to 10, not %v", v)
		}
	}
	switch strings.TrimSpace(typ) {
	case "", "add-reviewer":
		if len(names) == 0 {
			return req, errors.New("option reviewers: name whom to ask (usernames)")
		}
		req.Add = names
	case "remove-reviewer":
		if len(names) == 0 {
			return req, errors.New("option reviewers: name whom to stop asking (usernames)")
		}
		req.Remove = names
	case "add-reviewer-from-repo-members", "add-reviewer-from-group-members":
		req.Add, req.Pick = names, count
	default:
		return req, fmt.Errorf("option type: %q: use add-reviewer, remove-reviewer, add-reviewer-from-repo-members or add-reviewer-from-group-members", typ)
	}
	return req, nil
}

// gitReviewer runs git:reviewer.
func (x *run) gitReviewer(ctx context.Context, job protocol.Job, env map[string]string, jl *jobLog) jobResult {
	fail := func(err error) jobResult {
		if ctx.Err() != nil {
			return x.interrupted(ctx)
		}
		jl.note("%s: %v", typeGitReviewer, err)
		return x.failure(job, typeGitReviewer+": "+err.Error(), nil)
	}
	rs, ok := x.cfg.API.(ReviewerSetter)
	if !ok {
		return fail(errors.New("this agent cannot change reviewers"))
	}
	number, ok := pullNumber(env)
	if !ok {
		return fail(errors.New("no pull request: git:reviewer runs in a pull_request* build"))
	}
	opts := runtimeOptions(job.Options, job.RuntimeVars, env)
	req, err := reviewersRequest(opts)
	if err != nil {
		return fail(err)
	}
	out, err := rs.SetReviewers(ctx, x.lease.JobToken, env["CNB_REPO_SLUG"], number, maskReport(req, x.secretList()))
	if err != nil {
		return fail(err)
	}
	jl.note("%s: pull request #%d asks %s to review", typeGitReviewer, out.Number, strings.Join(out.RequestedReviewers, ", "))
	code := exitSuccess
	return jobResult{status: StatusSuccess, code: &code}
}
