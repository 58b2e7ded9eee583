// Package app assembles a whole Nimbus server process from its configuration: database and
// migrations, Redis, every domain service with its dependencies, the HTTP server with every
// module, and the built-in agent. nimbus-server's main is a thin shell around it, and the
// end-to-end and authorization tests start the very same assembly.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/agent"
	"github.com/nimbus-build/nimbus/backend/admin"
	"github.com/nimbus-build/nimbus/backend/agentapi"
	"github.com/nimbus-build/nimbus/backend/artifacts"
	"github.com/nimbus-build/nimbus/backend/artifacts/storage"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/billing"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/code"
	"github.com/nimbus-build/nimbus/backend/config"
	"github.com/nimbus-build/nimbus/backend/downloads"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/logs"
	"github.com/nimbus-build/nimbus/backend/mail"
	"github.com/nimbus-build/nimbus/backend/org"
	"github.com/nimbus-build/nimbus/backend/outbox"
	"github.com/nimbus-build/nimbus/backend/pipeline/spec"
	"github.com/nimbus-build/nimbus/backend/pull"
	"github.com/nimbus-build/nimbus/backend/record"
	"github.com/nimbus-build/nimbus/backend/redisconn"
	"github.com/nimbus-build/nimbus/backend/registry"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/runnerclass"
	"github.com/nimbus-build/nimbus/backend/scheduler"
	"github.com/nimbus-build/nimbus/backend/secrets"
	"github.com/nimbus-build/nimbus/backend/server"
	"github.com/nimbus-build/nimbus/backend/store"
	"github.com/nimbus-build/nimbus/backend/tunnel"
	"github.com/nimbus-build/nimbus/backend/workspace"
	"github.com/nimbus-build/nimbus/frontend"
)

// App is one assembled server process.
type App struct {
	Config    *config.Config
	Log       *slog.Logger
	DB        *gorm.DB
	Redis     *redisconn.Conn
	Server    *server.Server
	Auth      *auth.Service
	Orgs      *org.Service
	Repos     *repo.Service
	Builds    *build.Service
	Pulls     *pull.Service
	Scheduler *scheduler.Service
	Logs      *logs.Service
	Billing   *billing.Service
	Stripe    *billing.Stripe
	Alerts    *billing.AlertSender
	// Outbox sends every outgoing webhook (billing alerts, publish webhooks); each domain
	// registers its kinds.
	Outbox *outbox.Outbox
	// Publisher announces new model versions to the repos' publish webhooks.
	Publisher *artifacts.Publisher
	// Storage keeps artifact bytes: registry blobs (and model files).
	Storage  storage.Store
	Registry *registry.Handler
	// Blobs counts and caps what each team stores; Files are the repos' model files; Collector
	// removes the blobs nothing references.
	Blobs     *artifacts.Blobs
	Files     *artifacts.Service
	Collector *artifacts.Collector
	// RegistrationToken is what agents present to register (the built-in agent uses it too).
	RegistrationToken string
	// Tunnel opens streams to agents over the connections they hold to the server replicas.
	Tunnel *tunnel.Hub
	// Workspaces lets people into cloud workspaces: terminals, SSH, previews.
	Workspaces *workspace.Service

	agent   *agent.Agent
	version string
	closers []func() error
}

// Options adjust the assembly for tests.
type Options struct {
	Version string
	Clock   clock.Clock // clock.Real when nil
	Mail    mail.Sender // from the SMTP settings when nil
	// StripeClient carries the calls to the Stripe API (tests count them); nil = the default.
	StripeClient *http.Client
	// Passwords is the work of a password hash; the zero value is the real one (tests:
	// auth.CheapPasswords, see auth.PasswordCost).
	Passwords auth.PasswordCost
}

