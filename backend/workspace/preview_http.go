package workspace

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Preview credentials. The dashboard's origin signs a short-lived, single-use login for one
// workspace (and the user), the preview origin exchanges it for a cookie of its own
// (PreviewCookie, host-only, HttpOnly), and every proxied request carries that cookie or the
// PreviewHeader. Both are valid for one workspace only and are removed before the request
// reaches the application, as is Nimbus's own session cookie (which a browser never sends to
// the preview origin anyway). Each request also checks that the user may still write to the repo (cached for
// accessTTL), so a member removed from the team loses the preview within seconds.
const (
	PreviewCookie = "nimbus_preview"
	PreviewHeader = "X-Nimbus-Preview-Token"
	previewLogin  = "/__nimbus/login"
	loginTTL      = time.Minute
	credentialTTL = 12 * time.Hour
	accessTTL     = 15 * time.Second
)

// claims are what a preview credential says.
type claims struct {
	Kind      string `json:"k"` // "login" (single use) or "preview"
	Workspace int64  `json:"w"`
	User      int64  `json:"u"`
	Expires   int64  `json:"e"` // unix seconds
	Nonce     string `json:"n,omitempty"`
}

func (s *Service) key() []byte {
	m := hmac.New(sha256.New, s.cfg.Secret)
	m.Write([]byte("nimbus workspace preview v1"))
	return m.Sum(nil)
}

func (s *Service) sign(c claims) string {
	b, _ := json.Marshal(c)
	p := base64.RawURLEncoding.EncodeToString(b)
	m := hmac.New(sha256.New, s.key())
	m.Write([]byte(p))
	return p + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

var errBadCredential = errors.New("workspace: invalid preview credential")

func (s *Service) verify(token, kind string, id int64) (claims, error) {
	var c claims
	p, sig, ok := strings.Cut(token, ".")
	if !ok {
		return c, errBadCredential
	}
	m := hmac.New(sha256.New, s.key())
	m.Write([]byte(p))
	want := base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return c, errBadCredential
	}
	b, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil || json.Unmarshal(b, &c) != nil {
		return c, errBadCredential
	}
	if c.Kind != kind || c.Workspace != id || s.cfg.Clock.Now().Unix() > c.Expires {
		return c, errBadCredential
	}
	return c, nil
}

// PreviewLogin authorizes the caller for the workspace and returns the URL that logs the
// browser in to the port's preview origin (the dashboard redirects there).
func (s *Service) PreviewLogin(ctx context.Context, p *auth.Principal, id int64, port int, next string) (string, error) {
	r, err := s.load(ctx, p, id)
	if err != nil {
		return "", err
	}
	var n [12]byte
	rand.Read(n[:])
	t := s.sign(claims{Kind: "login", Workspace: r.ID, User: p.UserID(), Nonce: hex.EncodeToString(n[:]),
		Expires: s.cfg.Clock.Now().Add(loginTTL).Unix()})
	next = samePage(next)
	return strings.TrimSuffix(s.cfg.Links.Preview(r.ID, port), "/") + previewLogin + "?t=" + t + "&next=" + urlQuery(next), nil
}

// PreviewToken is a credential for programs (PreviewHeader), and the port's URL.
func (s *Service) PreviewToken(ctx context.Context, p *auth.Principal, id int64, port int) (token, u string, expires time.Time, err error) {
	r, err := s.load(ctx, p, id)
	if err != nil {
		return "", "", time.Time{}, err
	}
	expires = s.cfg.Clock.Now().Add(credentialTTL).UTC().Truncate(time.Second)
	token = s.sign(claims{Kind: "preview", Workspace: r.ID, User: p.UserID(), Expires: expires.Unix()})
	return token, s.cfg.Links.Preview(r.ID, port), expires, nil
}

type accessKey struct{ user, workspace int64 }

// mayPreview re-checks that the credential's user may still write to the workspace's repo,
// and returns the workspace.
func (s *Service) mayPreview(ctx context.Context, c claims) (*record, error) {
	now := s.cfg.Clock.Now()
	k := accessKey{c.User, c.Workspace}
	s.mu.Lock()
	a, ok := s.access[k]
	s.mu.Unlock()
	if ok && now.Before(a.until) {
		// Checked within accessTTL: no query on this hot path (an IDE loads hundreds of
		// assets). A workspace that ended meanwhile is refused by its agent at the dial.
		return a.rec, nil
	}
	u, err := s.cfg.Users(ctx, c.User)
	if err != nil {
		return nil, errNotFound()
	}
	r, err := s.load(ctx, &auth.Principal{Kind: auth.KindSession, User: u}, c.Workspace)
	if err != nil {
		return nil, err
	}
	if r.ready() { // one still starting is looked at again: it may be ready next time
		s.mu.Lock()
		if len(s.access) > 10000 {
			clear(s.access)
		}
		s.access[k] = checked{until: now.Add(accessTTL), rec: r}
		s.mu.Unlock()
	}
	return r, nil
}

// checked is a preview access check: until when it holds, and the workspace it found.
type checked struct {
	until time.Time
	rec   *record
}

// spend marks a login's nonce used; false when it was already.
func (s *Service) spend(c claims) bool {
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, until := range s.used {
		if now.After(until) {
			delete(s.used, n)
		}
	}
	if _, ok := s.used[c.Nonce]; ok {
		return false
	}
	s.used[c.Nonce] = time.Unix(c.Expires, 0).Add(time.Minute)
	return true
}

// Preview is the handler of preview origins; MatchHost says which requests are its.
type Preview struct {
	s     *Service
	proxy *httputil.ReverseProxy
}

