// Package config holds the settings of nimbus-server: every one is a flag and a NIMBUS_*
// environment variable (flag > environment > default), listed by `nimbus-server --help` and in
// the README. Load is pure apart from the getenv function it is given, so tests build configs
// without touching the process environment.
package config

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nimbus-build/nimbus/backend/pipeline/spec"
	"github.com/nimbus-build/nimbus/internal/envflag"
)

// Executor modes of the built-in agent.
const (
	ExecutorAuto   = "auto"
	ExecutorDocker = "docker"
	ExecutorShell  = "shell"
)

// Config is the resolved configuration of one server process.
type Config struct {
	Listen          string
	PublicURL       string
	DataDir         string
	DatabaseURL     string // "" = SQLite file in DataDir
	RedisURL        string // "" = embedded Redis-protocol server on loopback
	SecretKey       string // "" = generated once and kept in DataDir
	BuiltinAgent    bool
	AgentExecutor   string
	LogFormat       string
	LogLevel        string
	ShutdownTimeout time.Duration
	ReadyTimeout    time.Duration
	SMTPAddr        string
	SMTPUsername    string
	SMTPPassword    string
	SMTPFrom        string
	// Scheduler.
	RegistrationToken string
	LeaseTTL          time.Duration
	SchedulerTick     time.Duration
	TeamCaps          string // "class=cap,…"
	// TeamRunnerCNBTags are the cnb: tags team runners may serve for their own team
	// (comma-separated); TeamRunnerWait how long a team-tag pipeline waits for a runner.
	TeamRunnerCNBTags string
	TeamRunnerWait    time.Duration
	// QueueTimeout fails a pipeline that waited longer in the queue.
	QueueTimeout time.Duration
	// CLIPath is the nimbus CLI served at /downloads (package downloads); "" = beside the
	// server or on PATH, "off" = none.
	CLIPath        string
	Timezone       string
	TrustedProxies string
	// InternalURL is where the other replicas reach this one, for agent tunnels (package
	// backend/tunnel); "" = http:// and the address the server listens on.
	InternalURL string
	// PreviewDomain is the domain of workspace preview origins: {port}-{id}.<domain> (package
	// workspace). It needs a wildcard DNS record (and certificate) pointing at the server.
	PreviewDomain string
	// Built-in agent.
	AgentNetwork string
	// DefaultBuildImage runs pipelines that name no image (CNB's cnbcool/default-build-env).
	DefaultBuildImage string
	// DefaultDevImage runs workspaces whose .cnb.yml names no image (CNB's cnbcool/default-dev-env).
	DefaultDevImage string
	// Billing.
	FreezeInterval   time.Duration
	FreezeLead       int    // percent of FreezeInterval: how early the next window is frozen
	BillingPrices    string // "class=price,…" per core-hour, merged over the defaults
	FreeCPUCoreHours string // decimal hours
	// FreeWorkspaceCPUCoreHours is the workspaces' own free CPU quota, decimal hours.
	FreeWorkspaceCPUCoreHours string
	Currency                  string
	// Stripe top-ups: disabled while StripeSecretKey is empty (admin grants still work).
	StripeSecretKey     string
	StripeWebhookSecret string
	StripeAPIURL        string // "" = Stripe's own API (tests point it at stripe-mock)
	TopupMin, TopupMax  string // decimal amounts in the billing currency
	// AlertWebhookPrivate lets alert webhooks reach loopback and private addresses (off: a team
	// must not make the server POST into the operator's own network).
	AlertWebhookPrivate bool
	// PublishWebhookPrivate lets repos' publish webhooks reach loopback and private addresses.
	PublishWebhookPrivate bool
	// PublishWebhookSettle is how long a new model version must go without a new file before
	// its publish webhook is sent.
	PublishWebhookSettle time.Duration
	// Artifact storage (package artifacts/storage): "local" (under DataDir/artifacts) or "s3".
	Storage     string
	S3Endpoint  string // host:port, or http(s)://host:port (http implies S3Insecure)
	S3Bucket    string
	S3AccessKey string
	S3SecretKey string
	S3Region    string
	S3Insecure  bool // plain HTTP to the S3 endpoint
	S3Presign   bool // redirect registry blob downloads to presigned S3 URLs
	// StorageQuota caps each team's stored artifacts ("10GiB", bytes; "0" = no cap), GCInterval
	// is how often unreferenced blobs are collected (0 = never).
	StorageQuota string
	GCInterval   time.Duration
	// BuildArtifactRetention is how long the artifact versions a build's pipelines hand each
	// other ($CNB_BUILD_ID) are kept after the build ended.
	BuildArtifactRetention time.Duration
	// Limits bound the pipelines, stages and jobs one build may ask for; a .cnb.yml over them
	// fails its build (package pipeline/spec).
	Limits spec.Limits
}

