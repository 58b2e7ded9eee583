package apiclient

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// The calls below are the API as the CLI uses it. Each response type
// holds only the fields its callers read; contract_test.go checks every one of them against
// the operation's documented response, so a renamed or removed field fails there first.

// Workspace is a cloud workspace as the team's list shows it (GET /orgs/{org}/workspaces).
type Workspace struct {
	ID           int64  `json:"id"`
	Org          string `json:"org"`
	Repo         string `json:"repo"`
	Branch       string `json:"branch"`
	BuildNumber  int64  `json:"build_number"`
	PipelineName string `json:"pipeline_name"`
	State        string `json:"state"`
	Reason       string `json:"reason"`
}

// WorkspaceList is the team's workspaces, newest first (at most 200, one page).
type WorkspaceList struct {
	Items []Workspace `json:"items"`
}

// Workspaces lists the team's active workspaces, or with all the ended ones too.
func (c *Client) Workspaces(ctx context.Context, org string, all bool) ([]Workspace, error) {
	path := Path("orgs", org, "workspaces")
	if all {
		path += "?" + url.Values{"all": {"true"}}.Encode()
	}
	var l WorkspaceList
	if err := c.Do(ctx, http.MethodGet, path, nil, &l); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// Build is a build as the routes that start one answer it (opening workspaces, running a
// build): its number, branch and status, its pipelines, and the error of a file that does not
// compile.
type Build struct {
	Number    int64           `json:"number"`
	Branch    string          `json:"branch"`
	Status    string          `json:"status"`
	Pipelines []BuildPipeline `json:"pipelines"`
	Error     *FileError      `json:"error"`
}

// BuildPipeline is a pipeline of a Build.
type BuildPipeline struct {
	ID             int64   `json:"id"`
	Name           string  `json:"name"`
	Status         string  `json:"status"`
	Workspace      bool    `json:"workspace"`
	WorkspaceState *string `json:"workspace_state"`
}

// FileError is where a build's file fails to compile.
type FileError struct {
	Message string `json:"message"`
	File    string `json:"file"`
	Line    int    `json:"line"`
}

// OpenWorkspaces fires the vscode event on the head of branch (the default branch when empty):
// the build whose workspace pipelines are the workspaces (POST /repos/{org}/{repo}/workspaces).
func (c *Client) OpenWorkspaces(ctx context.Context, org, repo, branch string) (*Build, error) {
	body := map[string]string{}
	if branch != "" {
		body["branch"] = branch
	}
	var b Build
	if err := c.Do(ctx, http.MethodPost, Path("repos", org, repo, "workspaces"), body, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// StopWorkspace stops a workspace gracefully (POST /workspaces/{id}/stop): its endStages run
// and its uncommitted work is saved.
func (c *Client) StopWorkspace(ctx context.Context, id int64) error {
	return c.Do(ctx, http.MethodPost, Path("workspaces", strconv.FormatInt(id, 10), "stop"), nil, nil)
}

// ArtifactVersion is a version of a model package with its files
// (GET /repos/{org}/{repo}/artifacts/{package}/{version}; "latest" names the newest).
type ArtifactVersion struct {
	Version string         `json:"version"`
	Files   []ArtifactFile `json:"files"`
}

// ArtifactFile is a file of an ArtifactVersion: its name, size and "sha256:<hex>" digest.
type ArtifactFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	Digest string `json:"digest"`
}

// Published is the answer to a model file's upload (PUT …/{version}/{file}): 201 when it was
// stored, 200 when the same bytes were there already.
type Published struct {
	DownloadURL string `json:"download_url"`
}

// ArtifactPath is the API path of a package's version, or of one of its files when file is
// given.
func ArtifactPath(org, repo, pkg, version string, file ...string) string {
	return Path(append([]string{"repos", org, repo, "artifacts", pkg, version}, file...)...)
}

// ArtifactVersion reads a version of a package and the list of its files.
func (c *Client) ArtifactVersion(ctx context.Context, org, repo, pkg, version string) (*ArtifactVersion, error) {
	var v ArtifactVersion
	if err := c.Do(ctx, http.MethodGet, ArtifactPath(org, repo, pkg, version), nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}
