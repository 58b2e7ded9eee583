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