// Embedded reports whether the database and Redis are the embedded defaults (the all-in-one mode).
func (c *Config) Embedded() bool { return c.DatabaseURL == "" && c.RedisURL == "" }

// Flags registers the server's flags on a new set and returns it with the config it fills.
// Resolve must be called after the set is parsed.
func Flags(name string) (*envflag.Set, *Config, *string) {
	c := &Config{}
	builtin := new(string)
	s := envflag.New(name, name+` runs the Nimbus server: the JSON API, git hosting, the scheduler and the registry.

With no database or Redis URL it runs all-in-one: SQLite in the data dir, an in-process
Redis-protocol server on loopback, artifacts on local disk and a built-in agent.

Usage: `+name+` [serve] [flags]     run the server (default)
       `+name+` migrate [flags]     apply database migrations and exit
       `+name+` admin grant|revoke USERNAME [flags]   set or clear a user's platform-admin flag`)
	s.String(&c.Listen, "listen", "NIMBUS_LISTEN", "127.0.0.1:8080", "address the HTTP server listens on")
	s.String(&c.PublicURL, "public-url", "NIMBUS_PUBLIC_URL", "", "URL users and agents reach the server at (default: http://LISTEN)")
	s.String(&c.PreviewDomain, "preview-domain", "NIMBUS_PREVIEW_DOMAIN", "preview.localhost", "domain of workspace previews and IDEs, served at {port}-{workspace id}.<domain> on the public URL's scheme and port; needs a wildcard DNS record (and TLS certificate) for *.<domain> pointing at the server (the default suits make run: browsers resolve *.localhost to this machine)")
	s.String(&c.InternalURL, "internal-url", "NIMBUS_INTERNAL_URL", "", "URL the other server replicas reach this one at, for agent tunnels (http(s)://host:port, e.g. the pod's address); empty = http:// and the address the server listens on, enough for one replica")
	s.String(&c.DataDir, "data-dir", "NIMBUS_DATA_DIR", "./data", "directory for the SQLite file, the generated secret key, repos and artifacts")
	s.String(&c.DatabaseURL, "database-url", "NIMBUS_DATABASE_URL", "", "postgres://… for PostgreSQL; empty = SQLite in the data dir")
	s.String(&c.RedisURL, "redis-url", "NIMBUS_REDIS_URL", "", "redis://… ; empty = embedded Redis-protocol server on loopback")
	s.String(&c.SecretKey, "secret-key", "NIMBUS_SECRET_KEY", "", "64 hex chars (32 bytes) that encrypt secrets at rest; empty = generated once into the data dir")
	s.String(builtin, "builtin-agent", "NIMBUS_BUILTIN_AGENT", "auto", "run an agent inside the server: true, false or auto (= on when both URLs are empty)")
	s.String(&c.AgentExecutor, "agent-executor", "NIMBUS_AGENT_EXECUTOR", ExecutorAuto, "built-in agent executor: auto (Docker when an engine answers), docker or shell")
	s.String(&c.AgentNetwork, "agent-network", "NIMBUS_AGENT_NETWORK", "", "built-in agent: network mode of job containers (none, host, bridge, …); empty = host, so that jobs reach the server on this host's loopback")
	s.String(&c.DefaultDevImage, "default-dev-image", "NIMBUS_DEFAULT_DEV_IMAGE", "cnbcool/default-dev-env", "image of workspaces (vscode pipelines) whose .cnb.yml names none (written into their plans)")
	s.String(&c.DefaultBuildImage, "default-build-image", "NIMBUS_DEFAULT_BUILD_IMAGE", "cnbcool/default-build-env", "image of pipelines whose .cnb.yml names none (written into their plans)")
	s.Duration(&c.FreezeInterval, "billing-freeze-interval", "NIMBUS_BILLING_FREEZE_INTERVAL", 5*time.Minute, "how much run time is frozen ahead (and how often the next window is frozen)")
	s.Int(&c.FreezeLead, "billing-freeze-lead", "NIMBUS_BILLING_FREEZE_LEAD", 20, "how early the next window is frozen, in percent of the freeze interval (0–99), so a pipeline its team can no longer pay for is stopped before the unpaid window starts")
	s.String(&c.BillingPrices, "billing-prices", "NIMBUS_BILLING_PRICES", "", "price per core-hour by runner class, e.g. cnb:arch:amd64=0.125,cnb:arch:amd64:gpu=0.5 (over those defaults); time on a team's own runners is class team:<tag>, free unless priced here (team:seele-macbook=0.01)")
	s.String(&c.FreeCPUCoreHours, "billing-free-cpu-core-hours", "NIMBUS_BILLING_FREE_CPU_CORE_HOURS", "160", "free CPU core-hours per team per calendar month, decimals allowed (never for GPU classes)")
	s.String(&c.FreeWorkspaceCPUCoreHours, "billing-free-workspace-cpu-core-hours", "NIMBUS_BILLING_FREE_WORKSPACE_CPU_CORE_HOURS", "1600", "free CPU core-hours of cloud development workspaces per team per calendar month, apart from builds', decimals allowed (never for GPU classes)")
	s.String(&c.Currency, "billing-currency", "NIMBUS_BILLING_CURRENCY", "CNY", "currency of balances, prices and top-ups")
	s.String(&c.StripeSecretKey, "stripe-secret-key", "NIMBUS_STRIPE_SECRET_KEY", "", "Stripe secret key (sk_…); empty = top-ups disabled, admin grants only")
	s.String(&c.StripeWebhookSecret, "stripe-webhook-secret", "NIMBUS_STRIPE_WEBHOOK_SECRET", "", "signing secret (whsec_…) of the webhook endpoint POST /api/v1/billing/stripe/webhook")
	s.String(&c.StripeAPIURL, "stripe-api-url", "NIMBUS_STRIPE_API_URL", "", "base URL of the Stripe API; empty = Stripe's (tests use stripe-mock)")
	s.String(&c.TopupMin, "topup-min", "NIMBUS_TOPUP_MIN", "10.00", "smallest top-up, in the billing currency")
	s.String(&c.TopupMax, "topup-max", "NIMBUS_TOPUP_MAX", "100000.00", "largest top-up, in the billing currency")
	s.Bool(&c.AlertWebhookPrivate, "alert-webhook-private", "NIMBUS_ALERT_WEBHOOK_PRIVATE", false, "let billing alert webhooks reach loopback and private addresses")
	s.Duration(&c.PublishWebhookSettle, "publish-webhook-settle", "NIMBUS_PUBLISH_WEBHOOK_SETTLE", 5*time.Second, "how long a new model version goes without a new file before its publish webhook is sent")
	s.Bool(&c.PublishWebhookPrivate, "publish-webhook-private", "NIMBUS_PUBLISH_WEBHOOK_PRIVATE", false, "let repos' model publish webhooks reach loopback and private addresses")
	s.String(&c.Storage, "storage", "NIMBUS_STORAGE", "local", "where artifacts (images, model files) are kept: local (DATA_DIR/artifacts) or s3")
	s.String(&c.S3Endpoint, "s3-endpoint", "NIMBUS_S3_ENDPOINT", "", "S3-compatible endpoint, host:port or http(s)://host:port (storage s3)")
	s.String(&c.S3Bucket, "s3-bucket", "NIMBUS_S3_BUCKET", "", "S3 bucket of the artifacts (created when missing)")
	s.String(&c.S3AccessKey, "s3-access-key", "NIMBUS_S3_ACCESS_KEY", "", "S3 access key")
	s.String(&c.S3SecretKey, "s3-secret-key", "NIMBUS_S3_SECRET_KEY", "", "S3 secret key")
	s.String(&c.S3Region, "s3-region", "NIMBUS_S3_REGION", "", "S3 region; empty = the server's default")
	s.Bool(&c.S3Insecure, "s3-insecure", "NIMBUS_S3_INSECURE", false, "talk plain HTTP to the S3 endpoint")
	s.Bool(&c.S3Presign, "s3-presign", "NIMBUS_S3_PRESIGN", false, "redirect registry blob downloads to presigned S3 URLs (clients must reach the S3 endpoint)")
	s.String(&c.StorageQuota, "storage-quota", "NIMBUS_STORAGE_QUOTA", "0", "storage cap per team for registry blobs and model files, e.g. 50GiB, 500MB or bytes; 0 = no cap")
	s.Duration(&c.GCInterval, "gc-interval", "NIMBUS_GC_INTERVAL", time.Hour, "how often the leader replica removes unreferenced artifact blobs and stale uploads; 0 = never")
	s.Duration(&c.BuildArtifactRetention, "build-artifact-retention", "NIMBUS_BUILD_ARTIFACT_RETENTION", 7*24*time.Hour, "how long a build's hand-off artifacts (version $CNB_BUILD_ID) are kept after the build ended; the collector then removes them")
	s.String(&c.LogFormat, "log-format", "NIMBUS_LOG_FORMAT", "json", "log format: json or text")
	s.String(&c.LogLevel, "log-level", "NIMBUS_LOG_LEVEL", "info", "log level: debug, info, warn or error")
	s.Duration(&c.ShutdownTimeout, "shutdown-timeout", "NIMBUS_SHUTDOWN_TIMEOUT", 30*time.Second, "how long a graceful shutdown waits for in-flight requests")
	s.String(&c.SMTPAddr, "smtp-addr", "NIMBUS_SMTP_ADDR", "", "SMTP server host:port for password resets and invitations; empty = write emails to the log")
	s.String(&c.SMTPUsername, "smtp-username", "NIMBUS_SMTP_USERNAME", "", "SMTP username (PLAIN auth); empty = no auth")
	s.String(&c.SMTPPassword, "smtp-password", "NIMBUS_SMTP_PASSWORD", "", "SMTP password")
	s.String(&c.SMTPFrom, "smtp-from", "NIMBUS_SMTP_FROM", "nimbus@localhost", "sender address of Nimbus's emails")
	s.String(&c.RegistrationToken, "agent-registration-token", "NIMBUS_AGENT_REGISTRATION_TOKEN", "", "token agents present to register; empty = generated once into the data dir (agent-registration.token)")
	s.Duration(&c.LeaseTTL, "lease-ttl", "NIMBUS_LEASE_TTL", 30*time.Second, "how long a pipeline lease lives without a renew from its agent; agents renew every third of it, and a lost agent's pipeline fails after it (at least 3s)")
	s.Duration(&c.SchedulerTick, "scheduler-tick", "NIMBUS_SCHEDULER_TICK", 5*time.Second, "how often the reaper, the reconciler and cron run (on the leader replica)")
	s.String(&c.TeamCaps, "team-concurrency", "NIMBUS_TEAM_CONCURRENCY", "", "per-team cap of running pipelines per runner class, e.g. cnb:arch:amd64:gpu=2,cnb:arch:amd64=20; empty = no caps")
	s.String(&c.CLIPath, "cli-path", "NIMBUS_CLI_PATH", "", "the statically linked nimbus CLI served at /downloads/nimbus-linux-amd64; empty = nimbus beside nimbus-server, else on PATH; off = none")
	s.Duration(&c.QueueTimeout, "queue-timeout", "NIMBUS_QUEUE_TIMEOUT", 24*time.Hour, "how long a pipeline may wait in the queue before it fails with the reasons it waited for (0 = forever; lock waiters keep their lock.timeout)")
	s.String(&c.TeamRunnerCNBTags, "team-runner-cnb-tags", "NIMBUS_TEAM_RUNNER_CNB_TAGS", "", "cnb: tags a team's own runners may serve, for that team only (comma-separated, e.g. cnb:arch:amd64:gpu); empty = team runners serve only their own tags outside cnb:")
	s.Duration(&c.TeamRunnerWait, "team-runner-wait", "NIMBUS_TEAM_RUNNER_WAIT", 24*time.Hour, "how long a pipeline of a team runner's tag waits while no runner of its team serves the tag, before it fails (0 = forever)")
	LimitFlags(s, &c.Limits)
	s.String(&c.Timezone, "timezone", "NIMBUS_TIMEZONE", "Asia/Shanghai", "time zone of cron schedules (IANA name, or UTC+8 style fixed offsets)")
	s.String(&c.TrustedProxies, "trusted-proxies", "NIMBUS_TRUSTED_PROXIES", "", "comma-separated IPs or CIDRs of reverse proxies whose X-Forwarded-For is believed; empty = none")
	s.Duration(&c.ReadyTimeout, "ready-timeout", "NIMBUS_READY_TIMEOUT", 2*time.Second, "how long /readyz waits for the database and Redis")
	return s, c, builtin
}

