// Command nimbus-server runs the Nimbus server. It is the composition root: it reads the
// configuration, opens the database and Redis (or starts the embedded defaults), applies
// migrations, builds the HTTP server with every domain, starts the built-in agent in the
// all-in-one mode, and shuts all of it down gracefully on SIGINT/SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"

	"github.com/nimbus-build/nimbus/agent"
	"github.com/nimbus-build/nimbus/backend/config"
	"github.com/nimbus-build/nimbus/backend/redisconn"
	"github.com/nimbus-build/nimbus/backend/reqlog"
	"github.com/nimbus-build/nimbus/backend/secrets"
	"github.com/nimbus-build/nimbus/backend/server"
	"github.com/nimbus-build/nimbus/backend/store"
	"github.com/nimbus-build/nimbus/frontend"
)

var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nimbus-server:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && (args[0] == "serve" || args[0] == "migrate") {
		cmd, args = args[0], args[1:]
	}
	cfg, rest, err := config.Load("nimbus-server", args, getenv, stdout)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected arguments %q (see --help)", rest)
	}
	log := reqlog.New(stderr, cfg.LogFormat, cfg.LogLevel)
	if cmd == "migrate" {
		return migrate(ctx, cfg, stdout)
	}
	return serve(ctx, cfg, log, stdout)
}

func migrate(ctx context.Context, cfg *config.Config, stdout io.Writer) error {
	db, err := store.Open(ctx, cfg.DatabaseURL, cfg.DataDir)
	if err != nil {
		return err
	}
	defer store.Close(db)
	n, err := store.Migrate(ctx, db)
	if err != nil {
		return err
	}
	cur, _, err := store.Version(ctx, db)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "applied %d migration(s); %s schema is at version %d\n", n, store.Dialect(db), cur)
	return nil
}

func serve(ctx context.Context, cfg *config.Config, log *slog.Logger, stdout io.Writer) error {
	log.Info("nimbus-server starting", "version", version, "listen", cfg.Listen, "all_in_one", cfg.Embedded())
	if _, err := secrets.LoadKey(cfg.DataDir, cfg.SecretKey); err != nil {
		return err
	}
	db, err := store.Open(ctx, cfg.DatabaseURL, cfg.DataDir)
	if err != nil {
		return err
	}
	defer store.Close(db)
	n, err := store.Migrate(ctx, db)
	if err != nil {
		return err
	}
	log.Info("database ready", "dialect", store.Dialect(db), "migrations_applied", n)

	rc, err := redisconn.Connect(ctx, cfg.RedisURL)
	if err != nil {
		return err
	}
	defer rc.Close()
	if rc.Addr != "" {
		log.Info("embedded Redis-protocol server started", "addr", rc.Addr)
	}

	srv := server.New(server.Deps{
		DB: db, Redis: rc.Client, Log: log, Frontend: frontend.Dist(), Version: version,
		ReadyTimeout: cfg.ReadyTimeout,
	})
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}

	agentDone := make(chan error, 1)
	agentCtx, stopAgent := context.WithCancel(ctx)
	defer stopAgent()
	if cfg.BuiltinAgent {
		a, err := agent.New(ctx, agent.Config{
			ServerURL: cfg.PublicURL,
			Tags:      []string{"cnb:arch:default", "cnb:arch:amd64"},
			CPUs:      runtime.NumCPU(),
			Executor:  cfg.AgentExecutor,
			WorkDir:   filepath.Join(cfg.DataDir, "agent"),
		}, log.With("component", "builtin-agent"))
		if err != nil {
			ln.Close()
			return fmt.Errorf("built-in agent: %w", err)
		}
		defer a.Close()
		go func() { agentDone <- a.Run(agentCtx) }()
	} else {
		agentDone <- nil
	}

	fmt.Fprintf(stdout, "Nimbus is running at %s\n", cfg.PublicURL)
	log.Info("listening", "addr", ln.Addr().String(), "url", cfg.PublicURL)
	err = srv.Serve(ctx, ln, cfg.ShutdownTimeout)
	stopAgent()
	return errors.Join(err, <-agentDone)
}
