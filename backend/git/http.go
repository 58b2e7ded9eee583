package git

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Errors a HandlerConfig.Resolve returns (wrapped or not) to pick the HTTP answer. Anything
// else is a logged 500.
var (
	// ErrUnauthenticated: no or bad credentials where some are needed. The handler answers 401
	// with a Basic challenge, and the git client asks for (or sends) a username and password.
	ErrUnauthenticated = errors.New("git: authentication required")
	// ErrNotFound: no such repo, or a private repo the caller may not see: 404 either way, so
	// nobody learns which private repos exist.
	ErrNotFound = errors.New("git: repository not found")
	// ErrForbidden: the caller sees the repo but may not do this (a reader pushing): 403.
	ErrForbidden = errors.New("git: forbidden")
)

// Realm is the HTTP Basic realm of the 401 challenge.
const Realm = "Nimbus"

// Repo is what Resolve hands back for an authorized request.
type Repo struct {
	ID     int64  // the repo's id, for OnPush
	Path   string // absolute path of the bare repository on disk
	UserID int64  // who is authenticated (0: anonymous), for OnPush
	User   string // their username ("" when anonymous); git records it in the reflog as REMOTE_USER
}

// RefUpdate is one ref a push changed, as git reports it to post-receive. Old is zero (see
// IsZeroSHA) for a created ref, New is zero for a deleted one; Ref is the full name
// ("refs/heads/main", "refs/tags/v1").
type RefUpdate struct {
	Old, New, Ref string
}

// HandlerConfig is what NewHandler needs. Resolve and WorkDir are required.
type HandlerConfig struct {
	// GitPath is the git executable; "" means "git" on PATH. It is resolved once, at start.
	GitPath string

	// Resolve authenticates the request (HTTP Basic: r.BasicAuth) and authorizes it for org/repo,
	// where write is true for every part of a push (the receive-pack ref advertisement and the
	// POST). It returns the repo, or an error that is or wraps ErrUnauthenticated, ErrNotFound
	// or ErrForbidden. org and repo are already valid names (ValidName); repo is without ".git".
	Resolve func(ctx context.Context, r *http.Request, org, repo string, write bool) (Repo, error)

	// OnPush, when set, is called once per push that updated at least one ref, after git has
	// finished, with exactly the refs it updated, in git's order; every ref name passes
	// CheckRefName (a push naming another is refused before git runs). It runs before the response
	// ends, so when `git push` returns the caller's work (creating builds) is done; keep it
	// short or hand off. Its context carries the request's values but is not cancelled when the
	// client goes away: the refs are updated either way.
	//
	// The lines it returns (links to the builds the push started) are what the pusher's git
	// prints after the push, each as "remote: <line>", after any of git's own; nil prints
	// nothing. They travel on git's side band, which every git client asks for; for one that
	// did not, or an answer git did not end as expected, they are dropped (pushreply.go).
	OnPush func(ctx context.Context, repo Repo, updates []RefUpdate) []string

	// Guard, when set, judges a push before git runs, from its commands (every ref name passes
	// CheckRefName): refs it refuses make the whole push fail with the reasons in git's own
	// output and nothing written; refs it holds to fast-forwards are checked once the pack is in
	// (the pre-receive hook), so a force push to them fails the same way. An error answers 500.
	Guard func(ctx context.Context, repo Repo, updates []RefUpdate) (Verdict, error)

	// WorkDir is a local directory the handler owns: it writes its git hook there and keeps a
	// small file per push in flight. Created if missing; leftovers of a crash are removed at
	// start, so two handlers must not share one.
	WorkDir string

	// Logger receives request failures and one line per push; nil discards.
	Logger *slog.Logger
}

// Handler serves git's smart HTTP protocol for the repos Resolve grants. Create it with
// NewHandler; it is safe for concurrent use.
type Handler struct {
	git      string // absolute path of the git executable
	hooksDir string // core.hooksPath of every git http-backend run
	pushDir  string // per-push files that the post-receive hook fills
	resolve  func(ctx context.Context, r *http.Request, org, repo string, write bool) (Repo, error)
	onPush   func(ctx context.Context, repo Repo, updates []RefUpdate) []string
	guard    func(ctx context.Context, repo Repo, updates []RefUpdate) (Verdict, error)
	log      *slog.Logger
}

