package billing

import (
	"fmt"
	"strings"
	"time"

	"github.com/nimbus-build/nimbus/backend/internal/human"
	"github.com/nimbus-build/nimbus/backend/runnerclass"
)

// PricingJSON is what running costs on this installation (GET /api/v1/pricing): every runner
// class with its size and price, the free quotas and the pre-freeze rule, and the time zone
// that decides calendar days and months.
type PricingJSON struct {
	Currency string `json:"currency"`
	// TimeZone is the billing time zone as people read it ("Asia/Shanghai, UTC+08:00").
	TimeZone              string              `json:"time_zone"`
	FreeCoreHours         string              `json:"free_core_hours"`
	FreeWorkspaceCoreHour string              `json:"free_workspace_core_hours"`
	FreezeIntervalSeconds int64               `json:"freeze_interval_seconds"`
	FreezeRule            string              `json:"freeze_rule"`
	Classes               []PricedClassJSON   `json:"classes"`
	TeamRunners           TeamRunnerPriceJSON `json:"team_runners"`
}

// PricedClassJSON is one runner class and its price.
type PricedClassJSON struct {
	Class string   `json:"class"` // the canonical tag
	Tags  []string `json:"tags"`
	// Cores: FixedCores > 0 for a fixed-size class (GPU nodes), else MinCores–MaxCores with
	// DefaultCores when runner.cpus is not set.
	FixedCores       int    `json:"fixed_cores"`
	MinCores         int    `json:"min_cores"`
	MaxCores         int    `json:"max_cores"`
	DefaultCores     int    `json:"default_cores"`
	MemoryGiBPerCore int    `json:"memory_gib_per_core"`
	GPU              string `json:"gpu"` // model, "any", or "" for none
	GPUMemoryGB      int    `json:"gpu_memory_gb"`
	PricePerCoreHour string `json:"price_per_core_hour"`
	// PricePerHour is an hour of the class at FixedCores, or else at DefaultCores (HourCores).
	PricePerHour string `json:"price_per_hour"`
	HourCores    int    `json:"hour_cores"`
	// FreeQuota says the monthly free CPU core-hours pay for this class first.
	FreeQuota bool `json:"free_quota"`
}

// TeamRunnerPriceJSON says what time on a team's own runners costs: free unless priced.
type TeamRunnerPriceJSON struct {
	Free bool   `json:"free"`
	Note string `json:"note"`
}

// Pricing describes the prices of classes (the server's runner classes).
func (s *Service) Pricing(classes []runnerclass.Class, zone string) PricingJSON {
	cfg := s.cfg
	out := PricingJSON{Currency: cfg.Currency, TimeZone: ZoneLabel(cfg.Location, zone, s.clock.Now()),
		FreeCoreHours: coreHoursText(cfg.FreeCoreSeconds), FreeWorkspaceCoreHour: coreHoursText(cfg.FreeWorkspaceCoreSeconds),
		FreezeIntervalSeconds: int64(cfg.FreezeInterval / time.Second), Classes: []PricedClassJSON{},
		TeamRunners: TeamRunnerPriceJSON{Free: true, Note: "Time on your team's own runners is free and does not use the free quota."}}
	out.FreezeRule = fmt.Sprintf("While a pipeline runs, its next %[1]s are reserved (frozen) from the free quota or the balance, "+
		"every %[1]s; a pipeline the balance can no longer cover is stopped, and each is settled by the time it really ran.",
		human.Duration(cfg.FreezeInterval))
	for class, p := range cfg.Prices {
		// The scheduler bills time on a team's runners as class "team:<tag>".
		if strings.HasPrefix(class, "team:") && p > 0 {
			out.TeamRunners = TeamRunnerPriceJSON{Note: "Some of your team's own runners are priced on this installation; their time never uses the free quota."}
		}
	}
	for _, c := range classes {
		if len(c.Tags) == 0 || c.Tags[0] == runnerclass.DefaultTag {
			continue
		}
		pc := PricedClassJSON{Class: c.Tags[0], Tags: c.Tags, FixedCores: c.FixedCPUs, MinCores: c.MinCPUs, MaxCores: c.MaxCPUs,
			DefaultCores: c.DefaultCPUs, MemoryGiBPerCore: c.MemoryPerCPUGiB, GPU: c.GPU, GPUMemoryGB: c.GPUMemoryGB,
			FreeQuota: cfg.QuotaClasses[c.Tags[0]]}
		if pc.FixedCores > 0 {
			pc.MinCores, pc.MaxCores, pc.DefaultCores = pc.FixedCores, pc.FixedCores, pc.FixedCores
		}
		price := cfg.Prices[c.Tags[0]]
		pc.HourCores = pc.DefaultCores
		pc.PricePerCoreHour = price.Display()
		pc.PricePerHour = Amount(int64(price) * int64(pc.HourCores)).Display()
		out.Classes = append(out.Classes, pc)
	}
	return out
}

// ZoneLabel names a time zone for people: the configured name and the offset now
// ("Asia/Shanghai, UTC+08:00"; just "UTC" for UTC).
func ZoneLabel(loc *time.Location, name string, now time.Time) string {
	if loc == nil {
		loc = time.UTC
	}
	_, off := now.In(loc).Zone()
	sign := "+"
	if off < 0 {
		sign, off = "-", -off
	}
	offset := fmt.Sprintf("UTC%s%02d:%02d", sign, off/3600, off%3600/60)
	if name == "" {
		name = loc.String()
	}
	// A name that is an offset itself ("UTC", "UTC+8") says nothing the offset does not.
	if strings.HasPrefix(name, "UTC") {
		if off == 0 {
			return "UTC"
		}
		return offset
	}
	return name + ", " + offset
}

func coreHoursText(coreSeconds int64) string {
	h, rem := coreSeconds/3600, coreSeconds%3600
	if rem == 0 {
		return fmt.Sprint(h)
	}
	return fmt.Sprintf("%.2f", float64(coreSeconds)/3600)
}
