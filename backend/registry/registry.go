package registry

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/artifacts/storage"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/repo"
)

// Users is what the registry needs of package auth.
type Users interface {
	// Authenticate resolves a bearer token or HTTP Basic with a token as the password.
	Authenticate(ctx context.Context, r *http.Request) (*auth.Principal, error)
	// AuthenticateBasic also takes an account password (rate-limited); the token endpoint's.
	AuthenticateBasic(ctx context.Context, username, password, ip string) (*auth.Principal, error)
}

// Repos is what the registry needs of package repo.
type Repos interface {
	ResolveRegistry(ctx context.Context, p *auth.Principal, orgName, name string, need repo.Level) (*repo.Access, error)
}

// Config is what New needs. DB, Store, Users, Repos, PublicURL and Key are required.
type Config struct {
	DB    *gorm.DB
	Store storage.Store
	Users Users
	Repos Repos
	// PublicURL is where clients reach the server; the token endpoint is PublicURL/v2/token.
	PublicURL string
	// Key is the server's secret key; registry tokens are signed with a key derived from it.
	Key []byte
	// Presign answers blob downloads with a redirect to a signed URL of the store (S3).
	Presign bool
	// Guard caps what each team stores and links blobs under the garbage collector's lock
	// (package artifacts' Blobs); nil: no quotas, and no collector to fear.
	Guard Guard
	// TokenTTL is the lifetime of a registry token (default 5 minutes, as Docker Hub's).
	TokenTTL time.Duration
	Clock    clock.Clock // clock.Real when nil
	Log      *slog.Logger
}

// Handler serves /v2/. Create it with New; it is safe for concurrent use.
type Handler struct {
	meta     meta
	store    storage.Store
	users    Users
	repos    Repos
	key      []byte
	realm    string
	service  string
	presign  bool
	guard    Guard
	tokenTTL time.Duration
	clock    clock.Clock
	log      *slog.Logger
}

// New returns the registry handler. Mount it where URLs are /v2/… (the server sends every
// path under /v2 to it, outside the JSON API and its middleware).
func New(cfg Config) (*Handler, error) {
	if cfg.DB == nil || cfg.Store == nil || cfg.Users == nil || cfg.Repos == nil || len(cfg.Key) == 0 {
		return nil, errors.New("registry: Config needs DB, Store, Users, Repos and Key")
	}
	u, err := url.Parse(cfg.PublicURL)
	if err != nil || u.Host == "" {
		return nil, errors.New("registry: Config.PublicURL must be an absolute URL")
	}
	h := &Handler{
		store: cfg.Store, users: cfg.Users, repos: cfg.Repos, key: tokenKey(cfg.Key),
		realm: strings.TrimRight(cfg.PublicURL, "/") + "/v2/token", service: u.Host,
		presign: cfg.Presign, guard: cfg.Guard, tokenTTL: cfg.TokenTTL, clock: cfg.Clock, log: cfg.Log,
	}
	if h.clock == nil {
		h.clock = clock.Real{}
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.tokenTTL <= 0 {
		h.tokenTTL = 5 * time.Minute
	}
	h.meta = meta{db: cfg.DB, clock: h.clock}
	return h, nil
}

// ServeHTTP routes a /v2 request, authenticates and authorizes it, and serves it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	switch r.URL.Path {
	case "/v2", "/v2/":
		h.ping(w, r)
		return
	case "/v2/token":
		h.serveToken(w, r)
		return
	}
	rt, ok := parseRoute(r)
	if !ok {
		h.fail(w, r, ociError(http.StatusNotFound, CodeNameUnknown, "no registry endpoint at %s", truncate(r.URL.Path, 200)))
		return
	}
	ep, ok := h.endpoint(rt.endpoint, r.Method)
	if !ok {
		w.Header().Set("Allow", h.allowed(rt.endpoint))
		h.fail(w, r, ociError(http.StatusMethodNotAllowed, CodeUnsupported, "%s is not supported here", r.Method))
		return
	}
	c, err := h.authenticate(r, scopeFor(rt.name, ep.action))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	a, err := h.authorize(r, c, rt, ep.action)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	req := &request{route: rt, caller: c, access: a}
	if err := ep.serve(w, r, req); err != nil {
		h.fail(w, r, err)
	}
}

