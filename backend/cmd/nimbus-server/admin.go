package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/nimbus-build/nimbus/backend/app"
	"github.com/nimbus-build/nimbus/backend/config"
)

// admin runs operator commands against the database directly:
//
//	nimbus-server admin grant USERNAME    make USERNAME a platform admin
//	nimbus-server admin revoke USERNAME   take the platform-admin flag away
func admin(ctx context.Context, cfg *config.Config, log *slog.Logger, args []string, stdout io.Writer) error {
	if len(args) != 2 || (args[0] != "grant" && args[0] != "revoke") {
		return fmt.Errorf("usage: nimbus-server admin grant|revoke USERNAME")
	}
	cfg.BuiltinAgent = false
	a, err := app.New(ctx, cfg, log, app.Options{})
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.Auth.SetAdmin(ctx, args[1], args[0] == "grant"); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: platform admin = %v\n", args[1], args[0] == "grant")
	return nil
}