// New builds the app: it opens and migrates the database, connects Redis, and wires every
// service. It starts nothing that listens; Serve does.
func New(ctx context.Context, cfg *config.Config, log *slog.Logger, opt Options) (_ *App, err error) {
	// a is not the named result: every failure returns nil, and what it opened must still close.
	a := &App{Config: cfg, Log: log, version: opt.Version}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	clk := opt.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	key, err := secrets.LoadKey(cfg.DataDir, cfg.SecretKey)
	if err != nil {
		return nil, err
	}
	box, err := secrets.NewBox(key)
	if err != nil {
		return nil, err
	}
	if a.DB, err = store.Open(ctx, cfg.DatabaseURL, cfg.DataDir); err != nil {
		return nil, err
	}
	a.closers = append(a.closers, func() error { return store.Close(a.DB) })
	n, err := store.Migrate(ctx, a.DB)
	if err != nil {
		return nil, err
	}
	log.Info("database ready", "dialect", store.Dialect(a.DB), "migrations_applied", n)
	if a.Redis, err = redisconn.Connect(ctx, cfg.RedisURL); err != nil {
		return nil, err
	}
	a.closers = append(a.closers, a.Redis.Close)
	if a.Redis.Addr != "" {
		log.Info("embedded Redis-protocol server started", "addr", a.Redis.Addr)
	}

	mailer := opt.Mail
	if mailer == nil {
		mailer = mail.Log{Logger: log}
		if cfg.SMTPAddr != "" {
			mailer = mail.SMTP{Addr: cfg.SMTPAddr, Username: cfg.SMTPUsername, Password: cfg.SMTPPassword, From: cfg.SMTPFrom}
		}
	}
	a.Auth = auth.NewService(a.DB, a.Redis.Client, clk, mailer, log, auth.Config{PublicURL: cfg.PublicURL, Passwords: opt.Passwords})
	a.Orgs = org.NewService(a.DB, a.Auth, clk, mailer, cfg.PublicURL, log)
	a.Orgs.OnCreate(func(tx *gorm.DB, o *org.Org) error { return billing.OpenAccount(tx, o.ID, clk.Now().UTC()) })
	a.Repos = repo.NewService(a.DB, a.Orgs, box, clk, filepath.Join(cfg.DataDir, "repos"), log)
	a.Auth.RegisterTokenResolver(auth.PrefixDeploy, a.Repos.ResolveDeployToken)
	loc, err := cfg.Location()
	if err != nil {
		return nil, err
	}
	caps, err := cfg.Caps()
	if err != nil {
		return nil, err
	}
	if a.RegistrationToken, err = secrets.LoadToken(cfg.DataDir, "agent-registration.token", cfg.RegistrationToken); err != nil {
		return nil, err
	}
	a.Logs = logs.NewService(a.DB, a.Redis.Client, clk, log, logs.Config{})
	billCfg, err := billingConfig(cfg, loc)
	if err != nil {
		return nil, err
	}
	// Billing settles by when pipelines ended and stops the ones it cannot cover, which build
	// knows and does; a.Builds is made below, before anything runs.
	billCfg.EndedAt = func(ctx context.Context, ids []int64) (map[int64]time.Time, error) {
		return a.Builds.PipelinesEndedAt(ctx, ids)
	}
	billCfg.Stop = func(ctx context.Context, pipelineID int64) error {
		return a.Builds.RequestStop(ctx, pipelineID, build.ReasonInsufficientBalance)
	}
	billCfg.Builds = func(ctx context.Context, ids []int64) (map[int64]billing.BuildRef, error) {
		bs, err := a.Builds.PipelineBuilds(ctx, ids)
		if err != nil {
			return nil, err
		}
		out := make(map[int64]billing.BuildRef, len(bs))
		for id, b := range bs {
			out[id] = billing.BuildRef{Repo: b.OrgName + "/" + b.RepoName, Number: b.BuildNumber}
		}
		return out, nil
	}
	a.Billing = billing.NewService(a.DB, clk, log, billCfg)
	if a.Stripe, err = newStripe(cfg, a.Billing, opt.StripeClient, log); err != nil {
		return nil, err
	}
	a.Outbox = outbox.New(outbox.Config{DB: a.DB, Clock: clk, Log: log})
	a.Alerts = billing.NewAlertSender(a.DB, clk, log, a.Outbox, billing.AlertSenderConfig{AllowPrivate: cfg.AlertWebhookPrivate})
	// The intake (the scheduler's Redis queues) comes first: the build service enqueues into it,
	// and the scheduler, which drives builds through build.Lifecycle, dispatches from it.
	intake := scheduler.NewIntake(a.Redis.Client, nil)
	a.Builds = build.NewService(build.Config{DB: a.DB, Repos: a.Repos, Users: a.Auth, Queue: intake, Agents: intake, Logs: a.Logs, Clock: clk,
		Log: log, PublicURL: cfg.PublicURL, Spec: spec.Options{Location: loc, DefaultBuildImage: cfg.DefaultBuildImage, DefaultDevImage: cfg.DefaultDevImage,
			Limits: cfg.Limits}})
	a.Scheduler = scheduler.NewService(a.DB, intake, a.Builds, a.Repos, meter{a.Billing}, clk, log, scheduler.Config{
		PublicURL: cfg.PublicURL, RegistrationToken: a.RegistrationToken, LeaseTTL: cfg.LeaseTTL, Caps: caps, Location: loc,
		TeamRunnerCNBTags: splitList(cfg.TeamRunnerCNBTags), TeamRunnerWait: waitLimit(cfg.TeamRunnerWait),
		QueueTimeout: waitLimit(cfg.QueueTimeout),
		WorkspaceEnv: workspace.Links{PublicURL: cfg.PublicURL, Domain: cfg.PreviewDomain}.Env,
	})
	// What follows a pipeline's end, from the agent's finish or the reaper alike: the scheduler
	// frees the team's slot and the locks, then billing settles (once: billing claims the
	// settlement itself; a failure is retried by the billing tick, which settles what ended
	// unsettled).
	a.Builds.OnEnded(a.Scheduler.Ended)
	// A pipeline that waited for its place after the lease (a Kubernetes pod) is billed from
	// when it started; a failure leaves the bill at the lease's time, as for every other.
	a.Builds.OnStarted(func(ctx context.Context, pipelineID int64, at time.Time) {
		if err := a.Billing.Started(ctx, pipelineID, at); err != nil {
			log.ErrorContext(ctx, "moving the bill's start failed; it counts from the lease", "pipeline", pipelineID, "err", err)
		}
	})
	a.Builds.OnEnded(func(ctx context.Context, p *build.Pipeline) {
		if err := a.Billing.Settle(ctx, p.ID, *p.FinishedAt); err != nil {
			log.ErrorContext(ctx, "settlement failed; the billing tick retries it", "pipeline", p.ID, "err", err)
		}
	})
	a.Auth.RegisterTokenResolver(auth.PrefixJob, a.Builds.ResolveJobToken)
	a.Pulls = pull.NewService(a.DB, a.Repos, clk, log)
	a.Pulls.OnEvent(a.pullEvents(cfg.PublicURL))
	a.Pulls.UseChecks(pullChecks{a.Builds})
	a.Pulls.UseRoles(a.Orgs)
	// A pull_request pipeline that ended may be the last check a request waited for.
	a.Builds.OnEnded(a.recheckPull)

	// The git handler's scratch space is per process: a crashed process's leftovers are
	// removed by the next handler that starts in it, so replicas must never share one.
	gitWork, err := os.MkdirTemp("", "nimbus-git-")
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, func() error { return os.RemoveAll(gitWork) })
	gitHandler, err := git.NewHandler(git.HandlerConfig{
		Resolve: repo.GitResolver(a.Auth, a.Repos),
		OnPush: func(ctx context.Context, r git.Repo, updates []git.RefUpdate) []string {
			var pusher *auth.User
			who := pull.Person{}
			if r.UserID != 0 {
				if pusher, _ = a.Auth.UserByID(ctx, r.UserID); pusher != nil {
					who = pull.Person{ID: pusher.ID, Name: pusher.Username, Email: pusher.Email}
				}
			}
			builds := a.Builds.OnPush(ctx, r.ID, pusher, updates)
			// Then the pull requests the push moved: their pull_request builds come after the push's.
			rp, o, err := a.Repos.ByID(ctx, r.ID)
			if err != nil {
				return nil
			}
			a.Pulls.OnPush(ctx, rp, who, updates)
			// The pusher's git prints these as "remote: …": a link to each build the push started.
			return a.Builds.PushLines(o.Name, rp.Name, builds)
		},
		// Protected branches: the rules of backend/pull judge a push before git runs.
		Guard: func(ctx context.Context, r git.Repo, updates []git.RefUpdate) (git.Verdict, error) {
			rp, _, err := a.Repos.ByID(ctx, r.ID)
			if err != nil {
				return git.Verdict{}, err
			}
			role, err := a.Orgs.RoleOf(ctx, rp.OrgID, r.UserID)
			if err != nil {
				return git.Verdict{}, err
			}
			return a.Pulls.Guard(ctx, r.ID, role, updates)
		},
		WorkDir: gitWork,
		Logger:  log,
	})
	if err != nil {
		return nil, err
	}

	if a.Storage, err = storage.New(ctx, storage.Config{
		Backend: cfg.Storage, LocalRoot: filepath.Join(cfg.DataDir, "artifacts"),
		S3: storage.S3Config{Endpoint: cfg.S3Endpoint, Bucket: cfg.S3Bucket, AccessKey: cfg.S3AccessKey,
			SecretKey: cfg.S3SecretKey, Region: cfg.S3Region, Insecure: cfg.S3Insecure},
	}, clk); err != nil {
		return nil, err
	}
	quota, err := cfg.Quota()
	if err != nil {
		return nil, err
	}
	a.Blobs = artifacts.NewBlobs(a.DB, a.Storage, quota)
	if a.Registry, err = registry.New(registry.Config{
		DB: a.DB, Store: a.Storage, Users: a.Auth, Repos: a.Repos, PublicURL: cfg.PublicURL, Key: key,
		Presign: cfg.S3Presign, Guard: a.Blobs, Clock: clk, Log: log,
	}); err != nil {
		return nil, err
	}
	a.Files = artifacts.NewService(a.DB, a.Storage, a.Blobs, a.Builds, clk, log)
	a.Publisher = artifacts.NewPublisher(artifacts.PublisherConfig{DB: a.DB, Outbox: a.Outbox, Repos: a.Repos, Box: box, Clock: clk, Log: log,
		PublicURL: cfg.PublicURL, AllowPrivate: cfg.PublishWebhookPrivate, Settle: cfg.PublishWebhookSettle})
	a.Collector = artifacts.NewCollector(a.DB, a.Builds, a.Storage, a.Registry, clk, log.With("component", "gc"), artifacts.CollectorConfig{BuildRetention: cfg.BuildArtifactRetention})

	if a.Tunnel, err = tunnel.New(tunnel.Config{
		Authenticate: func(ctx context.Context, token string) (string, error) {
			ag, err := a.Scheduler.AgentByToken(ctx, token)
			if err != nil {
				return "", err
			}
			return ag.ID, nil
		},
		Redis: a.Redis.Client, Secret: key, InternalURL: cfg.InternalURL,
		Draining: func() <-chan struct{} { return a.Server.Draining() }, Log: log,
	}); err != nil {
		return nil, err
	}
	a.closers = append(a.closers, a.Tunnel.Close)

	authHandler := auth.NewHandler(a.Auth, log)
	logHandler, err := logs.NewHandler(a.Logs, logs.HandlerConfig{
		Authorize: a.authorizeJob,
		Draining:  func() <-chan struct{} { return a.Server.Draining() },
		Log:       log,
	})
	if err != nil {
		return nil, err
	}
	links := workspace.Links{PublicURL: cfg.PublicURL, Domain: cfg.PreviewDomain}
	a.Workspaces = workspace.New(workspace.Config{Repos: a.Repos, Orgs: a.Orgs, Builds: a.Builds,
		Tunnel: a.Tunnel, Meter: Usage(a.Billing), Links: links, Users: a.Auth.UserByID, Secret: key, Clock: clk, Log: log})
	buildHandler := build.NewHandler(build.HandlerConfig{Service: a.Builds, Repos: a.Repos, Explain: a.Scheduler, Meter: Usage(a.Billing), Zone: loc, ZoneName: cfg.Timezone, Log: log})
	a.Server = server.New(server.Deps{
		DB: a.DB, Redis: a.Redis.Client, Log: log, Frontend: frontend.Dist(), Version: opt.Version,
		ReadyTimeout:   cfg.ReadyTimeout,
		TrustedProxies: cfg.Proxies(),
		Authenticate:   authHandler.Middleware,
		Git:            gitHandler,
		Registry:       a.Registry,
		Preview:        workspace.NewPreview(a.Workspaces),
		Modules: []server.Module{
			authHandler,
			org.NewHandler(a.Orgs, log),
			repo.NewHandler(a.Repos, a.Orgs, cfg.PublicURL, log),
			buildHandler,
			code.NewHandler(a.Repos, a.Builds, log),
			pull.NewHandler(pull.HandlerConfig{Service: a.Pulls, Repos: a.Repos, Users: a.Auth, Members: a.Orgs, Jobs: jobPulls{a.Builds},
				Metrics: func(ctx context.Context, repoID, number int64, target string) (any, error) {
					return a.Builds.PullMetrics(ctx, repoID, number, target)
				},
				PublicURL: cfg.PublicURL, Log: log}),
			a.Publisher,
			record.NewHandler(record.Config{Builds: a.Builds, Describe: buildHandler.Describe, Files: a.Files, Repos: a.Repos,
				Manifests: a.Registry, PublicURL: cfg.PublicURL, Log: log}),
			scheduler.NewHandler(a.Scheduler, a.Orgs, log),
			agentapi.NewHandler(agentapi.Config{Dispatch: a.Scheduler, Runs: a.Builds, Logs: a.Logs,
				PublicURL: cfg.PublicURL, ResolveToken: a.Auth.PrincipalForToken,
				Draining: func() <-chan struct{} { return a.Server.Draining() }, Log: log}),
			a.Tunnel,
			workspace.NewHandler(a.Workspaces, buildHandler, log),
			logHandler,
			billing.NewHandler(a.Billing, a.Orgs, a.Stripe, billing.HandlerConfig{AllowPrivateWebhooks: cfg.AlertWebhookPrivate,
				Classes: runnerclass.Defaults(), ZoneName: cfg.Timezone, Admins: a.Auth.AdminUsernames}, log),
			admin.New(a.Orgs, a.Billing, installSettings(cfg, opt.Version), log),
			artifacts.NewHandler(artifacts.HandlerConfig{Service: a.Files, Blobs: a.Blobs, Repos: a.Repos, Orgs: a.Orgs,
				PublicURL: cfg.PublicURL, Presign: cfg.S3Presign, Log: log}),
			downloads.New(cfg.CLIPath, log),
		},
	})

	return a, nil
}

