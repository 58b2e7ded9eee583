package org

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/fault"
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
	// The role each route needs, and whether it changes the org (token scope org:write) or
	// only reads it (repo:read): see Load.
	rs.GET("/orgs/:org", h.on(NeedMember, false, h.get))
	rs.PATCH("/orgs/:org", h.on(NeedAdmin, true, h.rename))
	rs.DELETE("/orgs/:org", h.on(NeedOwner, true, h.delete))
	rs.GET("/orgs/:org/members", h.on(NeedMember, false, h.members))
	rs.PUT("/orgs/:org/members/:username", h.on(NeedAdmin, true, h.setRole))
	rs.DELETE("/orgs/:org/members/:username", h.on(NeedMember, true, h.removeMember)) // leaving needs no role; removing another is checked by the service
	rs.GET("/orgs/:org/invitations", h.on(NeedAdmin, false, h.invitations))
	rs.POST("/orgs/:org/invitations", h.on(NeedAdmin, true, h.invite))
	rs.DELETE("/orgs/:org/invitations/:id", h.on(NeedAdmin, true, h.cancelInvitation))
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
		return nil, "", fault.Unauthenticated("sign in or send a token")
	}
	o, role, err := svc.Access(c.Request.Context(), p, c.Param("org"))
	if err != nil {
		return nil, "", err
	}
	scope := auth.ScopeRepoRead
	if write {
		scope = auth.ScopeOrgWrite
	}
	if err := p.Need(scope); err != nil {
		return nil, "", err
	}
	switch {
	case need == NeedAdmin && !role.CanAdmin():
		return nil, "", fault.Forbidden("this needs the admin or owner role in %s (you are %s)", o.Name, role)
	case need == NeedOwner && role != Owner:
		return nil, "", fault.Forbidden("this needs the owner role in %s (you are %s)", o.Name, role)
	}
	return o, role, nil
}

func (h *Handler) create(c *gin.Context) error {
	p, err := auth.RequireUserWith(c, auth.ScopeOrgWrite)
	if err != nil {
		return err
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

// member is what a route on one org acts with: the org and the caller's role in it (Load).
type member struct {
	org  *Org
	role Role
}

// on is a route on /orgs/:org: the caller is loaded and authorized (Load) before fn runs.
func (h *Handler) on(need Need, write bool, fn func(c *gin.Context, m member) error) api.HandlerFunc {
	return func(c *gin.Context) error {
		o, role, err := Load(c, h.svc, need, write)
		if err != nil {
			return err
		}
		return fn(c, member{org: o, role: role})
	}
}

func (h *Handler) get(c *gin.Context, m member) error {
	return api.JSON(c, http.StatusOK, orgJSON(m.org, m.role))
}

func (h *Handler) rename(c *gin.Context, m member) error {
	var req struct {
		Name string `json:"name"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	if err := h.svc.Rename(c.Request.Context(), m.org, req.Name); err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, orgJSON(m.org, m.role))
}

func (h *Handler) delete(c *gin.Context, m member) error {
	return api.Done(c, h.svc.Delete(c.Request.Context(), m.org))
}

func (h *Handler) members(c *gin.Context, m member) error {
	return api.ListAll(c, func() ([]MemberInfo, error) {
		return h.svc.Members(c.Request.Context(), m.org.ID)
	}, func(m MemberInfo) int64 { return m.UserID })
}

func (h *Handler) setRole(c *gin.Context, m member) error {
	var req struct {
		Role Role `json:"role"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	return api.Done(c, h.svc.SetRole(c.Request.Context(), m.org, m.role, c.Param("username"), req.Role))
}

func (h *Handler) removeMember(c *gin.Context, m member) error {
	return api.Done(c, h.svc.RemoveMember(c.Request.Context(), m.org, auth.From(c).User, m.role, c.Param("username")))
}

func (h *Handler) invitations(c *gin.Context, m member) error {
	return api.ListAll(c, func() ([]InvitationInfo, error) {
		return h.svc.ListInvitations(c.Request.Context(), m.org.ID)
	}, invitationKey)
}

func invitationKey(i InvitationInfo) int64 { return i.ID }

// invitationID is the route's :id; one that is not a number names no invitation.
func invitationID(c *gin.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		return 0, fault.NotFound("invitation not found")
	}
	return id, nil
}

func (h *Handler) invite(c *gin.Context, m member) error {
	var req struct {
		Username string `json:"username"`
		Email    string `json:"email"`
		Role     Role   `json:"role"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	inv, err := h.svc.Invite(c.Request.Context(), m.org, auth.From(c).User, m.role, req.Username, req.Email, req.Role)
	if err != nil {
		return err
	}
	return api.JSON(c, http.StatusCreated, inv)
}

func (h *Handler) cancelInvitation(c *gin.Context, m member) error {
	id, err := invitationID(c)
	if err != nil {
		return err
	}
	return api.Done(c, h.svc.CancelInvitation(c.Request.Context(), m.org.ID, id))
}

func (h *Handler) myOrgs(c *gin.Context) error {
	p, err := auth.RequireUserWith(c, auth.ScopeRepoRead)
	if err != nil {
		return err
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
	p, err := auth.RequireUserWith(c, auth.ScopeRepoRead)
	if err != nil {
		return err
	}
	return api.ListAll(c, func() ([]InvitationInfo, error) {
		return h.svc.MyInvitations(c.Request.Context(), p.User)
	}, invitationKey)
}

func (h *Handler) respond(accept bool) api.HandlerFunc {
	return func(c *gin.Context) error {
		p, err := auth.RequireUserWith(c, auth.ScopeOrgWrite)
		if err != nil {
			return err
		}
		id, err := invitationID(c)
		if err != nil {
			return err
		}
		return api.Done(c, h.svc.RespondInvitation(c.Request.Context(), p.User, id, accept))
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
	p, err := auth.RequireUserWith(c, auth.ScopeOrgWrite)
	if err != nil {
		return err
	}
	var req struct {
		Token string `json:"token"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	return api.Done(c, h.svc.AcceptInvitationToken(c.Request.Context(), p.User, req.Token))
}
