// Package admin is the platform admins' view of the whole installation: every team with its
// balance, and the settings the server runs with. Credit grants themselves are billing's
// (POST /admin/orgs/{org}/credits) and the agents list the scheduler's; the dashboard's admin
// area puts the three together.
//
// Every route here is for platform admins only (a token needs the admin scope); anyone else
// signed in gets 403, as for the other /admin routes.
package admin

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/billing"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/org"
)

// Setting is one of the server's settings as it is in effect. A secret shows only whether it
// is set.
type Setting struct {
	Name  string `json:"name"`
	Env   string `json:"env"`
	Value string `json:"value"`
	// Note says what the value means for users ("invitation links are shown to copy").
	Note string `json:"note,omitempty"`
}

// Handler serves the /admin routes of this package.
type Handler struct {
	orgs     *org.Service
	billing  *billing.Service
	settings []Setting
	log      *slog.Logger
}

// New returns the handler; settings are listed as given.
func New(orgs *org.Service, bill *billing.Service, settings []Setting, log *slog.Logger) *Handler {
	return &Handler{orgs: orgs, billing: bill, settings: settings, log: log}
}

// Routes implements server.Module.
func (h *Handler) Routes(_ *gin.Engine, v1 *gin.RouterGroup) {
	rs := api.NewRoutes(v1, h.log)
	rs.GET("/admin/orgs", h.listOrgs)
	rs.GET("/admin/settings", h.listSettings)
}

func allow(c *gin.Context) error {
	p := auth.From(c)
	if !p.Authenticated() {
		return fault.Unauthenticated("sign in or send a token")
	}
	if !p.IsPlatformAdmin() {
		return fault.Forbidden("only platform admins see this (a token needs the admin scope)")
	}
	return nil
}

// OrgJSON is a team as platform admins see it: its size and its money.
type OrgJSON struct {
	ID         int64     `json:"id"`
	Name       string    `json:"name"`
	Members    int       `json:"members"`
	CreatedAt  time.Time `json:"created_at"`
	Currency   string    `json:"currency"`
	Balance    string    `json:"balance"`
	Frozen     string    `json:"frozen"`
	MonthSpent string    `json:"month_spent"`
}

func (h *Handler) listOrgs(c *gin.Context) error {
	if err := allow(c); err != nil {
		return err
	}
	return api.ListPage(c, func(page api.Page) ([]OrgJSON, error) {
		return h.orgsPage(c.Request.Context(), page)
	}, func(o OrgJSON) int64 { return o.ID })
}

func (h *Handler) orgsPage(ctx context.Context, page api.Page) ([]OrgJSON, error) {
	rows, err := h.orgs.Page(ctx, page.After, page.Limit+1)
	if err != nil {
		return nil, err
	}
	out := make([]OrgJSON, 0, len(rows))
	for _, r := range rows {
		a, err := h.billing.AccountOf(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		spent, err := h.billing.MonthSpending(ctx, a.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, OrgJSON{ID: r.ID, Name: r.Name, Members: r.Members, CreatedAt: r.CreatedAt, Currency: a.Currency,
			Balance: a.Balance.Display(), Frozen: a.Frozen.Display(), MonthSpent: spent.Paid.Display()})
	}
	return out, nil
}

// SettingsJSON is GET /admin/settings.
type SettingsJSON struct {
	Settings []Setting `json:"settings"`
}

func (h *Handler) listSettings(c *gin.Context) error {
	if err := allow(c); err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, SettingsJSON{Settings: h.settings})
}
