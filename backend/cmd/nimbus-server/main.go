// Command nimbus-server runs the Nimbus server. It reads the configuration and hands it to
// package app, which assembles the process; SIGINT/SIGTERM start a graceful shutdown.
package main

import (
	"context"
	"fmt"
	"io"

	"github.com/nimbus-build/nimbus/backend/app"
	"github.com/nimbus-build/nimbus/backend/config"
	"github.com/nimbus-build/nimbus/backend/reqlog"
	"github.com/nimbus-build/nimbus/backend/store"
	"github.com/nimbus-build/nimbus/internal/envflag"
)

var version = "dev"

func main() { envflag.Main("nimbus-server", run) }

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && (args[0] == "serve" || args[0] == "migrate" || args[0] == "admin") {
		cmd, args = args[0], args[1:]
	}
	cfg, rest, err := config.Load("nimbus-server", args, getenv, stdout)
	if err != nil {
		return err
	}
	log := reqlog.New(stderr, cfg.LogFormat, cfg.LogLevel)
	switch cmd {
	case "migrate":
		if len(rest) > 0 {
			return fmt.Errorf("unexpected arguments %q (see --help)", rest)
		}
		return migrate(ctx, cfg, stdout)
	case "admin":
		return admin(ctx, cfg, log, rest, stdout)
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected arguments %q (see --help)", rest)
	}
	log.Info("nimbus-server starting", "version", version, "listen", cfg.Listen, "all_in_one", cfg.Embedded())
	a, err := app.New(ctx, cfg, log, app.Options{Version: version})
	if err != nil {
		return err
	}
	defer a.Close()
	return a.Serve(ctx, func(string) { fmt.Fprintf(stdout, "Nimbus is running at %s\n", cfg.PublicURL) })
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
