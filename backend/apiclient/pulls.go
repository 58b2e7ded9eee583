package apiclient

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// PullRequest is a pull request (schema PullRequest).
type PullRequest struct {
	Number       int64      `json:"number"`
	Title        string     `json:"title"`
	Body         string     `json:"body"`
	State        string     `json:"state"` // open, closed, merged
	SourceBranch string     `json:"source_branch"`
	TargetBranch string     `json:"target_branch"`
	Author       string     `json:"author"`
	HeadSHA      string     `json:"head_sha"`
	BaseSHA      string     `json:"base_sha"`
	MergeBase    string     `json:"merge_base"`
	MergeSHA     string     `json:"merge_sha"` // the pre-merged commit; "" while it conflicts
	Mergeable    bool       `json:"mergeable"`
	Conflicts    []string   `json:"conflicts"`
	MergedBy     *string    `json:"merged_by"`
	MergedAt     *time.Time `json:"merged_at"`
	MergeCommit  string     `json:"merge_commit"`
	MergeMode    string     `json:"merge_mode"`
	ClosedAt     *time.Time `json:"closed_at"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	URL          string     `json:"url"`
	// ApprovedBy approve the current head; ChangesRequestedBy ask for changes (each reviewer's
	// last word).
	ApprovedBy         []string `json:"approved_by"`
	ChangesRequestedBy []string `json:"changes_requested_by"`
	// RequestedReviewers are the people asked to review it.
	RequestedReviewers []string `json:"requested_reviewers"`
	// Checks is the head's check state in one word: "", pending, failure or success.
	Checks string `json:"checks"`
	// Gate is where an open request stands against its merge gate (single reads only).
	Gate *PullGate `json:"gate,omitempty"`
	// SourceRepo is the fork the source branch is in (org/name); "" for the repository's own.
	SourceRepo string `json:"source_repo"`
	// SourceDeleted: the fork the request came from is gone; the request stays.
	SourceDeleted bool `json:"source_deleted"`
	// RunHeld: a fork's request by an outsider waits for ApprovePullRun before anything runs.
	RunHeld       bool    `json:"run_held"`
	RunApprovedBy *string `json:"run_approved_by"`
}

// PullGate is a request's merge gate (schema PullGate): passed when Unmet is empty.
type PullGate struct {
	Passed bool   `json:"passed"`
	Rule   string `json:"rule"`
	Unmet  []struct {
		Code    string `json:"code"`
		Rule    string `json:"rule"`
		Message string `json:"message"`
	} `json:"unmet"`
	Checks []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
		Build  int64  `json:"build"`
	} `json:"checks"`
}

// UnmetCodes are the codes of the gate's unmet conditions, in order.
func (g *PullGate) UnmetCodes() []string {
	out := []string{}
	for _, u := range g.Unmet {
		out = append(out, u.Code)
	}
	return out
}

// PullComment is a comment (schema PullComment).
type PullComment struct {
	ID       int64  `json:"id"`
	Author   string `json:"author"`
	Pipeline *struct {
		ID int64 `json:"id"`
	} `json:"pipeline"`
	Body      string    `json:"body"`
	Path      string    `json:"path"`
	Line      int       `json:"line"`
	Commit    string    `json:"commit"`
	Outdated  bool      `json:"outdated"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// NewPullComment is a comment to post (schema PullCommentNew): Path and Line for a line comment.
type NewPullComment struct {
	Body string `json:"body"`
	Path string `json:"path,omitempty"`
	Line int    `json:"line,omitempty"`
}

// PullReview is a review (schema PullReview).
type PullReview struct {
	ID        int64     `json:"id"`
	Reviewer  string    `json:"reviewer"`
	State     string    `json:"state"` // approve, request_changes, comment
	Body      string    `json:"body"`
	Commit    string    `json:"commit"`
	Stale     bool      `json:"stale"`
	CreatedAt time.Time `json:"created_at"`
}

// NewPull is what opening a pull request takes (schema PullRequestOpen).
type NewPull struct {
	SourceRepo   string `json:"source_repo,omitempty"` // a fork, org/name; default: this repo
	SourceBranch string `json:"source_branch"`
	TargetBranch string `json:"target_branch,omitempty"` // default: the repo's default branch
	Title        string `json:"title"`
	Body         string `json:"body,omitempty"`
}

// PullMerge is how to merge (schema PullRequestMerge).
type PullMerge struct {
	Mode               string `json:"mode,omitempty"` // merge (default), squash, rebase
	Message            string `json:"message,omitempty"`
	DeleteSourceBranch bool   `json:"delete_source_branch,omitempty"`
}

func pullPath(org, repo string, number int64, more ...string) string {
	return Path(append([]string{"repos", org, repo, "pulls", strconv.FormatInt(number, 10)}, more...)...)
}

// OpenPull opens a pull request (POST /repos/{org}/{repo}/pulls).
func (c *Client) OpenPull(ctx context.Context, org, repo string, in NewPull) (*PullRequest, error) {
	return call[PullRequest](ctx, c, http.MethodPost, Path("repos", org, repo, "pulls"), in)
}

// PullMetricValue is one build's value of a metric (schema PullMetricValue).
type PullMetricValue struct {
	Value      float64 `json:"value"`
	Build      int64   `json:"build"`
	PipelineID int64   `json:"pipeline_id"`
	Commit     string  `json:"commit"`
}

// PullMetricDelta is a metric of a request against its target (schema PullMetricDelta).
type PullMetricDelta struct {
	Name     string           `json:"name"`
	Head     PullMetricValue  `json:"head"`
	Base     *PullMetricValue `json:"base"`
	Delta    *float64         `json:"delta"`
	Better   string           `json:"better"` // lower or higher
	Declared bool             `json:"declared"`
	Verdict  string           `json:"verdict"` // better, worse, same; "" without a base
}

// PullMetrics compares a request's metrics with its target's (GET
// /repos/{org}/{repo}/pulls/{number}/metrics).
func (c *Client) PullMetrics(ctx context.Context, org, repo string, number int64) ([]PullMetricDelta, error) {
	out, err := call[struct {
		Items []PullMetricDelta `json:"items"`
	}](ctx, c, http.MethodGet, Path("repos", org, repo, "pulls", strconv.FormatInt(number, 10), "metrics"), nil)
	if err != nil {
		return nil, err
	}
	return out.Items, nil
}

// ApprovePullRun lets a held request from a fork run its pipelines ("Approve and run"; POST
// /repos/{org}/{repo}/pulls/{number}/approve-run).
func (c *Client) ApprovePullRun(ctx context.Context, org, repo string, number int64) (*PullRequest, error) {
	return call[PullRequest](ctx, c, http.MethodPost, Path("repos", org, repo, "pulls", strconv.FormatInt(number, 10), "approve-run"), nil)
}

// Pulls lists a repository's pull requests of a state (open, closed, merged or all), newest
// first, the first 100 (GET /repos/{org}/{repo}/pulls).
func (c *Client) Pulls(ctx context.Context, org, repo string, f PullFilter) ([]PullRequest, error) {
	q := url.Values{"limit": {"100"}, "state": {f.State}}
	if f.Author != "" {
		q.Set("author", f.Author)
	}
	if f.Reviewer != "" {
		q.Set("reviewer", f.Reviewer)
	}
	page, err := call[PullList](ctx, c, http.MethodGet, Path("repos", org, repo, "pulls")+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	return page.Items, nil
}

// PullFilter narrows Pulls: State is open, closed, merged or all; Author and Reviewer are
// usernames ("" for anyone).
type PullFilter struct {
	State, Author, Reviewer string
}

// PullList is a page of pull requests (schema PullRequestList).
type PullList struct {
	Items      []PullRequest `json:"items"`
	NextCursor string        `json:"next_cursor"`
}

// GetPull reads a pull request (GET /repos/{org}/{repo}/pulls/{number}).
func (c *Client) GetPull(ctx context.Context, org, repo string, number int64) (*PullRequest, error) {
	return call[PullRequest](ctx, c, http.MethodGet, pullPath(org, repo, number), nil)
}

// MergePull merges a pull request (POST /repos/{org}/{repo}/pulls/{number}/merge).
func (c *Client) MergePull(ctx context.Context, org, repo string, number int64, in PullMerge) (*PullRequest, error) {
	return call[PullRequest](ctx, c, http.MethodPost, pullPath(org, repo, number, "merge"), in)
}

// ReviewPull reviews a pull request: state approve, request_changes or comment
// (POST /repos/{org}/{repo}/pulls/{number}/reviews).
func (c *Client) ReviewPull(ctx context.Context, org, repo string, number int64, state, body string) (*PullReview, error) {
	return call[PullReview](ctx, c, http.MethodPost, pullPath(org, repo, number, "reviews"), map[string]string{"state": state, "body": body})
}

// CommentPull posts a comment on a pull request.
func (c *Client) CommentPull(ctx context.Context, org, repo string, number int64, in NewPullComment) (*PullComment, error) {
	return call[PullComment](ctx, c, http.MethodPost, pullPath(org, repo, number, "comments"), in)
}

// PullComments lists a pull request's first 100 comments, oldest first.
func (c *Client) PullComments(ctx context.Context, org, repo string, number int64) ([]PullComment, error) {
	page, err := call[struct {
		Items []PullComment `json:"items"`
	}](ctx, c, http.MethodGet, pullPath(org, repo, number, "comments")+"?limit=100", nil)
	if err != nil {
		return nil, err
	}
	return page.Items, nil
}