// Verdict is what a Guard decides about a push. Reasons are what the pusher reads, one line
// each (control characters are replaced).
type Verdict struct {
	// Refused are the refs the push may not create, move or delete, by name, with the reason.
	Refused map[string]string
	// FastForwardOnly are the refs the push may only move forward, with the reason a force push
	// (or any move to a commit that does not contain the old one) is refused.
	FastForwardOnly map[string]string
}

// NewHandler checks cfg, finds git, installs the post-receive hook under cfg.WorkDir and
// returns the handler. Mount it where URLs are /{org}/{repo}.git/… (at the root, or below a
// prefix with http.StripPrefix).
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	if cfg.Resolve == nil {
		return nil, errors.New("git: HandlerConfig.Resolve is required")
	}
	if cfg.WorkDir == "" {
		return nil, errors.New("git: HandlerConfig.WorkDir is required")
	}
	bin := cfg.GitPath
	if bin == "" {
		bin = DefaultBinary
	}
	bin, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("git: find git: %w", err)
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return nil, fmt.Errorf("git: find git: %w", err)
	}
	work, err := filepath.Abs(cfg.WorkDir)
	if err != nil {
		return nil, fmt.Errorf("git: work dir: %w", err)
	}
	h := &Handler{
		git:      bin,
		hooksDir: filepath.Join(work, "hooks"),
		pushDir:  filepath.Join(work, "pushes"),
		resolve:  cfg.Resolve,
		onPush:   cfg.OnPush,
		guard:    cfg.Guard,
		log:      cfg.Logger,
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if err := installHooks(h.hooksDir); err != nil {
		return nil, err
	}
	// Files left here belong to pushes of a process that is gone.
	if err := os.RemoveAll(h.pushDir); err != nil {
		return nil, fmt.Errorf("git: clean %s: %w", h.pushDir, err)
	}
	if err := os.MkdirAll(h.pushDir, 0o700); err != nil {
		return nil, fmt.Errorf("git: create %s: %w", h.pushDir, err)
	}
	return h, nil
}

// ValidName reports whether name may be an org or repo name in a git URL: 1 to 100 of
// [A-Za-z0-9._-], starting with a letter or digit, without ".." and not ending in ".git" (which
// would make "/org/x.git.git" ambiguous). Such a name can never be a path component that
// climbs out of anything. Use it when creating orgs and repos too.
func ValidName(name string) bool {
	if name == "" || len(name) > 100 || strings.Contains(name, "..") ||
		strings.HasSuffix(strings.ToLower(name), ".git") {
		return false
	}
	for i, c := range name {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return false
		}
	}
	return true
}

// The endpoints of smart HTTP, after /{org}/{repo}.git/. Nothing else is served: no dumb
// protocol, no raw object files; git ≥ 1.6.6 never needs them.
const (
	fileInfoRefs    = "info/refs"
	fileUploadPack  = "git-upload-pack"
	fileReceivePack = "git-receive-pack"
)

// Route is one method and path the handler serves.
type Route struct {
	Method, Path string
}

// Routes lists every method and path (below the mount point, with {org} and {repo}) the
// handler serves, for the tests that send bad input to every route of the server.
func Routes() []Route {
	const repo = "/{org}/{repo}.git/"
	var out []Route
	for _, svc := range []string{fileUploadPack, fileReceivePack} {
		out = append(out,
			Route{http.MethodGet, repo + fileInfoRefs + "?service=" + svc},
			Route{http.MethodHead, repo + fileInfoRefs + "?service=" + svc},
			Route{http.MethodPost, repo + svc})
	}
	return out
}

// request is a git HTTP request that passed the routing checks.
type request struct {
	org, repo string
	file      string // one of the file* constants
	service   string // git-upload-pack or git-receive-pack
	write     bool
}