// NewPreview returns the preview handler of s.
func NewPreview(s *Service) *Preview {
	pv := &Preview{s: s}
	tr := &http.Transport{
		DialContext:         pv.dial,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second, // an idle pooled stream counts as a connection
		DisableCompression:  true,
		ReadBufferSize:      256 << 10,
		WriteBufferSize:     64 << 10,
		ForceAttemptHTTP2:   false,
	}
	pv.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			id, port, _ := s.cfg.Links.ParseHost(pr.In.Host)
			pr.Out.URL.Scheme = "http"
			// The dial target: the transport's DialContext reads the workspace and port
			// back from it (one pool of connections per workspace port).
			pr.Out.URL.Host = fmt.Sprintf("%d.%d.workspace.invalid:80", id, port)
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
			stripCredentials(pr.Out)
		},
		Transport: tr,
		// No periodic flush: a response of unknown length (an event stream) and WebSockets
		// are flushed as they come anyway; a download goes in big writes.
		BufferPool:   &bufferPool{},
		ErrorHandler: pv.failed,
	}
	return pv
}

// bufferPool lends the proxy 256 KiB copy buffers (its default is 32 KiB): fewer, larger
// writes through the tunnel for downloads.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 256<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }

// MatchHost says whether host is a preview origin.
func (pv *Preview) MatchHost(host string) bool {
	_, _, ok := pv.s.cfg.Links.ParseHost(host)
	return ok
}

type ctxKey struct{}

// ServeHTTP serves a preview origin: its login, or the workspace's port.
func (pv *Preview) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := pv.s
	id, _, ok := s.cfg.Links.ParseHost(r.Host)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.URL.Path == previewLogin {
		c, err := s.verify(r.URL.Query().Get("t"), "login", id)
		if err != nil || !s.spend(c) {
			previewError(w, http.StatusForbidden, "This preview link has expired or was used already. Open the preview again from the dashboard.")
			return
		}
		if _, err := s.mayPreview(r.Context(), c); err != nil {
			previewError(w, http.StatusNotFound, "Workspace not found.")
			return
		}
		exp := s.cfg.Clock.Now().Add(credentialTTL)
		http.SetCookie(w, &http.Cookie{Name: PreviewCookie, Value: s.sign(claims{Kind: "preview", Workspace: id, User: c.User, Expires: exp.Unix()}),
			Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil, Expires: exp})
		http.Redirect(w, r, samePage(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	token := r.Header.Get(PreviewHeader)
	if token == "" {
		if ck, err := r.Cookie(PreviewCookie); err == nil {
			token = ck.Value
		}
	}
	c, err := s.verify(token, "preview", id)
	if err != nil {
		previewError(w, http.StatusNotFound, "Workspace not found, or this browser is not logged in to its preview: open it from the Nimbus dashboard.")
		return
	}
	rec, err := s.mayPreview(r.Context(), c)
	if err != nil {
		previewError(w, http.StatusNotFound, "Workspace not found.")
		return
	}
	if !rec.ready() {
		previewError(w, http.StatusServiceUnavailable, fmt.Sprintf("Workspace %d is not running (%s).", id, rec.Status))
		return
	}
	ctx := context.WithValue(r.Context(), ctxKey{}, rec)
	pv.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// dial opens a stream to the workspace port named by addr (see Rewrite).
func (pv *Preview) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	host, _, _ := net.SplitHostPort(addr)
	parts := strings.Split(host, ".")
	if len(parts) < 2 {
		return nil, fmt.Errorf("workspace: bad preview target %q", addr)
	}
	id, err1 := strconv.ParseInt(parts[0], 10, 64)
	port, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("workspace: bad preview target %q", addr)
	}
	rec, _ := ctx.Value(ctxKey{}).(*record)
	if rec == nil || rec.ID != id {
		run, err := pv.s.cfg.Builds.Workspace(ctx, id)
		if err != nil {
			return nil, err
		}
		rec = &record{*run}
	}
	return pv.s.open(ctx, rec, protocol.KindWorkspacePort, map[string]string{"port": strconv.Itoa(port)})
}

func (pv *Preview) failed(w http.ResponseWriter, r *http.Request, err error) {
	var pc *PortClosedError
	_, port, _ := pv.s.cfg.Links.ParseHost(r.Host)
	switch {
	case errors.As(err, &pc):
		previewError(w, http.StatusBadGateway, fmt.Sprintf("Nothing listens on port %d in this workspace (yet): %s", port, pc.Message))
	case errors.Is(err, context.Canceled):
	default:
		previewError(w, http.StatusBadGateway, "The workspace could not be reached: "+err.Error())
	}
}

// stripCredentials removes what is Nimbus's from a request on its way to the application.
func stripCredentials(r *http.Request) {
	r.Header.Del(PreviewHeader)
	cookies := r.Cookies()
	r.Header.Del("Cookie")
	for _, c := range cookies {
		if c.Name != PreviewCookie && c.Name != auth.CookieName {
			r.AddCookie(c)
		}
	}
}

func previewError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!doctype html><title>Nimbus preview</title><p>%s</p>\n", html.EscapeString(msg))
}

func urlQuery(s string) string { return url.QueryEscape(s) }

// samePage returns next when it is a path on the preview's own origin, else "/", so the login
// hop can never send a browser elsewhere. Browsers read "//host" as another origin, count a
// backslash as a slash ("/\host" is "//host") and drop tabs and newlines ("/\t/host"), so a
// path holding any of those, or any other control character, does not pass.
func samePage(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") ||
		strings.ContainsFunc(next, func(r rune) bool { return r == '\\' || r < 0x20 || r == 0x7f }) {
		return "/"
	}
	return next
}
