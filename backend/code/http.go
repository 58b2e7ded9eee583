// Package code lets people and pipelines read a repository's code over the API, as the code
// pages of GitHub or GitLab do: branches and tags with their last commit and its check state,
// the tree and files at any branch, tag or commit, raw downloads, a paginated history, and a
// commit with its whole diff.
//
//	GET …/branches, …/tags        refs ─► git.RefTips ─► git.Commits (one process) ─► checks
//	GET …/tree?ref=&path=         ref ─► git.ResolveRef ─► git.Tree (+ the README's path)
//	GET …/blob?ref=&path=         git.ReadBlob (≤ MaxShown): text, or binary / too large / LFS
//	GET …/raw?ref=&path=          git.StreamBlob, served as an attachment-safe download
//	GET …/commits?ref=&path=      git.Log, a page at a time (the cursor is how many to skip)
//	GET …/commits/{sha}           git.Commit + git.Diff against the first parent
//
// Every route reads: read access to the repository, token scope repo:read, and a job token of
// the repository's own pipelines (CNB's API reads with CNB_TOKEN too). A secret repository has
// no code here. Check states come from build through the Checks interface (app fills it), so
// this package never imports build.
package code

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// MaxShown is the largest file the blob route returns as text; bigger ones are downloaded raw.
const MaxShown = git.MaxFileSize

// MaxDiffBytes bounds the patches of one diff answer; files past it keep their counts and say
// truncated (a diff of a generated file should not take the page down).
const MaxDiffBytes = 4 << 20

// Checks reads the check states of commits ("", pending, failure or success), as
// build.Service.ChecksOf makes them, for a page of commits at once (a commit without checks
// may be absent from the map).
type Checks interface {
	StatesOf(ctx context.Context, repoID int64, shas []string) (map[string]string, error)
}

// Handler serves the code routes.
type Handler struct {
	repos  *repo.Service
	checks Checks
	log    *slog.Logger
}

// NewHandler returns the code routes.
func NewHandler(repos *repo.Service, checks Checks, log *slog.Logger) *Handler {
	return &Handler{repos: repos, checks: checks, log: log}
}

// Routes implements server.Module.
func (h *Handler) Routes(_ *gin.Engine, v1 *gin.RouterGroup) {
	rs := api.NewRoutes(v1, h.log)
	rs.GET("/repos/:org/:repo/branches", h.branches)
	rs.GET("/repos/:org/:repo/tags", h.tags)
	rs.GET("/repos/:org/:repo/tree", h.tree)
	rs.GET("/repos/:org/:repo/blob", h.blob)
	rs.GET("/repos/:org/:repo/raw", h.raw)
	rs.GET("/repos/:org/:repo/commits", h.commits)
	rs.GET("/repos/:org/:repo/commits/:sha", h.commit)
}

// CommitJSON is a commit as the code routes show it.
type CommitJSON struct {
	SHA            string    `json:"sha"`
	Title          string    `json:"title"`
	Message        string    `json:"message"`
	AuthorName     string    `json:"author_name"`
	AuthorEmail    string    `json:"author_email"`
	AuthoredAt     time.Time `json:"authored_at"`
	CommitterName  string    `json:"committer_name"`
	CommitterEmail string    `json:"committer_email"`
	CommittedAt    time.Time `json:"committed_at"`
	// Checks is the commit's check state: "", pending, failure or success.
	Checks string `json:"checks"`
}

// RefJSON is a branch or tag.
type RefJSON struct {
	Name    string     `json:"name"`
	Default bool       `json:"default"`
	Commit  CommitJSON `json:"commit"`
}

// EntryJSON is an entry of a directory.
type EntryJSON struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Type string `json:"type"` // blob, tree or commit (a submodule)
	Mode string `json:"mode"`
	SHA  string `json:"sha"`
	Size int64  `json:"size"`
}

// TreeJSON is a directory at a commit.
type TreeJSON struct {
	Ref     string      `json:"ref"`
	Commit  string      `json:"commit"`
	Path    string      `json:"path"`
	Entries []EntryJSON `json:"entries"`
	// Readme is the path of the directory's README (README.md first), "" when it has none.
	Readme string `json:"readme"`
}

// LFSJSON is what a Git LFS pointer points at.
type LFSJSON struct {
	OID  string `json:"oid"`
	Size int64  `json:"size"`
}