// startAgent starts the built-in agent against the address the server listens on (not the
// public URL, which may be a load balancer the host cannot reach).
//
// Its job containers share the host's network unless NIMBUS_AGENT_NETWORK says otherwise: the
// agent reaches the server on this host's loopback, and hands that address to its jobs
// (CNB_API_ENDPOINT, the registry, imports), which only the host's network reaches. With the
// engine's default network the brief's `nimbus artifact push` failed with "connection refused".
func (a *App) startAgent(ctx context.Context, addr string) error {
	network := a.Config.AgentNetwork
	if network == "" {
		network = "host"
		a.Log.Info("built-in agent: job containers use the host's network, so that they reach the server at "+listenURL(addr)+
			" (NIMBUS_AGENT_NETWORK sets another)", "component", "builtin-agent")
	}
	var err error
	a.agent, err = agent.New(ctx, agent.Config{
		ServerURL: listenURL(addr),
		Token:     a.RegistrationToken,
		Name:      "built-in",
		Tags:      []string{"cnb:arch:default", "cnb:arch:amd64"},
		// It says the cores the host has, and takes a pipeline that asks for more (the brief's
		// 16-core example on a laptop) when it runs nothing else, alone on all of them.
		CPUs:         runtime.NumCPU(),
		WholeHost:    true,
		Concurrency:  runtime.NumCPU(),
		Executor:     a.Config.AgentExecutor,
		Network:      network,
		DefaultImage: a.Config.DefaultBuildImage,
		WorkDir:      filepath.Join(a.Config.DataDir, "agent"),
		Version:      a.version,
	}, a.Log.With("component", "builtin-agent"))
	if err != nil {
		return fmt.Errorf("built-in agent: %w", err)
	}
	a.closers = append(a.closers, a.agent.Close)
	return nil
}