// route parses and checks the URL and method. ok is false for anything that is not a smart
// HTTP URL of valid names (answer 404); allow is set when only the method is wrong (405).
func route(r *http.Request) (req request, allow string, ok bool) {
	// Names never need escaping, so an escaped path ("%2e%2e", "%2F") is an attempt at
	// something else: refuse it before it is decoded into a different shape.
	if r.URL.RawPath != "" || !strings.HasPrefix(r.URL.Path, "/") {
		return request{}, "", false
	}
	parts := strings.SplitN(r.URL.Path[1:], "/", 3)
	if len(parts) != 3 {
		return request{}, "", false
	}
	repo, isGit := strings.CutSuffix(parts[1], ".git")
	if !isGit || !ValidName(parts[0]) || !ValidName(repo) {
		return request{}, "", false
	}
	req = request{org: parts[0], repo: repo, file: parts[2]}
	var methodOK bool
	switch req.file {
	case fileInfoRefs:
		req.service = r.URL.Query().Get("service")
		if req.service != fileUploadPack && req.service != fileReceivePack {
			return request{}, "", false // a dumb-protocol client, or junk
		}
		allow, methodOK = "GET, HEAD", r.Method == http.MethodGet || r.Method == http.MethodHead
	case fileUploadPack, fileReceivePack:
		req.service = req.file
		allow, methodOK = "POST", r.Method == http.MethodPost
	default:
		return request{}, "", false
	}
	req.write = req.service == fileReceivePack
	if !methodOK {
		return request{}, allow, false
	}
	return req, "", true
}

// ServeHTTP routes, authorizes through Resolve, runs git http-backend and, after a push,
// calls OnPush.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, allow, ok := route(r)
	if !ok {
		if allow != "" {
			w.Header().Set("Allow", allow)
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		http.Error(w, "repository not found", http.StatusNotFound)
		return
	}
	repo, err := h.resolve(r.Context(), r, req.org, req.repo, req.write)
	if err != nil {
		h.fail(w, r, req, err)
		return
	}
	if !filepath.IsAbs(repo.Path) {
		h.fail(w, r, req, fmt.Errorf("git: resolve %s/%s: repo path %q is not absolute", req.org, req.repo, repo.Path))
		return
	}
	if enc := r.Header.Get("Content-Encoding"); enc != "" && enc != "gzip" && enc != "x-gzip" {
		http.Error(w, "unsupported content encoding", http.StatusUnsupportedMediaType)
		return
	}
	if req.file != fileReceivePack {
		h.serveBackend(w, r, req, repo, "", nil)
		return
	}
	h.servePush(w, r, req, repo)
}

