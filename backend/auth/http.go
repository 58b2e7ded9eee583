package auth

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/fault"
)

// Handler serves /api/v1/auth/* and /api/v1/user/*.
type Handler struct {
	svc    *Service
	log    *slog.Logger
	secure bool // Secure cookies when the public URL is https
}

// NewHandler returns the auth HTTP handler.
func NewHandler(svc *Service, log *slog.Logger) *Handler {
	return &Handler{svc: svc, log: log, secure: strings.HasPrefix(svc.cfg.PublicURL, "https://")}
}

// Middleware authenticates every request and enforces CSRF on cookie-authenticated writes. It
// is the one authentication middleware of the server. It stays a gin.HandlerFunc because the
// server installs it ahead of every route, outside any Routes.
func (h *Handler) Middleware(c *gin.Context) { api.Handle(h.log, h.authenticate)(c) }

// authenticate is Middleware's body: it runs the rest of the chain once the caller is known.
func (h *Handler) authenticate(c *gin.Context) error {
	p, err := h.svc.Authenticate(c.Request.Context(), c.Request)
	if err != nil {
		return err
	}
	if err := checkCSRF(c.Request, p); err != nil && !csrfExempt(c.Request.URL.Path) {
		return err
	}
	set(c, p)
	c.Next()
	return nil
}

// Endpoints that create a session or act without one need no CSRF token: there is no session
// to protect yet, and SameSite=Lax cookies already stop cross-site form posts.
func csrfExempt(path string) bool {
	switch path {
	case "/api/v1/auth/login", "/api/v1/auth/signup", "/api/v1/auth/password-reset", "/api/v1/auth/password-reset/confirm":
		return true
	}
	return false
}

// Routes implements server.Module.
func (h *Handler) Routes(_ *gin.Engine, v1 *gin.RouterGroup) {
	rs := api.NewRoutes(v1, h.log)
	rs.POST("/auth/signup", h.signup)
	rs.POST("/auth/login", h.login)
	rs.POST("/auth/logout", h.logout)
	rs.POST("/auth/password-reset", h.requestReset)
	rs.POST("/auth/password-reset/confirm", h.confirmReset)
	rs.GET("/user", h.user)
	rs.PUT("/user/password", h.changePassword)
	rs.GET("/user/tokens", h.listTokens)
	rs.POST("/user/tokens", h.createToken)
	rs.DELETE("/user/tokens/:id", h.revokeToken)
	rs.GET("/user/sessions", h.listSessions)
	rs.DELETE("/user/sessions/:id", h.revokeSession)
}

// UserJSON is a user as the API shows it to the user themself.
type UserJSON struct {
	ID        int64     `json:"id"`
	Username  string    `json:"username"`
	Email     string    `json:"email"`
	IsAdmin   bool      `json:"is_admin"`
	CreatedAt time.Time `json:"created_at"`
	CSRFToken string    `json:"csrf_token,omitempty"`
}

func userJSON(u *User, csrf string) UserJSON {
	return UserJSON{ID: u.ID, Username: u.Username, Email: u.Email, IsAdmin: u.IsAdmin, CreatedAt: u.CreatedAt, CSRFToken: csrf}
}

// RequireUser returns the calling user's principal, or a 401 error. A job token carries the
// user its build runs as, but it stands for one pipeline of one repo: the user's account, teams
// and invitations are none of its business (403), as org.Service.Access already holds for orgs.
func RequireUser(c *gin.Context) (*Principal, error) {
	p := From(c)
	if p.User == nil {
		return nil, fault.Unauthenticated("sign in or send a token")
	}
	if p.Kind != KindSession && p.Kind != KindToken {
		return nil, fault.Forbidden("a %s token acts only on its own repository; use a personal access token", p.Kind)
	}
	return p, nil
}

// RequireUserWith is RequireUser for a route that also needs a token scope (a session has them
// all).
func RequireUserWith(c *gin.Context, scope string) (*Principal, error) {
	p, err := RequireUser(c)
	if err != nil {
		return nil, err
	}
	return p, p.Need(scope)
}

// requireSession guards account management: a stolen token must not mint more tokens or change
// the password.
func (h *Handler) requireSession(c *gin.Context) (*Principal, error) {
	p, err := RequireUser(c)
	if err != nil {
		return nil, err
	}
	if p.Kind != KindSession {
		return nil, fault.Forbidden("this needs a browser session (sign in); tokens cannot manage the account")
	}
	return p, nil
}

