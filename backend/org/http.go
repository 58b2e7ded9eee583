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
	rs := api.NewRoutes(v1, h.log)
	rs.POST("/orgs", h.create)
	rs.GET("/orgs/:org", h.get)
	rs.PATCH("/orgs/:org", h.rename)
	rs.DELETE("/orgs/:org", h.delete)
	rs.GET("/orgs/:org/members", h.members)
	rs.PUT("/orgs/:org/members/:username", h.setRole)
	rs.DELETE("/orgs/:org/members/:username", h.removeMember)
	rs.GET("/orgs/:org/invitations", h.invitations)
	rs.POST("/orgs/:org/invitations", h.invite)
	rs.DELETE("/orgs/:org/invitations/:id", h.cancelInvitation)
	rs.GET("/user/orgs", h.myOrgs)
	rs.GET("/user/invitations", h.myInvitations)
	rs.POST("/user/invitations/:id/accept", h.respond(true))
	rs.POST("/user/invitations/:id/decline", h.respond(false))
	rs.POST("/invitations/accept", h.acceptToken)
	rs.POST("/invitations/preview", h.previewToken)
}

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
			return nil, "", NotFound(c.Param("org"))
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

func (h *Handler) create(c *gin.Context) error {
	p, err := auth.RequireUser(c)
	if err != nil {
		return err
	}
	if !p.Has(auth.ScopeOrgWrite) {
		return api.Forbidden("the token lacks the %s scope", auth.ScopeOrgWrite)
	}
	var req struct {
		Name string `json:"name"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	o, err := h.svc.Create(c.Request.Context(), p.User, req.Name)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusCreated, orgJSON(o, Owner))
}

func (h *Handler) get(c *gin.Context) error {
	o, role, err := Load(c, h.svc, NeedMember, false)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, orgJSON(o, role))
}

func (h *Handler) rename(c *gin.Context) error {
	o, role, err := Load(c, h.svc, NeedAdmin, true)
	if err != nil {
		return err
	}
	var req struct {
		Name string `json:"name"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	if err := h.svc.Rename(c.Request.Context(), o, req.Name); err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, orgJSON(o, role))
}

func (h *Handler) delete(c *gin.Context) error {
	o, _, err := Load(c, h.svc, NeedOwner, true)
	if err != nil {
		return err
	}
	if err := h.svc.Delete(c.Request.Context(), o); err != nil {
		return err
	}
	return api.NoContent(c)
}

func (h *Handler) members(c *gin.Context) error {
	o, _, err := Load(c, h.svc, NeedMember, false)
	if err != nil {
		return err
	}
	return api.ListAll(c, func() ([]MemberInfo, error) {
		return h.svc.Members(c.Request.Context(), o.ID)
	}, func(m MemberInfo) int64 { return m.UserID })
}

func (h *Handler) setRole(c *gin.Context) error {
	o, role, err := Load(c, h.svc, NeedAdmin, true)
	if err != nil {
		return err
	}
	var req struct {
		Role Role `json:"role"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	if err := h.svc.SetRole(c.Request.Context(), o, role, c.Param("username"), req.Role); err != nil {
		return err
	}
	return api.NoContent(c)
}

func (h *Handler) removeMember(c *gin.Context) error {
	o, role, err := Load(c, h.svc, NeedMember, true)
	if err != nil {
		return err
	}
	p := auth.From(c)
	if err := h.svc.RemoveMember(c.Request.Context(), o, p.User, role, c.Param("username")); err != nil {
		return err
	}
	return api.NoContent(c)
}

func (h *Handler) invitations(c *gin.Context) error {
	o, _, err := Load(c, h.svc, NeedAdmin, false)
	if err != nil {
		return err
	}
	return api.ListAll(c, func() ([]InvitationInfo, error) {
		return h.svc.ListInvitations(c.Request.Context(), o.ID)
	}, invitationKey)
}

func invitationKey(i InvitationInfo) int64 { return i.ID }

func (h *Handler) invite(c *gin.Context) error {
	o, role, err := Load(c, h.svc, NeedAdmin, true)
	if err != nil {
		return err
	}
	var req struct {
		Username string `json:"username"`
		Email    string `json:"email"`
		Role     Role   `json:"role"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	inv, err := h.svc.Invite(c.Request.Context(), o, auth.From(c).User, role, req.Username, req.Email, req.Role)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusCreated, inv)
}

func (h *Handler) cancelInvitation(c *gin.Context) error {
	o, _, err := Load(c, h.svc, NeedAdmin, true)
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		return api.NotFound("invitation not found")
	}
	if err := h.svc.CancelInvitation(c.Request.Context(), o.ID, id); err != nil {
		return err
	}
	return api.NoContent(c)
}

func (h *Handler) myOrgs(c *gin.Context) error {
	p, err := auth.RequireUser(c)
	if err != nil {
		return err
	}
	if !p.Has(auth.ScopeRepoRead) {
		return api.Forbidden("the token lacks the %s scope", auth.ScopeRepoRead)
	}
	return api.ListAll(c, func() ([]OrgJSON, error) {
		ms, err := h.svc.ListForUser(c.Request.Context(), p.User.ID)
		if err != nil {
			return nil, err
		}
		out := make([]OrgJSON, 0, len(ms))
		for i := range ms {
			out = append(out, orgJSON(&ms[i].Org, ms[i].Role))
		}
		return out, nil
	}, func(o OrgJSON) int64 { return o.ID })
}

func (h *Handler) myInvitations(c *gin.Context) error {
	p, err := auth.RequireUser(c)
	if err != nil {
		return err
	}
	if !p.Has(auth.ScopeRepoRead) {
		return api.Forbidden("the token lacks the %s scope", auth.ScopeRepoRead)
	}
	return api.ListAll(c, func() ([]InvitationInfo, error) {
		return h.svc.MyInvitations(c.Request.Context(), p.User)
	}, invitationKey)
}

func (h *Handler) respond(accept bool) api.HandlerFunc {
	return func(c *gin.Context) error {
		p, err := auth.RequireUser(c)
		if err != nil {
			return err
		}
		if !p.Has(auth.ScopeOrgWrite) {
			return api.Forbidden("the token lacks the %s scope", auth.ScopeOrgWrite)
		}
		id, err := strconv.ParseInt(c.Param("id"), 10, 64)
		if err != nil {
			return api.NotFound("invitation not found")
		}
		if err := h.svc.RespondInvitation(c.Request.Context(), p.User, id, accept); err != nil {
			return err
		}
		return api.NoContent(c)
	}
}

// acceptToken claims an email invitation with the secret from its email.
// previewToken names what an emailed invitation's link offers (team, role, who invited, until
// when) to whoever signed in holds the link. POST, so the secret stays out of URLs and logs.
func (h *Handler) previewToken(c *gin.Context) error {
	if _, err := auth.RequireUser(c); err != nil {
		return err
	}
	var req struct {
		Token string `json:"token"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	inv, err := h.svc.InvitationByToken(c.Request.Context(), req.Token)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, inv)
}

func (h *Handler) acceptToken(c *gin.Context) error {
	p, err := auth.RequireUser(c)
	if err != nil {
		return err
	}
	if !p.Has(auth.ScopeOrgWrite) {
		return api.Forbidden("the token lacks the %s scope", auth.ScopeOrgWrite)
	}
	var req struct {
		Token string `json:"token"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	if err := h.svc.AcceptInvitationToken(c.Request.Context(), p.User, req.Token); err != nil {
		return err
	}
	return api.NoContent(c)
}