// servePush runs a receive-pack with a fresh push log, then hands what the hook wrote to OnPush,
// whose lines end git's answer. The log is removed whatever happens.
func (h *Handler) servePush(w http.ResponseWriter, r *http.Request, req request, repo Repo) {
	r, err := inflatePush(r)
	if err != nil {
		http.Error(w, "the request body is not valid gzip", http.StatusBadRequest)
		return
	}
	br := bufio.NewReaderSize(r.Body, 64<<10)
	cmds, caps, consumed := peekCommands(br)
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(consumed), br))
	if bad := invalidRefs(cmds); len(bad) > 0 {
		// The pusher's mistake, told to them: not something for an operator to look at.
		h.refuse(w, r, req, repo, cmds, caps, "git push refused: invalid ref names", bad, "not updated: another ref of this push has an invalid name")
		return
	}
	var fastForward map[string]string
	if h.guard != nil && len(cmds) > 0 {
		updates := make([]RefUpdate, len(cmds))
		for i, c := range cmds {
			updates[i] = RefUpdate{Old: c.old, New: c.new, Ref: c.ref}
		}
		v, err := h.guard(r.Context(), repo, updates)
		if err != nil {
			_, _ = io.Copy(io.Discard, r.Body)
			h.fail(w, r, req, fmt.Errorf("git: push guard: %w", err))
			return
		}
		if len(v.Refused) > 0 {
			refused := make(map[string]refusal, len(v.Refused))
			for ref, why := range v.Refused {
				refused[ref] = refusal{report: why, message: why}
			}
			h.refuse(w, r, req, repo, cmds, caps, "git push refused by a branch rule", refused, "not updated: another ref of this push was refused")
			return
		}
		fastForward = v.FastForwardOnly
	}

	log, err := os.CreateTemp(h.pushDir, "push-*")
	if err != nil {
		h.fail(w, r, req, fmt.Errorf("git: push log: %w", err))
		return
	}
	defer os.Remove(log.Name())
	if err := log.Close(); err != nil {
		h.fail(w, r, req, fmt.Errorf("git: push log: %w", err))
		return
	}
	ctx := context.WithoutCancel(r.Context())
	// With a side band, git's answer goes through a writer that holds back its last pkt-line,
	// so that OnPush's lines can still be sent in front of it (pushreply.go). Every way out of
	// here ends the answer.
	var lines []string
	if payload := sideBandPayload(caps); payload > 0 && h.onPush != nil {
		reply := newReplyWriter(w, payload)
		w = reply
		defer func() {
			if _, err := reply.finish(lines); err != nil {
				h.log.DebugContext(ctx, "git push: the client left before the end of the answer", "repo_id", repo.ID, "err", err)
			}
		}()
	}
	h.serveBackend(w, r, req, repo, log.Name(), fastForward)

	updates, err := readPushLog(log.Name())
	if err != nil {
		// The refs are updated but we cannot say which: loud, because a build will be missing.
		h.log.ErrorContext(ctx, "git push: read ref updates", "repo_id", repo.ID, "err", err)
		return
	}
	// Only the deletion of a ref with an invalid name gets this far (see receive.go); it
	// fires nothing, so that every name OnPush sees is a valid one.
	updates = slices.DeleteFunc(updates, func(u RefUpdate) bool { return CheckRefName(u.Ref) != nil })
	if len(updates) == 0 {
		return
	}
	h.log.InfoContext(ctx, "git push", "repo_id", repo.ID, "org", req.org, "repo", req.repo,
		"user", repo.User, "refs", len(updates))
	if h.onPush != nil {
		lines = h.onPush(ctx, repo, updates)
	}
}

// refuse answers a push that may not run with every refused ref's reason, and logs it.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, req request, repo Repo, cmds []refCommand, caps []string, what string,
	reasons map[string]refusal, others string) {
	names := make([]string, 0, len(reasons))
	for ref := range reasons {
		names = append(names, strconv.Quote(ref))
	}
	slices.Sort(names)
	h.log.InfoContext(r.Context(), what, "repo_id", repo.ID, "org", req.org, "repo", req.repo, "user", repo.User,
		"refs", strings.Join(names, " "))
	refusePush(w, r.Body, cmds, caps, reasons, others)
}

// Refuse answers a request the server refuses before it reaches the handler (a URL that is
// not valid UTF-8) as the handler answers its own refusals: plain text, which git shows.
func (h *Handler) Refuse(w http.ResponseWriter, r *http.Request, status int, message string) {
	http.Error(w, message, status)
}

// fail answers a Resolve (or setup) error with the status its sentinel stands for.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, req request, err error) {
	switch {
	case errors.Is(err, ErrUnauthenticated):
		w.Header().Set("WWW-Authenticate", `Basic realm="`+Realm+`"`)
		http.Error(w, "authentication required", http.StatusUnauthorized)
	case errors.Is(err, ErrNotFound):
		http.Error(w, "repository not found", http.StatusNotFound)
	case errors.Is(err, ErrForbidden):
		http.Error(w, "forbidden", http.StatusForbidden)
	case r.Context().Err() != nil:
		// A fetch or push the git client gave up on: the request's context ends only when the
		// client goes away. No server error; recorded as nginx's 499 (api.StatusClientClosed).
		h.log.DebugContext(r.Context(), "git request abandoned by its client", "org", req.org, "repo", req.repo, "err", err)
		w.WriteHeader(499)
	default:
		h.log.ErrorContext(r.Context(), "git request failed", "org", req.org, "repo", req.repo,
			"service", req.service, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
	}
}
