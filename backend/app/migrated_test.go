package app

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/backend/config"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// The tests start the app on databases copied from storetest's templates; the app must take
// them as they are, finding every migration applied, on both dialects.
func TestAppStartsOnATemplateCopyWithoutMigrating(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  func(t testing.TB) string
	}{
		{"sqlite", func(testing.TB) string { return "" }},
		{"postgres", storetest.PostgresURL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbURL := tc.url(t)
			args := []string{"--data-dir", storetest.DataDir(t, dbURL), "--builtin-agent", "false"}
			if dbURL != "" {
				args = append(args, "--database-url", dbURL)
			}
			cfg, _, err := config.Load("nimbus-server", args, func(string) string { return "" }, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			a, err := New(context.Background(), cfg, slog.New(slog.NewTextHandler(&logs, nil)), Options{})
			if err != nil {
				t.Fatal(err)
			}
			a.Close()
			if want := "dialect=" + tc.name + " migrations_applied=0"; !strings.Contains(logs.String(), want) {
				t.Fatalf("no %q in the log:\n%s", want, logs.String())
			}
		})
	}
}