// listenURL is the URL of the address the server listens on, as this host reaches it.
func listenURL(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// Serve listens on the configured address and serves until ctx ends, then shuts down
// gracefully. ready, when non-nil, receives the bound address once the listener is up.
func (a *App) Serve(ctx context.Context, ready func(addr string)) error {
	ln, err := net.Listen("tcp", a.Config.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", a.Config.Listen, err)
	}
	if a.Config.InternalURL == "" {
		// Enough for one replica; several set NIMBUS_INTERNAL_URL (backend/tunnel's README).
		if err := a.Tunnel.SetInternalURL(listenURL(ln.Addr().String())); err != nil {
			ln.Close()
			return err
		}
	}
	agentCtx, stopAgent := context.WithCancel(ctx)
	defer stopAgent()
	agentDone := make(chan error, 1)
	if a.Config.BuiltinAgent {
		if err := a.startAgent(ctx, ln.Addr().String()); err != nil {
			ln.Close()
			return err
		}
	}
	if a.agent != nil {
		go func() { agentDone <- a.agent.Run(agentCtx) }()
	} else {
		agentDone <- nil
	}
	bgCtx, stopBackground := context.WithCancel(ctx)
	defer stopBackground()
	go a.Scheduler.Run(bgCtx, a.Config.SchedulerTick)
	// Billing freezes the next windows and settles what a failed settlement left, on its own
	// leader, at the scheduler's tick.
	go a.Billing.Run(bgCtx, a.Redis.Client, a.Config.SchedulerTick)
	// Webhooks are network calls to teams' servers: the outbox's own loop, so a slow webhook
	// never delays the scheduler's leader tick (each replica runs it: claims are fenced).
	go a.Outbox.Run(bgCtx, a.Config.SchedulerTick)
	// Garbage collection walks the whole store: its own loop and its own lock, so it never
	// delays the scheduler's tick.
	go a.Collector.Run(bgCtx, a.Redis.Client, a.Config.GCInterval)
	if ready != nil {
		ready(ln.Addr().String())
	}
	a.Log.Info("listening", "addr", ln.Addr().String(), "url", a.Config.PublicURL)
	// The built-in agent stops before the server does: it reports the ends of its pipelines
	// through this server's API, which must still answer (its own stop is bounded).
	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServing()
	agentErr := make(chan error, 1)
	go func() {
		select {
		case <-ctx.Done():
		case <-serveCtx.Done():
		}
		stopAgent()
		agentErr <- <-agentDone
		stopServing()
	}()
	err = a.Server.Serve(serveCtx, ln, a.Config.ShutdownTimeout)
	stopServing()
	return errors.Join(err, <-agentErr)
}

// Close releases everything New opened, in reverse order.
func (a *App) Close() error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		errs = append(errs, a.closers[i]())
	}
	a.closers = nil
	return errors.Join(errs...)
}

