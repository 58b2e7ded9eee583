package org

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/auth"
)

// Handler serves the org routes.
type Handler struct {
	svc *Service
	log *slog.Logger
}

// NewHandler returns the org HTTP handler.
func NewHandler(svc *Service, log *slog.Logger) *Handler { return &Handler{svc: svc, log: log} }

// Routes implements server.Module.
func (h *Handler) Routes(_ *gin.Engine, v1 *gin.RouterGroup) {
	v1.POST("/orgs", h.create)
	v1.GET("/orgs/:org", h.get)
	v1.PATCH("/orgs/:org", h.rename)
	v1.DELETE("/orgs/:org", h.delete)
	v1.GET("/orgs/:org/members", h.members)
	v1.PUT("/orgs/:org/members/:username", h.setRole)
	v1.DELETE("/orgs/:org/members/:username", h.removeMember)
	v1.GET("/orgs/:org/invitations", h.invitations)
	v1.POST("/orgs/:org/invitations", h.invite)
	v1.DELETE("/orgs/:org/invitations/:id", h.cancelInvitation)
	v1.GET("/user/orgs", h.myOrgs)
	v1.GET("/user/invitations", h.myInvitations)
	v1.POST("/user/invitations/:id/accept", h.respond(true))
	v1.POST("/user/invitations/:id/decline", h.respond(false))
	v1.POST("/invitations/accept", h.acceptToken)
}

func (h *Handler) fail(c *gin.Context, err error) { api.Fail(c, h.log, err) }