// request is an authorized registry request.
type request struct {
	route
	caller caller
	access *repo.Access
}

// endpointMethod is what one method of one endpoint does and needs.
type endpointMethod struct {
	action string
	serve  func(http.ResponseWriter, *http.Request, *request) error
}

func (h *Handler) endpoint(ep, method string) (endpointMethod, bool) {
	pull := func(f func(http.ResponseWriter, *http.Request, *request) error) (endpointMethod, bool) {
		return endpointMethod{action: actionPull, serve: f}, true
	}
	push := func(f func(http.ResponseWriter, *http.Request, *request) error) (endpointMethod, bool) {
		return endpointMethod{action: actionPush, serve: f}, true
	}
	del := func(f func(http.ResponseWriter, *http.Request, *request) error) (endpointMethod, bool) {
		return endpointMethod{action: actionDelete, serve: f}, true
	}
	get := method == http.MethodGet || method == http.MethodHead
	switch {
	case ep == epTags && get:
		return pull(h.listTags)
	case ep == epReferrers && get:
		return pull(h.listReferrers)
	case ep == epManifest && get:
		return pull(h.getManifest)
	case ep == epManifest && method == http.MethodPut:
		return push(h.putManifest)
	case ep == epManifest && method == http.MethodDelete:
		return del(h.deleteManifest)
	case ep == epBlob && get:
		return pull(h.getBlob)
	case ep == epBlob && method == http.MethodDelete:
		return del(h.deleteBlob)
	case ep == epUploads && method == http.MethodPost:
		return push(h.startUpload)
	case ep == epUpload && method == http.MethodGet:
		return push(h.uploadStatus)
	case ep == epUpload && method == http.MethodPatch:
		return push(h.patchUpload)
	case ep == epUpload && method == http.MethodPut:
		return push(h.finishUpload)
	case ep == epUpload && method == http.MethodDelete:
		return push(h.cancelUpload)
	}
	return endpointMethod{}, false
}

// allowed is the Allow header of an endpoint: the methods it serves.
func (h *Handler) allowed(ep string) string {
	var methods []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if _, ok := h.endpoint(ep, m); ok {
			methods = append(methods, m)
		}
	}
	return strings.Join(methods, ", ")
}

// Route is one method and path the registry serves, the path as the distribution spec writes
// it ({name} may span several segments).
type Route struct {
	Method, Path string
}

// Routes lists every method and path the registry serves (from the same table ServeHTTP
// dispatches on), for the tests that send bad input to every route of the server.
func (h *Handler) Routes() []Route {
	out := []Route{{http.MethodGet, "/v2/"}, {http.MethodHead, "/v2/"}, {http.MethodGet, "/v2/token"}}
	paths := map[string]string{
		epTags: "/tags/list", epManifest: "/manifests/{reference}", epBlob: "/blobs/{digest}",
		epUploads: "/blobs/uploads/", epUpload: "/blobs/uploads/{session}", epReferrers: "/referrers/{digest}",
	}
	for _, ep := range []string{epTags, epManifest, epBlob, epUploads, epUpload, epReferrers} {
		for _, m := range strings.Split(h.allowed(ep), ", ") {
			out = append(out, Route{Method: m, Path: "/v2/{name}" + paths[ep]})
		}
	}
	return out
}

// ping is GET /v2/: 200 for any valid credentials, 401 with the challenge that tells clients
// where to log in otherwise (docker login starts here; anonymous clients then ask the token
// endpoint for a token without credentials).
func (h *Handler) ping(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		h.fail(w, r, ociError(http.StatusMethodNotAllowed, CodeUnsupported, "%s is not supported here", r.Method))
		return
	}
	c, err := h.authenticate(r, "")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if !c.p.Authenticated() && c.bearer == nil {
		h.fail(w, r, unauthorized("", "authentication required"))
		return
	}
	writeJSON(w, r, http.StatusOK, struct{}{})
}