// authorizeJob lets a caller read a job's log when they may read its repo; a job of a repo they
// may not see is a 404, like the repo itself.
func (a *App) authorizeJob(c *gin.Context, jobID int64) error {
	orgName, repoName, err := a.Builds.JobRepo(c.Request.Context(), jobID)
	if err != nil {
		return err
	}
	_, err = a.Repos.Resolve(c.Request.Context(), auth.From(c), orgName, repoName, repo.Read)
	var ae *fault.Error
	if errors.As(err, &ae) && ae.Code == fault.CodeNotFound {
		return fault.NotFound("job %d not found", jobID)
	}
	return err
}

// billingConfig is billing.DefaultConfig with the server's settings applied.
func billingConfig(cfg *config.Config, loc *time.Location) (b billing.Config, err error) {
	b = billing.DefaultConfig()
	b.Currency = cfg.Currency
	b.FreezeInterval = cfg.FreezeInterval
	b.FreezeLeadPercent = cfg.FreezeLead
	if b.FreeCoreSeconds, err = cfg.FreeCoreSeconds(); err != nil {
		return b, err
	}
	if b.FreeWorkspaceCoreSeconds, err = cfg.FreeWorkspaceCoreSeconds(); err != nil {
		return b, err
	}
	b.Location = loc
	prices, err := cfg.Prices()
	if err != nil {
		return b, err
	}
	for class, p := range prices {
		amt, err := billing.ParseAmount(p)
		if err != nil {
			return b, fmt.Errorf("NIMBUS_BILLING_PRICES %s: %w", class, err)
		}
		b.Prices[class] = amt
	}
	return b, nil
}

// newStripe configures top-ups from the server's Stripe settings.
func newStripe(cfg *config.Config, svc *billing.Service, client *http.Client, log *slog.Logger) (*billing.Stripe, error) {
	lo, err := billing.ParseAmount(cfg.TopupMin)
	if err != nil {
		return nil, fmt.Errorf("NIMBUS_TOPUP_MIN: %w", err)
	}
	hi, err := billing.ParseAmount(cfg.TopupMax)
	if err != nil {
		return nil, fmt.Errorf("NIMBUS_TOPUP_MAX: %w", err)
	}
	return billing.NewStripe(svc, billing.StripeConfig{
		SecretKey: cfg.StripeSecretKey, WebhookSecret: cfg.StripeWebhookSecret, APIURL: cfg.StripeAPIURL,
		Min: lo, Max: hi, PublicURL: cfg.PublicURL, HTTPClient: client,
	}, log)
}

// splitList splits a comma-separated setting, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// waitLimit maps NIMBUS_TEAM_RUNNER_WAIT and NIMBUS_QUEUE_TIMEOUT (0 = forever) to the
// scheduler's settings, where 0 takes the default and a negative value waits forever.
func waitLimit(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}