// LimitFlags registers the limits of one build on s, with spec's defaults. The server and
// `nimbus lint` share them, names and variables included, so a file lints as it builds.
func LimitFlags(s *envflag.Set, l *spec.Limits) {
	def := spec.DefaultLimits()
	s.Int(&l.Pipelines, "build-max-pipelines", "NIMBUS_BUILD_MAX_PIPELINES", def.Pipelines, "most pipelines one build runs (one event on one ref, every matching branch key); a .cnb.yml over it fails its build with the count")
	s.Int(&l.BuildJobs, "build-max-jobs", "NIMBUS_BUILD_MAX_JOBS", def.BuildJobs, "most jobs one build runs, over all its pipelines")
	s.Int(&l.Stages, "pipeline-max-stages", "NIMBUS_PIPELINE_MAX_STAGES", def.Stages, "most stages of one pipeline, failStages and endStages counted")
	s.Int(&l.Jobs, "pipeline-max-jobs", "NIMBUS_PIPELINE_MAX_JOBS", def.Jobs, "most jobs of one pipeline, over all its stages")
}

// CheckLimits refuses a limit below 1: a limit of 0 would fail every build, and no limit at
// all is what the limits are there to prevent.
func CheckLimits(l spec.Limits) error {
	for _, f := range []struct {
		env string
		v   int
	}{{"NIMBUS_BUILD_MAX_PIPELINES", l.Pipelines}, {"NIMBUS_BUILD_MAX_JOBS", l.BuildJobs}, {"NIMBUS_PIPELINE_MAX_STAGES", l.Stages}, {"NIMBUS_PIPELINE_MAX_JOBS", l.Jobs}} {
		if f.v < 1 {
			return fmt.Errorf("invalid %s %d: at least 1", f.env, f.v)
		}
	}
	return nil
}

