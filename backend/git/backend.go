package git

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"os/exec"
	"strconv"
	"strings"
)

// Why not net/http/cgi: it refuses chunked request bodies, and git sends every push bigger
// than its http.postBuffer (1 MiB) chunked. This file is the small part of CGI git needs, and
// it streams both ways: the request body is git's stdin, git's stdout is copied to the client
// as it comes, so no pack is ever held in memory.

// serveBackend runs `git http-backend` for one authorized request. pushLog, for a
// receive-pack POST, is the file the post-receive hook writes the accepted ref updates to;
// fastForward the refs the pre-receive hook holds to fast-forwards, with the reasons.
func (h *Handler) serveBackend(w http.ResponseWriter, r *http.Request, req request, repo Repo, pushLog string, fastForward map[string]string) {
	// A fetch dies with its client. A push that reached git runs to its end, so that the refs,
	// the hook and OnPush agree; a client that goes away mid-pack still stops git, because
	// reading the request body fails and git sees its stdin end early.
	parent := r.Context()
	if req.write {
		parent = context.WithoutCancel(parent)
	}
	ctx, cancel := context.WithCancel(parent)
	defer cancel()

	cmd := exec.CommandContext(ctx, h.git, "http-backend")
	cmd.Env = h.backendEnv(r, req, repo, pushLog)
	if len(fastForward) > 0 {
		cmd.Env = append(cmd.Env, fastForwardEnv+"="+fastForwardList(fastForward))
	}
	cmd.WaitDelay = waitDelay
	stderr := &capWriter{max: maxStderr}
	cmd.Stderr = stderr
	if r.Method == http.MethodPost {
		cmd.Stdin = r.Body
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		h.fail(w, r, req, fmt.Errorf("git http-backend: %w", err))
		return
	}
	// git may answer (progress, keep-alives) while the client is still sending. Go's HTTP/1
	// server would otherwise discard or cut off the rest of the request body as soon as the
	// response header goes out.
	rc := http.NewResponseController(w)
	if r.Method == http.MethodPost {
		if err := rc.EnableFullDuplex(); err != nil {
			// A middleware in front of the handler hides the server's writer (it needs an
			// Unwrap method). Serving on mostly works, since git rarely answers before it has
			// read the whole request, but say so: it is a bug to fix in that middleware.
			h.log.WarnContext(r.Context(), "git: response writer cannot do full duplex", "err", err)
		}
	}
	if err := cmd.Start(); err != nil {
		h.fail(w, r, req, fmt.Errorf("git http-backend: %w", err))
		return
	}

	out := bufio.NewReaderSize(stdout, 32<<10)
	status, header, err := readCGIHeader(out)
	if err != nil {
		cancel()
		_ = cmd.Wait()
		h.fail(w, r, req, fmt.Errorf("git http-backend: %w: %s", err, strings.TrimSpace(stderr.String())))
		return
	}
	for k, vv := range header {
		w.Header()[k] = vv
	}
	w.WriteHeader(status)
	if err := copyFlush(w, rc, out); err != nil {
		// The client is gone. A fetch is pointless now; a push must still finish (see above),
		// so its remaining output goes nowhere.
		if req.write {
			_, _ = io.Copy(io.Discard, out)
		} else {
			cancel()
		}
	}
	if err := cmd.Wait(); err != nil && ctx.Err() == nil {
		h.log.WarnContext(r.Context(), "git http-backend failed", "org", req.org, "repo", req.repo,
			"service", req.service, "status", status, "err", err, "stderr", strings.TrimSpace(stderr.String()))
	}
}

