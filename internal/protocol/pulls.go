package protocol

// Pull requests: the git:auto-merge task, which the agent runs itself in a build of the
// pull_request.mergeable event, merges the build's request with the pipeline's job token
// through the public API (backend/pull/http.go), as any client could. The server lets a job
// token merge only the request of its own pull_request.mergeable build, and only through the
// request's merge gate.
//
//	POST /api/v1/repos/{org}/{repo}/pulls/{number}/merge   MergeRequest → 200 MergedPull

// MergeRequest merges a pull request.
type MergeRequest struct {
	// Mode is merge, squash, rebase, or auto (the first the repository allows).
	Mode               string `json:"mode"`
	Message            string `json:"message,omitempty"`
	DeleteSourceBranch bool   `json:"delete_source_branch"`
}

// MergedPull is the part of a merged request the agent reads back.
type MergedPull struct {
	Number      int64  `json:"number"`
	State       string `json:"state"`
	MergeCommit string `json:"merge_commit"`
	MergeMode   string `json:"merge_mode"`
}

// The git:reviewer task asks people to review the build's request, or stops asking them:
//
//	POST /api/v1/repos/{org}/{repo}/pulls/{number}/reviewers   ReviewersRequest → 200 ReviewedPull

// ReviewersRequest changes a request's reviewers: usernames to add and remove, and how many more
// to pick at random among the team's members who may write to the repo.
type ReviewersRequest struct {
	Add    []string `json:"add,omitempty"`
	Remove []string `json:"remove,omitempty"`
	Pick   int      `json:"pick,omitempty"`
}

// ReviewedPull is the part of the request the agent reads back.
type ReviewedPull struct {
	Number             int64    `json:"number"`
	RequestedReviewers []string `json:"requested_reviewers"`
}