// Load parses args (flags only, no subcommand) with getenv and resolves the result.
func Load(name string, args []string, getenv func(string) string, out io.Writer) (*Config, []string, error) {
	s, c, builtin := Flags(name)
	if err := s.Parse(args, getenv, out); err != nil {
		return nil, nil, err
	}
	if err := c.Resolve(*builtin); err != nil {
		return nil, nil, err
	}
	return c, s.Args(), nil
}

// Resolve fills derived defaults and validates. builtinAgent is the raw --builtin-agent value.
func (c *Config) Resolve(builtinAgent string) error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("invalid NIMBUS_LISTEN %q: %w", c.Listen, err)
	}
	if c.PublicURL == "" {
		c.PublicURL = "http://" + publicHost(c.Listen)
	}
	u, err := url.Parse(c.PublicURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("invalid NIMBUS_PUBLIC_URL %q: want http(s)://host[:port]", c.PublicURL)
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	if c.InternalURL != "" {
		u, err := url.Parse(c.InternalURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" {
			return fmt.Errorf("invalid NIMBUS_INTERNAL_URL %q: want http(s)://host[:port]", c.InternalURL)
		}
		c.InternalURL = strings.TrimRight(c.InternalURL, "/")
	}
	if c.DataDir == "" {
		return fmt.Errorf("NIMBUS_DATA_DIR must not be empty")
	}
	// Absolute, so git subprocesses and the agent (which change directories) agree on it.
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return fmt.Errorf("invalid NIMBUS_DATA_DIR %q: %w", c.DataDir, err)
	}
	c.DataDir = abs
	if c.DatabaseURL != "" && !strings.HasPrefix(c.DatabaseURL, "postgres://") && !strings.HasPrefix(c.DatabaseURL, "postgresql://") {
		return fmt.Errorf("invalid NIMBUS_DATABASE_URL: only postgres:// URLs are supported (empty = SQLite)")
	}
	if c.RedisURL != "" && !strings.HasPrefix(c.RedisURL, "redis://") && !strings.HasPrefix(c.RedisURL, "rediss://") &&
		!strings.HasPrefix(c.RedisURL, "redis+cluster://") && !strings.HasPrefix(c.RedisURL, "rediss+cluster://") {
		return fmt.Errorf("invalid NIMBUS_REDIS_URL: want redis://, rediss://, or redis+cluster://host:port,host:port,… for a Redis Cluster (empty = embedded)")
	}
	switch strings.ToLower(builtinAgent) {
	case "", "auto":
		c.BuiltinAgent = c.Embedded()
	case "1", "true", "yes", "on":
		c.BuiltinAgent = true
	case "0", "false", "no", "off":
		c.BuiltinAgent = false
	default:
		return fmt.Errorf("invalid NIMBUS_BUILTIN_AGENT %q: want true, false or auto", builtinAgent)
	}
	switch c.AgentExecutor {
	case ExecutorAuto, ExecutorDocker, ExecutorShell:
	default:
		return fmt.Errorf("invalid NIMBUS_AGENT_EXECUTOR %q: want auto, docker or shell", c.AgentExecutor)
	}
	if _, err := c.Caps(); err != nil {
		return err
	}
	if _, err := c.Location(); err != nil {
		return err
	}
	if _, err := c.Prices(); err != nil {
		return err
	}
	if c.FreezeInterval < time.Second {
		return fmt.Errorf("invalid NIMBUS_BILLING_FREEZE_INTERVAL %s: at least 1s", c.FreezeInterval)
	}
	if c.FreezeLead < 0 || c.FreezeLead > 99 {
		return fmt.Errorf("invalid NIMBUS_BILLING_FREEZE_LEAD %d: a percent of the freeze interval from 0 to 99", c.FreezeLead)
	}
	if err := c.checkStripe(); err != nil {
		return err
	}
	if err := c.checkStorage(); err != nil {
		return err
	}
	if _, err := c.Quota(); err != nil {
		return err
	}
	if c.BuildArtifactRetention <= 0 {
		return fmt.Errorf("invalid NIMBUS_BUILD_ARTIFACT_RETENTION %s: more than 0", c.BuildArtifactRetention)
	}
	if err := CheckLimits(c.Limits); err != nil {
		return err
	}
	if c.GCInterval < 0 {
		return fmt.Errorf("invalid NIMBUS_GC_INTERVAL %s: 0 (never) or more", c.GCInterval)
	}
	if _, err := c.FreeCoreSeconds(); err != nil {
		return err
	}
	if _, err := c.FreeWorkspaceCoreSeconds(); err != nil {
		return err
	}
	if c.LeaseTTL < 3*time.Second {
		// Agents renew every third of the TTL; below a second a heartbeat is mostly latency.
		return fmt.Errorf("invalid NIMBUS_LEASE_TTL %s: at least 3s (agents renew every third of it)", c.LeaseTTL)
	}
	switch c.LogFormat {
	case "json", "text":
	default:
		return fmt.Errorf("invalid NIMBUS_LOG_FORMAT %q: want json or text", c.LogFormat)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("invalid NIMBUS_LOG_LEVEL %q: want debug, info, warn or error", c.LogLevel)
	}
	return nil
}

