package app

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nimbus-build/nimbus/backend/admin"
	"github.com/nimbus-build/nimbus/backend/config"
	"github.com/nimbus-build/nimbus/backend/internal/human"
)

// installSettings are the settings the admin area shows, as in effect. Credentials never leave
// the server: a URL is shown without its user and password, a key only as set or not.
func installSettings(cfg *config.Config, version string) []admin.Setting {
	set := func(v string) string {
		if v == "" {
			return "not set"
		}
		return "set"
	}
	forever := func(d time.Duration) string {
		if d <= 0 {
			return "never"
		}
		return human.Duration(d)
	}
	db, dbNote := "SQLite in the data directory", "the all-in-one default; use PostgreSQL for several replicas"
	if cfg.DatabaseURL != "" {
		db, dbNote = "PostgreSQL at "+hostOf(cfg.DatabaseURL), ""
	}
	rd, rdNote := "embedded (in-process)", "the all-in-one default; use Redis for several replicas"
	if cfg.RedisURL != "" {
		rd, rdNote = "Redis at "+hostOf(cfg.RedisURL), ""
	}
	mailValue, mailNote := "not configured", "emails are written to the log; invitations show their link to copy"
	if cfg.SMTPAddr != "" {
		mailValue, mailNote = "SMTP at "+cfg.SMTPAddr, ""
	}
	topups, topupNote := "off", "teams get money only through credit grants (Admin → Teams)"
	if cfg.StripeSecretKey != "" {
		topups, topupNote = "Stripe", fmt.Sprintf("from %s to %s %s", cfg.TopupMin, cfg.TopupMax, cfg.Currency)
	}
	tz := cfg.Timezone
	if tz == "" {
		tz = "Asia/Shanghai"
	}
	return []admin.Setting{
		{Name: "Version", Value: version},
		{Name: "Public URL", Env: "NIMBUS_PUBLIC_URL", Value: cfg.PublicURL},
		{Name: "Database", Env: "NIMBUS_DATABASE_URL", Value: db, Note: dbNote},
		{Name: "Redis", Env: "NIMBUS_REDIS_URL", Value: rd, Note: rdNote},
		{Name: "Artifact storage", Env: "NIMBUS_STORAGE", Value: cfg.Storage},
		{Name: "Mail", Env: "NIMBUS_SMTP_ADDR", Value: mailValue, Note: mailNote},
		{Name: "Top-ups", Env: "NIMBUS_STRIPE_SECRET_KEY", Value: topups, Note: topupNote},
		{Name: "Time zone", Env: "NIMBUS_TIMEZONE", Value: tz, Note: "decides billing days and months, and cron schedules"},
		{Name: "Currency", Env: "NIMBUS_BILLING_CURRENCY", Value: cfg.Currency},
		{Name: "Free build CPU core-hours a month", Env: "NIMBUS_BILLING_FREE_CPU_CORE_HOURS", Value: cfg.FreeCPUCoreHours},
		{Name: "Free workspace CPU core-hours a month", Env: "NIMBUS_BILLING_FREE_WORKSPACE_CPU_CORE_HOURS", Value: cfg.FreeWorkspaceCPUCoreHours},
		{Name: "Prices over the defaults", Env: "NIMBUS_BILLING_PRICES", Value: orNone(cfg.BillingPrices)},
		{Name: "Pre-freeze window", Env: "NIMBUS_BILLING_FREEZE_INTERVAL", Value: human.Duration(cfg.FreezeInterval)},
		{Name: "Queue timeout", Env: "NIMBUS_QUEUE_TIMEOUT", Value: forever(cfg.QueueTimeout), Note: "a pipeline that waits longer fails with the reasons it waited for"},
		{Name: "Team runner wait", Env: "NIMBUS_TEAM_RUNNER_WAIT", Value: forever(cfg.TeamRunnerWait)},
		{Name: "Team concurrency caps", Env: "NIMBUS_TEAM_CONCURRENCY", Value: orNone(cfg.TeamCaps)},
		{Name: "Pipelines a build", Env: "NIMBUS_BUILD_MAX_PIPELINES", Value: strconv.Itoa(cfg.Limits.Pipelines), Note: limitNote},
		{Name: "Jobs a build", Env: "NIMBUS_BUILD_MAX_JOBS", Value: strconv.Itoa(cfg.Limits.BuildJobs), Note: limitNote},
		{Name: "Stages a pipeline", Env: "NIMBUS_PIPELINE_MAX_STAGES", Value: strconv.Itoa(cfg.Limits.Stages), Note: limitNote},
		{Name: "Jobs a pipeline", Env: "NIMBUS_PIPELINE_MAX_JOBS", Value: strconv.Itoa(cfg.Limits.Jobs), Note: limitNote},
		{Name: "Agent registration token", Env: "NIMBUS_AGENT_REGISTRATION_TOKEN", Value: set(cfg.RegistrationToken),
			Note: "when not set, the token is generated once and kept in the data directory"},
		{Name: "Built-in agent", Env: "NIMBUS_BUILTIN_AGENT", Value: fmt.Sprint(cfg.BuiltinAgent)},
	}
}

// limitNote says what a build limit does to a file over it.
const limitNote = "a .cnb.yml over it fails its build, naming the count; nimbus lint reports it"

func orNone(s string) string {
	if strings.TrimSpace(s) == "" {
		return "none"
	}
	return s
}

// hostOf is a service URL's host, never its credentials.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(configured)"
	}
	return u.Host
}