// OrgJSON is an org as the API shows it to a member.
type OrgJSON struct {
	ID        int64     `json:"id"`
	Name      string    `json:"name"`
	Role      Role      `json:"role,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

func orgJSON(o *Org, r Role) OrgJSON {
	return OrgJSON{ID: o.ID, Name: o.Name, Role: r, CreatedAt: o.CreatedAt}
}

// Need says what role an org route requires of the caller.
type Need int

// Needs, weakest first.
const (
	NeedMember Need = iota // any role
	NeedAdmin              // admin or owner
	NeedOwner              // owner
)

// Load authorizes the caller against the :org of the route and returns the org and their role.
// write says whether the route changes the org (token scope org:write) or only reads it
// (repo:read). Anonymous callers get 401, non-members 404, members lacking the role or the token
// scope 403.
func Load(c *gin.Context, svc *Service, need Need, write bool) (*Org, Role, error) {
	p := auth.From(c)
	if p.User == nil {
		if p.Authenticated() {
			return nil, "", api.NotFound("org %q not found", c.Param("org"))
		}
		return nil, "", api.Unauthenticated("sign in or send a token")
	}
	o, role, err := svc.Access(c.Request.Context(), p, c.Param("org"))
	if err != nil {
		return nil, "", err
	}
	scope := auth.ScopeRepoRead
	if write {
		scope = auth.ScopeOrgWrite
	}
	if !p.Has(scope) {
		return nil, "", api.Forbidden("the token lacks the %s scope", scope)
	}
	switch {
	case need == NeedAdmin && !role.CanAdmin():
		return nil, "", api.Forbidden("this needs the admin or owner role in %s (you are %s)", o.Name, role)
	case need == NeedOwner && role != Owner:
		return nil, "", api.Forbidden("this needs the owner role in %s (you are %s)", o.Name, role)
	}
	return o, role, nil
}

func (h *Handler) create(c *gin.Context) {
	p, ok := auth.RequireUser(c, h.log)
	if !ok {
		return
	}
	if !p.Has(auth.ScopeOrgWrite) {
		h.fail(c, api.Forbidden("the token lacks the %s scope", auth.ScopeOrgWrite))
		return
	}
	var req struct {
		Name string `json:"name"`
	}
	if err := api.Bind(c, &req); err != nil {
		h.fail(c, err)
		return
	}
	o, err := h.svc.Create(c.Request.Context(), p.User, req.Name)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, orgJSON(o, Owner))
}

func (h *Handler) get(c *gin.Context) {
	o, role, err := Load(c, h.svc, NeedMember, false)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, orgJSON(o, role))
}

func (h *Handler) rename(c *gin.Context) {
	o, role, err := Load(c, h.svc, NeedAdmin, true)
	if err != nil {
		h.fail(c, err)
		return
	}
	var req struct {
		Name string `json:"name"`
	}
	if err := api.Bind(c, &req); err != nil {
		h.fail(c, err)
		return
	}
	if err := h.svc.Rename(c.Request.Context(), o, req.Name); err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, orgJSON(o, role))
}

func (h *Handler) delete(c *gin.Context) {
	o, _, err := Load(c, h.svc, NeedOwner, true)
	if err != nil {
		h.fail(c, err)
		return
	}
	if err := h.svc.Delete(c.Request.Context(), o); err != nil {
		h.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (h *Handler) members(c *gin.Context) {
	o, _, err := Load(c, h.svc, NeedMember, false)
	if err != nil {
		h.fail(c, err)
		return
	}
	page, err := api.ParsePage(c)
	if err != nil {
		h.fail(c, err)
		return
	}
	ms, err := h.svc.Members(c.Request.Context(), o.ID)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, api.Paginate(page, ms, func(m MemberInfo) int64 { return m.UserID }))
}

func (h *Handler) setRole(c *gin.Context) {
	o, role, err := Load(c, h.svc, NeedAdmin, true)
	if err != nil {
		h.fail(c, err)
		return
	}
	var req struct {
		Role Role `json:"role"`
	}
	if err := api.Bind(c, &req); err != nil {
		h.fail(c, err)
		return
	}
	if err := h.svc.SetRole(c.Request.Context(), o, role, c.Param("username"), req.Role); err != nil {
		h.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (h *Handler) removeMember(c *gin.Context) {
	o, role, err := Load(c, h.svc, NeedMember, true)
	if err != nil {
		h.fail(c, err)
		return
	}
	p := auth.From(c)
	if err := h.svc.RemoveMember(c.Request.Context(), o, p.User, role, c.Param("username")); err != nil {
		h.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (h *Handler) invitations(c *gin.Context) {
	o, _, err := Load(c, h.svc, NeedAdmin, false)
	if err != nil {
		h.fail(c, err)
		return
	}
	page, err := api.ParsePage(c)
	if err != nil {
		h.fail(c, err)
		return
	}
	out, err := h.svc.ListInvitations(c.Request.Context(), o.ID)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, api.Paginate(page, out, invitationKey))
}

func invitationKey(i InvitationInfo) int64 { return i.ID }

func (h *Handler) invite(c *gin.Context) {
	o, role, err := Load(c, h.svc, NeedAdmin, true)
	if err != nil {
		h.fail(c, err)
		return
	}
	var req struct {
		Username string `json:"username"`
		Email    string `json:"email"`
		Role     Role   `json:"role"`
	}
	if err := api.Bind(c, &req); err != nil {
		h.fail(c, err)
		return
	}
	inv, err := h.svc.Invite(c.Request.Context(), o, auth.From(c).User, role, req.Username, req.Email, req.Role)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, inv)
}

func (h *Handler) cancelInvitation(c *gin.Context) {
	o, _, err := Load(c, h.svc, NeedAdmin, true)
	if err != nil {
		h.fail(c, err)
		return
	}
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		h.fail(c, api.NotFound("invitation not found"))
		return
	}
	if err := h.svc.CancelInvitation(c.Request.Context(), o.ID, id); err != nil {
		h.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (h *Handler) myOrgs(c *gin.Context) {
	p, ok := auth.RequireUser(c, h.log)
	if !ok {
		return
	}
	if !p.Has(auth.ScopeRepoRead) {
		h.fail(c, api.Forbidden("the token lacks the %s scope", auth.ScopeRepoRead))
		return
	}
	page, err := api.ParsePage(c)
	if err != nil {
		h.fail(c, err)
		return
	}
	ms, err := h.svc.ListForUser(c.Request.Context(), p.User.ID)
	if err != nil {
		h.fail(c, err)
		return
	}
	out := make([]OrgJSON, 0, len(ms))
	for i := range ms {
		out = append(out, orgJSON(&ms[i].Org, ms[i].Role))
	}
	c.JSON(http.StatusOK, api.Paginate(page, out, func(o OrgJSON) int64 { return o.ID }))
}

func (h *Handler) myInvitations(c *gin.Context) {
	p, ok := auth.RequireUser(c, h.log)
	if !ok {
		return
	}
	if !p.Has(auth.ScopeRepoRead) {
		h.fail(c, api.Forbidden("the token lacks the %s scope", auth.ScopeRepoRead))
		return
	}
	page, err := api.ParsePage(c)
	if err != nil {
		h.fail(c, err)
		return
	}
	out, err := h.svc.MyInvitations(c.Request.Context(), p.User)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, api.Paginate(page, out, invitationKey))
}

func (h *Handler) respond(accept bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		p, ok := auth.RequireUser(c, h.log)
		if !ok {
			return
		}
		if !p.Has(auth.ScopeOrgWrite) {
			h.fail(c, api.Forbidden("the token lacks the %s scope", auth.ScopeOrgWrite))
			return
		}
		id, err := strconv.ParseInt(c.Param("id"), 10, 64)
		if err != nil {
			h.fail(c, api.NotFound("invitation not found"))
			return
		}
		if err := h.svc.RespondInvitation(c.Request.Context(), p.User, id, accept); err != nil {
			h.fail(c, err)
			return
		}
		c.Status(http.StatusNoContent)
	}
}

// acceptToken claims an email invitation with the secret from its email.
func (h *Handler) acceptToken(c *gin.Context) {
	p, ok := auth.RequireUser(c, h.log)
	if !ok {
		return
	}
	if !p.Has(auth.ScopeOrgWrite) {
		h.fail(c, api.Forbidden("the token lacks the %s scope", auth.ScopeOrgWrite))
		return
	}
	var req struct {
		Token string `json:"token"`
	}
	if err := api.Bind(c, &req); err != nil {
		h.fail(c, err)
		return
	}
	if err := h.svc.AcceptInvitationToken(c.Request.Context(), p.User, req.Token); err != nil {
		h.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}