// publicHost turns a listen address into one a browser can reach: a wildcard host becomes
// 127.0.0.1, since "0.0.0.0" or "[::]" are not addresses to type into a URL bar.
func publicHost(listen string) string {
	host, port, _ := net.SplitHostPort(listen)
	switch host {
	case "", "0.0.0.0", "::":
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// Caps parses NIMBUS_TEAM_CONCURRENCY ("class=cap,…").
func (c *Config) Caps() (map[string]int, error) {
	out := map[string]int{}
	for _, part := range strings.Split(c.TeamCaps, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		class, n, ok := strings.Cut(part, "=")
		v, err := strconv.Atoi(strings.TrimSpace(n))
		if !ok || err != nil || v < 0 || strings.TrimSpace(class) == "" {
			return nil, fmt.Errorf("invalid NIMBUS_TEAM_CONCURRENCY entry %q: want class=cap", part)
		}
		out[strings.TrimSpace(class)] = v
	}
	return out, nil
}

// Location is the time zone of schedules. Asia/Shanghai is a fixed UTC+8 (China has no daylight
// saving), so it works on hosts without a time zone database.
func (c *Config) Location() (*time.Location, error) {
	switch c.Timezone {
	case "", "Asia/Shanghai", "UTC+8":
		return time.FixedZone("UTC+8", 8*3600), nil
	case "UTC":
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(c.Timezone)
	if err != nil {
		return nil, fmt.Errorf("invalid NIMBUS_TIMEZONE %q: %w", c.Timezone, err)
	}
	return loc, nil
}

// Proxies parses NIMBUS_TRUSTED_PROXIES.
func (c *Config) Proxies() []string {
	var out []string
	for _, p := range strings.Split(c.TrustedProxies, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Prices parses NIMBUS_BILLING_PRICES into class → decimal price strings.
func (c *Config) Prices() (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(c.BillingPrices, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		class, price, ok := strings.Cut(part, "=")
		price = strings.TrimSpace(price)
		if !ok || strings.TrimSpace(class) == "" || price == "" || strings.Trim(price, "0123456789.") != "" {
			return nil, fmt.Errorf("invalid NIMBUS_BILLING_PRICES entry %q: want class=price", part)
		}
		out[strings.TrimSpace(class)] = price
	}
	return out, nil
}

// checkStripe validates the Stripe settings. A secret key without a webhook secret is refused:
// customers would pay and never see the money, since only the signed webhook credits it.
func (c *Config) checkStripe() error {
	if c.StripeSecretKey != "" && c.StripeWebhookSecret == "" {
		return fmt.Errorf("NIMBUS_STRIPE_SECRET_KEY is set but NIMBUS_STRIPE_WEBHOOK_SECRET is not: payments could never be credited")
	}
	if c.StripeAPIURL != "" {
		u, err := url.Parse(c.StripeAPIURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("invalid NIMBUS_STRIPE_API_URL %q: want http(s)://host[:port]", c.StripeAPIURL)
		}
	}
	for name, v := range map[string]string{"NIMBUS_TOPUP_MIN": c.TopupMin, "NIMBUS_TOPUP_MAX": c.TopupMax} {
		whole, frac, _ := strings.Cut(v, ".")
		if whole == "" || strings.Trim(whole+frac, "0123456789") != "" || strings.Count(v, ".") > 1 {
			return fmt.Errorf("invalid %s %q: want a decimal amount such as 10.00", name, v)
		}
	}
	return nil
}

// FreeCoreSeconds is NIMBUS_BILLING_FREE_CPU_CORE_HOURS in core-seconds.
func (c *Config) FreeCoreSeconds() (int64, error) {
	return coreSeconds("NIMBUS_BILLING_FREE_CPU_CORE_HOURS", c.FreeCPUCoreHours)
}

// FreeWorkspaceCoreSeconds is NIMBUS_BILLING_FREE_WORKSPACE_CPU_CORE_HOURS in core-seconds.
func (c *Config) FreeWorkspaceCoreSeconds() (int64, error) {
	return coreSeconds("NIMBUS_BILLING_FREE_WORKSPACE_CPU_CORE_HOURS", c.FreeWorkspaceCPUCoreHours)
}

// coreSeconds reads a setting of core-hours (decimals allowed) as whole core-seconds.
func coreSeconds(name, v string) (int64, error) {
	h, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || h < 0 || h > 1e9 {
		return 0, fmt.Errorf("invalid %s %q: want a number of hours ≥ 0", name, v)
	}
	return int64(h*3600 + 0.5), nil
}

// checkStorage validates the artifact storage settings; an http:// endpoint turns S3Insecure
// on and is reduced to host:port, which is what the S3 client takes.
func (c *Config) checkStorage() error {
	switch c.Storage {
	case "local":
		if c.S3Presign {
			return fmt.Errorf("NIMBUS_S3_PRESIGN needs NIMBUS_STORAGE=s3")
		}
		return nil
	case "s3":
	default:
		return fmt.Errorf("invalid NIMBUS_STORAGE %q: want local or s3", c.Storage)
	}
	if c.S3Endpoint == "" || c.S3Bucket == "" {
		return fmt.Errorf("NIMBUS_STORAGE=s3 needs NIMBUS_S3_ENDPOINT and NIMBUS_S3_BUCKET")
	}
	if strings.Contains(c.S3Endpoint, "://") {
		u, err := url.Parse(c.S3Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" {
			return fmt.Errorf("invalid NIMBUS_S3_ENDPOINT %q: want host:port or http(s)://host:port", c.S3Endpoint)
		}
		c.S3Endpoint = u.Host
		c.S3Insecure = c.S3Insecure || u.Scheme == "http"
	}
	return nil
}

// Quota is StorageQuota in bytes (0 = no cap): a whole number with an optional unit (KB, MB,
// GB, TB powers of 1000; KiB, MiB, GiB, TiB powers of 1024; B).
func (c *Config) Quota() (int64, error) {
	n, err := envflag.ParseSize(c.StorageQuota)
	if err != nil {
		return 0, fmt.Errorf("invalid NIMBUS_STORAGE_QUOTA %q: want bytes or a number with KB, MB, GB, TB, KiB, MiB, GiB or TiB; 0 = no cap", c.StorageQuota)
	}
	return n, nil
}
