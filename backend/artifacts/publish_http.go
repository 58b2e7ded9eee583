// The publish hook's routes: the repo's admins read and set the hook and read its deliveries.

package artifacts

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/webhook"
	"gorm.io/gorm"
)

// Routes implements server.Module.
func (p *Publisher) Routes(_ *gin.Engine, v1 *gin.RouterGroup) {
	const base = "/repos/:org/:repo/webhooks/publish"
	rs := api.NewRoutes(v1, p.cfg.Log)
	rs.GET(base, p.getHook)
	rs.PUT(base, p.putHook)
	rs.DELETE(base, p.deleteHook)
	rs.GET(base+"/deliveries", p.deliveries)
}

func (p *Publisher) hookOf(c *gin.Context) (*repo.Access, *PublishHook, error) {
	a, err := repo.Load(c, p.cfg.Repos, repo.Admin)
	if err != nil {
		return nil, nil, err
	}
	var h PublishHook
	err = p.cfg.DB.WithContext(c.Request.Context()).Where("repo_id = ?", a.Repo.ID).Take(&h).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return a, nil, nil
	}
	return a, &h, err
}

func (p *Publisher) getHook(c *gin.Context) error {
	_, h, err := p.hookOf(c)
	if err != nil {
		return err
	}
	if h == nil {
		return fault.NotFound("this repo has no publish webhook")
	}
	return api.JSON(c, http.StatusOK, PublishHookJSON{URL: h.URL, CreatedAt: h.CreatedAt, UpdatedAt: h.UpdatedAt})
}

func (p *Publisher) putHook(c *gin.Context) error {
	a, h, err := p.hookOf(c)
	if err != nil {
		return err
	}
	var req struct {
		URL    string `json:"url"`
		Secret string `json:"secret"`
	}
	if err := api.Bind(c, &req); err != nil {
		return err
	}
	if bad := webhook.CheckURL(req.URL, p.cfg.AllowPrivate); bad != "" {
		return fault.Invalid("url", "url %s", bad)
	}
	if req.Secret == "" {
		b := make([]byte, 32)
		rand.Read(b)
		req.Secret = hex.EncodeToString(b)
	} else if len(req.Secret) < 16 || len(req.Secret) > 256 {
		return fault.Invalid("secret", "a secret is 16 to 256 characters (leave it out to have one made)")
	}
	sealed, err := p.cfg.Box.Seal([]byte(req.Secret), sealContext(a.Repo.ID))
	if err != nil {
		return err
	}
	now := p.cfg.Clock.Now().UTC()
	db := p.cfg.DB.WithContext(c.Request.Context())
	if h == nil {
		h = &PublishHook{RepoID: a.Repo.ID, CreatedAt: now}
	}
	h.URL, h.Secret, h.UpdatedAt = req.URL, sealed, now
	if err := db.Save(h).Error; err != nil {
		return err
	}
	return api.JSON(c, http.StatusOK, PublishHookJSON{URL: h.URL, Secret: req.Secret, CreatedAt: h.CreatedAt, UpdatedAt: h.UpdatedAt})
}

// deleteHook removes the webhook; removing none is done too (204), as a retried DELETE expects.
func (p *Publisher) deleteHook(c *gin.Context) error {
	_, h, err := p.hookOf(c)
	if err != nil {
		return err
	}
	if h != nil {
		if err := p.cfg.DB.WithContext(c.Request.Context()).Delete(h).Error; err != nil {
			return err
		}
	}
	return api.NoContent(c)
}

// deliveries lists the repo's latest 50 deliveries, newest first.
func (p *Publisher) deliveries(c *gin.Context) error {
	a, _, err := p.hookOf(c)
	if err != nil {
		return err
	}
	var ds []PublishDelivery
	if err := p.cfg.DB.WithContext(c.Request.Context()).Where("repo_id = ?", a.Repo.ID).Order("id DESC").Limit(50).Find(&ds).Error; err != nil {
		return err
	}
	out := struct {
		Items []PublishDeliveryJSON `json:"items"`
	}{Items: []PublishDeliveryJSON{}}
	for _, d := range ds {
		j := PublishDeliveryJSON{ID: d.ID, Package: d.Package, Version: d.Version, Status: d.Status, Attempts: d.Attempts,
			ResponseCode: d.ResponseCode, Error: d.Error, CreatedAt: d.CreatedAt, DeliveredAt: d.DeliveredAt}
		if d.Status == DeliveryPending {
			due := d.DueAt
			j.NextAttempt = &due
		}
		out.Items = append(out.Items, j)
	}
	return api.JSON(c, http.StatusOK, out)
}