// BlobJSON is a file at a commit. Content is its text when it is UTF-8 text of at most MaxShown
// bytes; otherwise Binary or TooLarge says why not (LFS: a pointer, shown as such).
type BlobJSON struct {
	Ref      string   `json:"ref"`
	Commit   string   `json:"commit"`
	Path     string   `json:"path"`
	SHA      string   `json:"sha"`
	Size     int64    `json:"size"`
	Mode     string   `json:"mode"`
	Binary   bool     `json:"binary"`
	TooLarge bool     `json:"too_large"`
	LFS      *LFSJSON `json:"lfs"`
	Content  *string  `json:"content"`
	RawURL   string   `json:"raw_url"`
}

// FileJSON is a file of a diff.
type FileJSON struct {
	Path      string `json:"path"`
	OldPath   string `json:"old_path"`
	Status    string `json:"status"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Binary    bool   `json:"binary"`
	Patch     string `json:"patch"`
	Truncated bool   `json:"truncated"`
}

// CommitDetailJSON is a commit with its parents and its diff against the first parent.
type CommitDetailJSON struct {
	CommitJSON
	Parents []string   `json:"parents"`
	Files   []FileJSON `json:"files"`
}

// FilesJSON turns a diff into its JSON (never nil).
func FilesJSON(files []git.FileDiff) []FileJSON {
	out := make([]FileJSON, 0, len(files))
	for _, f := range files {
		out = append(out, FileJSON{Path: f.Path, OldPath: f.OldPath, Status: f.Status, Additions: f.Additions,
			Deletions: f.Deletions, Binary: f.Binary, Patch: f.Patch, Truncated: f.Truncated})
	}
	return out
}

// load authorizes a read of the route's repository, which must hold code.
func (h *Handler) load(c *gin.Context) (*repo.Access, string, error) {
	a, err := repo.Load(c, h.repos, repo.Read)
	if err != nil {
		return nil, "", err
	}
	if a.Repo.Secret {
		return nil, "", fault.NotFound("%s/%s is a secret repository: it holds sealed files, not code", a.Org.Name, a.Repo.Name)
	}
	return a, h.repos.Path(a.Repo), nil
}

// resolve reads the ref query parameter (the default branch when absent) as a commit.
func (h *Handler) resolve(c *gin.Context, a *repo.Access, bare string) (string, string, error) {
	ref := c.Query("ref")
	if ref == "" {
		ref = a.Repo.DefaultBranch
	}
	sha, err := git.ResolveRef(c.Request.Context(), bare, ref)
	if errors.Is(err, git.ErrUnknownRevision) || errors.Is(err, git.ErrInvalid) {
		return "", "", fault.NotFound("no branch, tag or commit %q in %s/%s", ref, a.Org.Name, a.Repo.Name)
	}
	return ref, sha, err
}

// pathParam reads the path query parameter: "" for the root, else a path the path rule accepts.
func pathParam(c *gin.Context) string {
	return strings.Trim(c.Query("path"), "/")
}

// gitFault turns git's answers about a path into the API's; dir says the route wanted a
// directory (the tree), not a file.
func gitFault(err error, p string, dir bool) error {
	switch {
	case errors.Is(err, git.ErrNotExist):
		return fault.NotFound("no %s at this commit", p)
	case errors.Is(err, git.ErrNotFile) && dir:
		return fault.Invalid("path", "%s is a file, not a directory: read it with the blob route", p)
	case errors.Is(err, git.ErrNotFile):
		return fault.Invalid("path", "%s is a directory or a submodule, not a file", p)
	case errors.Is(err, git.ErrInvalid):
		return fault.Invalid("path", "%q is not a path in a repository", p)
	}
	return err
}

// CommitOf is a commit's JSON without its check state.
func CommitOf(c git.CommitInfo) CommitJSON {
	return CommitJSON{SHA: c.SHA, Title: c.Title, Message: c.Message, AuthorName: c.AuthorName, AuthorEmail: c.AuthorEmail,
		AuthoredAt: c.Time, CommitterName: c.CommitterName, CommitterEmail: c.CommitterEmail, CommittedAt: c.CommitterTime}
}

// commitsJSON is the JSON of commits with their check states, read in one go. A failed read
// of the states is logged and leaves them empty: the commits are still worth showing.
func (h *Handler) commitsJSON(ctx context.Context, repoID int64, cs []git.CommitInfo) []CommitJSON {
	out := make([]CommitJSON, len(cs))
	shas := make([]string, len(cs))
	for i, c := range cs {
		out[i] = CommitOf(c)
		shas[i] = c.SHA
	}
	if h.checks == nil || len(cs) == 0 {
		return out
	}
	states, err := h.checks.StatesOf(ctx, repoID, shas)
	if err != nil {
		h.log.ErrorContext(ctx, "code: commit check states", "repo_id", repoID, "err", err)
		return out
	}
	for i := range out {
		out[i].Checks = states[out[i].SHA]
	}
	return out
}

func (h *Handler) refs(c *gin.Context, prefix string) error {
	a, bare, err := h.load(c)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	tips, err := git.RefTips(ctx, bare, prefix)
	if err != nil {
		return err
	}
	shas := make([]string, len(tips))
	for i, t := range tips {
		shas[i] = t.SHA
	}
	infos, err := git.Commits(ctx, bare, shas)
	if err != nil {
		return err
	}
	commits := h.commitsJSON(ctx, a.Repo.ID, infos)
	out := make([]RefJSON, 0, len(tips))
	for i, t := range tips {
		out = append(out, RefJSON{Name: t.Name, Default: prefix == "refs/heads/" && t.Name == a.Repo.DefaultBranch, Commit: commits[i]})
	}
	return api.JSON(c, http.StatusOK, api.List[RefJSON]{Items: out})
}

// branches is GET /repos/{org}/{repo}/branches: every branch, by name, with its last commit.
func (h *Handler) branches(c *gin.Context) error { return h.refs(c, "refs/heads/") }

// tags is GET /repos/{org}/{repo}/tags: every tag of a commit, by name, with that commit.
func (h *Handler) tags(c *gin.Context) error { return h.refs(c, "refs/tags/") }

// tree is GET /repos/{org}/{repo}/tree?ref=&path=: a directory at a commit.
func (h *Handler) tree(c *gin.Context) error {
	a, bare, err := h.load(c)
	if err != nil {
		return err
	}
	ref, sha, err := h.resolve(c, a, bare)
	if err != nil {
		return err
	}
	p := pathParam(c)
	entries, err := git.Tree(c.Request.Context(), bare, sha, p)
	if err != nil {
		return gitFault(err, p, true)
	}
	out := TreeJSON{Ref: ref, Commit: sha, Path: p, Entries: make([]EntryJSON, 0, len(entries))}
	best := 0
	for _, e := range entries {
		out.Entries = append(out.Entries, EntryJSON{Name: e.Name, Path: e.Path, Type: e.Type, Mode: e.Mode, SHA: e.SHA, Size: e.Size})
		if e.Type == "blob" {
			if rank := readmeRank(e.Name); rank > best {
				best, out.Readme = rank, e.Path
			}
		}
	}
	return api.JSON(c, http.StatusOK, out)
}

// readmeRank prefers README.md, then other README files (0: not a README).
func readmeRank(name string) int {
	lower := strings.ToLower(name)
	switch {
	case lower == "readme.md":
		return 3
	case lower == "readme" || lower == "readme.txt" || lower == "readme.markdown":
		return 2
	case strings.HasPrefix(lower, "readme."):
		return 1
	}
	return 0
}

// fileAt is the file a blob or raw route names, its first bytes read.
type fileAt struct {
	a              *repo.Access
	bare, ref, sha string
	path           string
	blob           git.Blob
}

// file authorizes the route, resolves its ref and reads the first max bytes of its path.
func (h *Handler) file(c *gin.Context, max int64) (*fileAt, error) {
	a, bare, err := h.load(c)
	if err != nil {
		return nil, err
	}
	ref, sha, err := h.resolve(c, a, bare)
	if err != nil {
		return nil, err
	}
	p := pathParam(c)
	if p == "" {
		return nil, fault.Invalid("path", "name a file")
	}
	b, err := git.ReadBlob(c.Request.Context(), bare, sha, p, max)
	if err != nil {
		return nil, gitFault(err, p, false)
	}
	return &fileAt{a: a, bare: bare, ref: ref, sha: sha, path: p, blob: b}, nil
}

// blob is GET /repos/{org}/{repo}/blob?ref=&path=: a file at a commit, for showing.
func (h *Handler) blob(c *gin.Context) error {
	f, err := h.file(c, MaxShown+1)
	if err != nil {
		return err
	}
	b := f.blob
	out := BlobJSON{Ref: f.ref, Commit: f.sha, Path: f.path, SHA: b.SHA, Size: b.Size, Mode: b.Mode,
		RawURL: fmt.Sprintf("/api/v1/repos/%s/%s/raw?ref=%s&path=%s", f.a.Org.Name, f.a.Repo.Name, f.sha, url.QueryEscape(f.path))}
	switch {
	case b.Size > MaxShown:
		out.TooLarge = true
	case git.IsBinary(b.Data) || !utf8.Valid(b.Data):
		out.Binary = true
	default:
		if ptr, ok := git.ParseLFSPointer(b.Data); ok {
			out.LFS = &LFSJSON{OID: ptr.OID, Size: ptr.Size}
		}
		text := string(b.Data)
		out.Content = &text
	}
	return api.JSON(c, http.StatusOK, out)
}

// raw is GET /repos/{org}/{repo}/raw?ref=&path=: the file's bytes. They are served so that a
// browser never runs them as a page of this origin: text as text/plain, anything else as a
// download, with nosniff and a sandboxing CSP.
func (h *Handler) raw(c *gin.Context) error {
	f, err := h.file(c, 8000)
	if err != nil {
		return err
	}
	a, bare, p, head := f.a, f.bare, f.path, f.blob
	w := c.Writer
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "sandbox; default-src 'none'")
	w.Header().Set("Content-Length", strconv.FormatInt(head.Size, 10))
	if git.IsBinary(head.Data) || !utf8.Valid(head.Data) && len(head.Data) < 8000 {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
	} else {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	w.WriteHeader(http.StatusOK)
	if err := git.StreamBlob(c.Request.Context(), bare, head.SHA, w); err != nil {
		// The status is out; a client sees a short body. Say why in the log.
		h.log.WarnContext(c.Request.Context(), "raw download cut short", "repo_id", a.Repo.ID, "path", p, "err", err)
	}
	return nil
}

// commits is GET /repos/{org}/{repo}/commits?ref=&path=&cursor=&limit=: the history of a ref
// (of one path, with path), newest first, paged as every list is (the cursor counts the
// commits before the page).
func (h *Handler) commits(c *gin.Context) error {
	a, bare, err := h.load(c)
	if err != nil {
		return err
	}
	_, sha, err := h.resolve(c, a, bare)
	if err != nil {
		return err
	}
	page, err := api.ParsePage(c)
	if err != nil {
		return err
	}
	skip, limit := int(page.After), page.Limit
	p := pathParam(c)
	infos, err := git.Log(c.Request.Context(), bare, sha, p, skip, limit+1)
	if err != nil {
		return gitFault(err, p, false)
	}
	var out api.List[CommitJSON]
	if len(infos) > limit {
		infos = infos[:limit]
		out.NextCursor = api.Cursor(int64(skip + limit))
	}
	out.Items = h.commitsJSON(c.Request.Context(), a.Repo.ID, infos)
	return api.JSON(c, http.StatusOK, out)
}

// commit is GET /repos/{org}/{repo}/commits/{sha}: a commit (any revision naming one) with its
// diff against its first parent (every file added for a root commit).
func (h *Handler) commit(c *gin.Context) error {
	a, bare, err := h.load(c)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	sha, err := git.ResolveRef(ctx, bare, c.Param("sha"))
	if errors.Is(err, git.ErrUnknownRevision) || errors.Is(err, git.ErrInvalid) {
		return fault.NotFound("no commit %q in %s/%s", c.Param("sha"), a.Org.Name, a.Repo.Name)
	}
	if err != nil {
		return err
	}
	info, err := git.Commit(ctx, bare, sha)
	if err != nil {
		return err
	}
	parents, err := git.Parents(ctx, bare, sha)
	if err != nil {
		return err
	}
	from := ""
	if len(parents) > 0 {
		from = parents[0]
	}
	files, err := git.Diff(ctx, bare, from, sha, MaxDiffBytes)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, CommitDetailJSON{CommitJSON: h.commitsJSON(ctx, a.Repo.ID, []git.CommitInfo{info})[0], Parents: append([]string{}, parents...),
		Files: FilesJSON(files)})
}