func (h *Handler) startSession(c *gin.Context, u *User, status int) error {
	raw, sess, err := h.svc.CreateSession(c.Request.Context(), u.ID)
	if err != nil {
		return err
	}
	http.SetCookie(c.Writer, &http.Cookie{Name: CookieName, Value: raw, Path: "/", HttpOnly: true,
		Secure: h.secure, SameSite: http.SameSiteLaxMode, MaxAge: int(h.svc.cfg.SessionTTL.Seconds())})
	return api.JSON(c, status, gin.H{"user": userJSON(u, ""), "csrf_token": sess.CSRFToken})
}

func (h *Handler) signup(c *gin.Context) error {
	var req struct {
		Email    string `json:"email"`
		Username string `json:"username"`
		Password string `json:"password"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	u, err := h.svc.Signup(c.Request.Context(), req.Username, req.Email, req.Password)
	if err != nil {
		return err
	}
	return h.startSession(c, u, http.StatusCreated)
}

func (h *Handler) login(c *gin.Context) error {
	var req struct {
		Login    string `json:"login"`
		Username string `json:"username"`
		Email    string `json:"email"`
		Password string `json:"password"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	login := req.Login
	if login == "" {
		login = req.Username
	}
	if login == "" {
		login = req.Email
	}
	u, err := h.svc.Login(c.Request.Context(), login, req.Password, c.ClientIP())
	if err != nil {
		// The header goes out with the error envelope that Handle writes.
		var ae *fault.Error
		if errors.As(err, &ae) && ae.Code == fault.CodeRateLimited {
			if secs, ok := ae.Details["retry_after_seconds"].(int); ok {
				c.Header("Retry-After", strconv.Itoa(secs))
			}
		}
		return err
	}
	return h.startSession(c, u, http.StatusOK)
}

func (h *Handler) logout(c *gin.Context) error {
	p := From(c)
	if p.Kind == KindSession {
		if err := h.svc.Logout(c.Request.Context(), p.SessionID); err != nil {
			return err
		}
	}
	h.clearCookie(c)
	return api.NoContent(c)
}

// clearCookie tells the browser to drop the session cookie.
func (h *Handler) clearCookie(c *gin.Context) {
	http.SetCookie(c.Writer, &http.Cookie{Name: CookieName, Value: "", Path: "/", HttpOnly: true, Secure: h.secure,
		SameSite: http.SameSiteLaxMode, MaxAge: -1})
}

func (h *Handler) requestReset(c *gin.Context) error {
	var req struct {
		Email string `json:"email"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	if _, err := normalizeEmail(req.Email); err != nil {
		return err
	}
	if err := h.svc.RequestPasswordReset(c.Request.Context(), req.Email); err != nil {
		return err
	}
	return api.JSON(c, http.StatusAccepted, gin.H{"message": "if an account uses that email, a reset link is on its way"})
}

func (h *Handler) confirmReset(c *gin.Context) error {
	var req struct {
		Token    string `json:"token"`
		Password string `json:"password"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	if err := h.svc.ResetPassword(c.Request.Context(), req.Token, req.Password); err != nil {
		return err
	}
	return api.NoContent(c)
}

func (h *Handler) user(c *gin.Context) error {
	p, err := RequireUser(c)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, userJSON(p.User, p.CSRFToken))
}

func (h *Handler) changePassword(c *gin.Context) error {
	p, err := h.requireSession(c)
	if err != nil {
		return err
	}
	var req struct {
		CurrentPassword string `json:"current_password"`
		NewPassword     string `json:"new_password"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	if err := h.svc.ChangePassword(c.Request.Context(), p.User, req.CurrentPassword, req.NewPassword, p.SessionID); err != nil {
		return err
	}
	return api.NoContent(c)
}

// TokenJSON is a personal access token without its secret.
type TokenJSON struct {
	ID         int64      `json:"id"`
	Name       string     `json:"name"`
	Prefix     string     `json:"prefix"`
	Scopes     []string   `json:"scopes"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
	CreatedAt  time.Time  `json:"created_at"`
	Token      string     `json:"token,omitempty"` // only in the response that creates it
}

func tokenJSON(t *AccessToken, secret string) TokenJSON {
	return TokenJSON{ID: t.ID, Name: t.Name, Prefix: t.Prefix, Scopes: splitScopes(t.Scopes), ExpiresAt: t.ExpiresAt,
		LastUsedAt: t.LastUsedAt, RevokedAt: t.RevokedAt, CreatedAt: t.CreatedAt, Token: secret}
}

func (h *Handler) listTokens(c *gin.Context) error {
	p, err := h.requireSession(c)
	if err != nil {
		return err
	}
	return api.ListAll(c, func() ([]TokenJSON, error) {
		ts, err := h.svc.ListTokens(c.Request.Context(), p.User.ID)
		if err != nil {
			return nil, err
		}
		out := make([]TokenJSON, 0, len(ts))
		for i := range ts {
			out = append(out, tokenJSON(&ts[i], ""))
		}
		return out, nil
	}, func(t TokenJSON) int64 { return t.ID })
}

func (h *Handler) createToken(c *gin.Context) error {
	p, err := h.requireSession(c)
	if err != nil {
		return err
	}
	var req struct {
		Name          string     `json:"name"`
		Scopes        []string   `json:"scopes"`
		ExpiresAt     *time.Time `json:"expires_at"`
		ExpiresInDays *int       `json:"expires_in_days"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	exp := req.ExpiresAt
	if req.ExpiresAt != nil && req.ExpiresInDays != nil {
		return fault.Invalid("expires_in_days", "give expires_at or expires_in_days, not both")
	}
	if req.ExpiresInDays != nil {
		if *req.ExpiresInDays < 1 || *req.ExpiresInDays > 3650 {
			return fault.Invalid("expires_in_days", "expires_in_days must be 1–3650")
		}
		t := h.svc.clock.Now().UTC().Add(time.Duration(*req.ExpiresInDays) * 24 * time.Hour)
		exp = &t
	}
	raw, t, err := h.svc.CreateToken(c.Request.Context(), p.User, req.Name, req.Scopes, exp)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusCreated, tokenJSON(t, raw))
}

func (h *Handler) revokeToken(c *gin.Context) error {
	p, err := h.requireSession(c)
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		return fault.NotFound("token not found")
	}
	if err := h.svc.RevokeToken(c.Request.Context(), p.User.ID, id); err != nil {
		return err
	}
	return api.NoContent(c)
}

// SessionJSON is one of the user's browser sessions, named by its public id (never the cookie).
type SessionJSON struct {
	ID         string    `json:"id"`
	CreatedAt  time.Time `json:"created_at"`
	LastSeenAt time.Time `json:"last_seen_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	Current    bool      `json:"current"`
}

// listSessions lists the caller's unexpired browser sessions, most recently seen first. They
// are few (each ends within the session TTL), so the list is one page.
func (h *Handler) listSessions(c *gin.Context) error {
	p, err := h.requireSession(c)
	if err != nil {
		return err
	}
	ss, err := h.svc.ListSessions(c.Request.Context(), p.User.ID)
	if err != nil {
		return err
	}
	out := make([]SessionJSON, 0, len(ss))
	for _, s := range ss {
		out = append(out, SessionJSON{ID: PublicSessionID(s.ID), CreatedAt: s.CreatedAt, LastSeenAt: s.LastSeenAt,
			ExpiresAt: s.ExpiresAt, Current: s.ID == p.SessionID})
	}
	return api.JSON(c, http.StatusOK, api.List[SessionJSON]{Items: out})
}

// revokeSession signs one of the caller's sessions out. Ending the calling session itself is
// allowed: it is signing out here, and the cookie is cleared as logout does.
func (h *Handler) revokeSession(c *gin.Context) error {
	p, err := h.requireSession(c)
	if err != nil {
		return err
	}
	id := c.Param("id")
	if err := h.svc.RevokeSession(c.Request.Context(), p.User.ID, id); err != nil {
		return err
	}
	if id == PublicSessionID(p.SessionID) {
		h.clearCookie(c)
	}
	return api.NoContent(c)
}

const principalKey = "nimbus.principal"

// From returns the request's principal (anonymous when the middleware did not run).
func From(c *gin.Context) *Principal {
	if v, ok := c.Get(principalKey); ok {
		if p, ok := v.(*Principal); ok {
			return p
		}
	}
	a := anonymous
	return &a
}

// set stores the principal on the request.
func set(c *gin.Context, p *Principal) { c.Set(principalKey, p) }