// backendEnv is the CGI environment of one http-backend run: the clean base, the request
// variables git reads, and per-run config through GIT_CONFIG_* (which outranks any file).
func (h *Handler) backendEnv(r *http.Request, req request, repo Repo, pushLog string) []string {
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet // Go drops the body of a HEAD answer itself
	}
	query := ""
	if req.file == fileInfoRefs {
		query = "service=" + req.service // the only parameter git reads, already checked
	}
	env := append(baseEnv(),
		"GATEWAY_INTERFACE=CGI/1.1",
		"REQUEST_METHOD="+method,
		"GIT_PROJECT_ROOT="+repo.Path,
		"PATH_INFO=/"+req.file,
		"QUERY_STRING="+query,
		// Resolve already decided who may read; git's own export check is not wanted.
		"GIT_HTTP_EXPORT_ALL=1",
		"GIT_CONFIG_COUNT=3",
		// Our post-receive hook reports the accepted refs; the repo's own hooks never run.
		"GIT_CONFIG_KEY_0=core.hooksPath",
		"GIT_CONFIG_VALUE_0="+h.hooksDir,
		// receive-pack is enabled only for requests Resolve authorized as writes, so a routing
		// mistake can never turn a read grant into a push.
		"GIT_CONFIG_KEY_1=http.receivepack",
		"GIT_CONFIG_VALUE_1="+strconv.FormatBool(req.write),
		// Partial clones (--filter=blob:none) keep agents fast on repos with big model files.
		"GIT_CONFIG_KEY_2=uploadpack.allowFilter",
		"GIT_CONFIG_VALUE_2=true",
	)
	if ct := r.Header.Get("Content-Type"); ct != "" {
		env = append(env, "CONTENT_TYPE="+ct)
	}
	// A chunked body has no length: git then reads its stdin to the end.
	if r.ContentLength > 0 {
		env = append(env, "CONTENT_LENGTH="+strconv.FormatInt(r.ContentLength, 10))
	}
	if enc := r.Header.Get("Content-Encoding"); enc != "" {
		env = append(env, "HTTP_CONTENT_ENCODING="+enc) // gzip: git inflates it
	}
	// Protocol v2 is asked for with "Git-Protocol: version=2"; git passes it on to upload-pack.
	if proto := r.Header.Get("Git-Protocol"); validGitProtocol(proto) {
		env = append(env, "HTTP_GIT_PROTOCOL="+proto)
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		env = append(env, "REMOTE_ADDR="+host)
	}
	if repo.User != "" && !strings.ContainsFunc(repo.User, isControl) {
		env = append(env, "REMOTE_USER="+repo.User)
	}
	if pushLog != "" {
		env = append(env, pushLogEnv+"="+pushLog)
	}
	return env
}

// validGitProtocol accepts the colon-separated key=value list of the Git-Protocol header and
// nothing that could smuggle more into git's environment.
func validGitProtocol(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for _, c := range s {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && !strings.ContainsRune("=:._-", c) {
			return false
		}
	}
	return true
}

func isControl(c rune) bool { return c < ' ' || c == 0x7f }

// readCGIHeader reads the CGI response header: MIME lines up to a blank line, where
// "Status: 404 Not Found" sets the status (200 when absent) and is not sent on.
func readCGIHeader(r *bufio.Reader) (int, http.Header, error) {
	mime, err := textproto.NewReader(r).ReadMIMEHeader()
	if err != nil {
		return 0, nil, fmt.Errorf("read CGI header: %w", err)
	}
	header := http.Header(mime)
	status := http.StatusOK
	if s := header.Get("Status"); s != "" {
		code, _, _ := strings.Cut(s, " ")
		if status, err = strconv.Atoi(code); err != nil || status < 100 || status > 599 {
			return 0, nil, fmt.Errorf("read CGI header: bad status %q", s)
		}
		header.Del("Status")
	}
	return status, header, nil
}

// copyFlush copies src to w, flushing after every read so that git's progress and keep-alive
// packets reach the client as they are made. It returns only a write (client) error; a read
// error means git stopped, which cmd.Wait reports. A writer that cannot flush (a middleware
// without Unwrap) still gets everything, only later.
func copyFlush(w io.Writer, rc *http.ResponseController, src io.Reader) error {
	buf := make([]byte, 32<<10)
	canFlush := true
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if canFlush {
				if ferr := rc.Flush(); errors.Is(ferr, http.ErrNotSupported) {
					canFlush = false
				} else if ferr != nil {
					return ferr
				}
			}
		}
		if err != nil {
			return nil
		}
	}
}
