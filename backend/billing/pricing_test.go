package billing_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/admin"
	"github.com/nimbus-build/nimbus/backend/billing"
)

func TestZoneLabel(t *testing.T) {
	now := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	// A fixed zone stands for New York in July, so the test needs no time zone database.
	ny := time.FixedZone("EDT", -4*3600)
	tests := []struct {
		loc  *time.Location
		name string
		want string
	}{
		{time.FixedZone("UTC+8", 8*3600), "Asia/Shanghai", "Asia/Shanghai, UTC+08:00"},
		{time.FixedZone("UTC+8", 8*3600), "UTC+8", "UTC+08:00"},
		{time.FixedZone("UTC+8", 8*3600), "", "UTC+08:00"},
		{time.UTC, "UTC", "UTC"},
		{ny, "America/New_York", "America/New_York, UTC-04:00"},
		{ny, "", "EDT, UTC-04:00"},
		{time.FixedZone("x", 5*3600+1800), "Asia/Kolkata", "Asia/Kolkata, UTC+05:30"},
	}
	for _, tt := range tests {
		if got := billing.ZoneLabel(tt.loc, tt.name, now); got != tt.want {
			t.Errorf("ZoneLabel(%v, %q) = %q, want %q", tt.loc, tt.name, got, tt.want)
		}
	}
}

// The pricing names every class with its size and both prices, the quotas, the pre-freeze rule
// and the time zone; the billing summary names the zone and, while top-ups are off, who grants
// credit.
func TestPricingAndWhoGrantsCredit(t *testing.T) {
	t.Parallel()
	w := newHTWorld(t, htOptions{})
	var p billing.PricingJSON
	w.json("developer", "GET", "/api/v1/pricing", nil, http.StatusOK, &p)
	if p.Currency != "CNY" || p.TimeZone != "Asia/Shanghai, UTC+08:00" || p.FreeCoreHours != "160" || p.FreeWorkspaceCoreHour != "1600" ||
		p.FreezeIntervalSeconds != 300 || !strings.Contains(p.FreezeRule, "next 5 minutes are reserved") || !p.TeamRunners.Free {
		t.Fatalf("pricing %+v", p)
	}
	byClass := map[string]billing.PricedClassJSON{}
	for _, c := range p.Classes {
		byClass[c.Class] = c
	}
	if _, ok := byClass["cnb:arch:default"]; ok {
		t.Error("cnb:arch:default is a second name of amd64, not a class of its own")
	}
	cpu, gpu := byClass["cnb:arch:amd64"], byClass["cnb:arch:amd64:gpu"]
	if cpu.MinCores != 1 || cpu.MaxCores != 64 || cpu.DefaultCores != 8 || cpu.PricePerCoreHour != "0.1250" || cpu.PricePerHour != "1.0000" ||
		cpu.HourCores != 8 || !cpu.FreeQuota || cpu.GPU != "" {
		t.Errorf("amd64 %+v", cpu)
	}
	if gpu.FixedCores != 16 || gpu.MinCores != 16 || gpu.GPUMemoryGB != 48 || gpu.PricePerCoreHour != "0.5000" || gpu.PricePerHour != "8.0000" ||
		gpu.FreeQuota || gpu.GPU != "any" {
		t.Errorf("gpu %+v", gpu)
	}
	if r := w.do("", "GET", "/api/v1/pricing", nil); r.Status != http.StatusUnauthorized {
		t.Errorf("anonymous pricing: %d", r.Status)
	}
	s := w.summary()
	if s.TimeZone != "Asia/Shanghai, UTC+08:00" || len(s.CreditFrom) != 1 || s.CreditFrom[0] != "root" {
		t.Errorf("summary zone %q, credit from %v", s.TimeZone, s.CreditFrom)
	}
}

// The admin area's teams list carries each team's money; its settings never show a secret.
func TestAdminTeamsAndSettings(t *testing.T) {
	t.Parallel()
	w := newHTWorld(t, htOptions{})
	w.grant("25.50")
	var teams struct {
		Items []admin.OrgJSON `json:"items"`
	}
	w.json("root", "GET", "/api/v1/admin/orgs", nil, http.StatusOK, &teams)
	if len(teams.Items) != 2 || teams.Items[0].Name != htOrg || teams.Items[0].Balance != "25.5000" || teams.Items[0].Members != 5 ||
		teams.Items[0].Currency != "CNY" || teams.Items[1].Name != "globex" || teams.Items[1].Balance != "0.0000" || teams.Items[1].Members != 1 {
		t.Fatalf("teams %+v", teams.Items)
	}
	w.json("root", "GET", "/api/v1/admin/orgs?limit=1", nil, http.StatusOK, &teams)
	if len(teams.Items) != 1 {
		t.Errorf("limit=1: %+v", teams.Items)
	}
	var set admin.SettingsJSON
	w.json("root", "GET", "/api/v1/admin/settings", nil, http.StatusOK, &set)
	got := map[string]admin.Setting{}
	for _, s := range set.Settings {
		got[s.Name] = s
	}
	if got["Mail"].Value != "not configured" || !strings.Contains(got["Mail"].Note, "invitations show their link") ||
		got["Top-ups"].Value != "off" || got["Time zone"].Value != "Asia/Shanghai" || got["Queue timeout"].Value != "24 hours" ||
		got["Pre-freeze window"].Value != "5 minutes" || got["Database"].Env != "NIMBUS_DATABASE_URL" {
		t.Errorf("settings %+v", got)
	}
	for _, who := range []string{"owner", "root-noadmin"} {
		for _, path := range []string{"/api/v1/admin/orgs", "/api/v1/admin/settings"} {
			if r := w.do(who, "GET", path, nil); r.Status != http.StatusForbidden {
				t.Errorf("%s %s: %d, want 403", who, path, r.Status)
			}
		}
	}
}
