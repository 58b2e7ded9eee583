package app

import (
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/backend/config"
	"github.com/nimbus-build/nimbus/backend/pipeline/spec"
)

// The admin area shows where the services are, never their credentials.
func TestInstallSettingsHideCredentials(t *testing.T) {
	cfg := &config.Config{DatabaseURL: "postgres://nimbus:db-secret@db.internal:5432/nimbus", RedisURL: "redis://:redis-secret@cache:6379/0",
		StripeSecretKey: "sk_live_secret", RegistrationToken: "reg-secret", SMTPAddr: "mail:25", SMTPPassword: "smtp-secret",
		TopupMin: "10", TopupMax: "1000", Currency: "CNY", Storage: "local", Limits: spec.Limits{Pipelines: 12, BuildJobs: 34, Stages: 5, Jobs: 6}}
	got := map[string]string{}
	for _, s := range installSettings(cfg, "v1") {
		for _, v := range []string{s.Value, s.Note} {
			if strings.Contains(v, "secret") {
				t.Errorf("%s shows a credential: %q", s.Name, v)
			}
		}
		got[s.Name] = s.Value
	}
	if got["Database"] != "PostgreSQL at db.internal:5432" || got["Redis"] != "Redis at cache:6379" || got["Top-ups"] != "Stripe" ||
		got["Mail"] != "SMTP at mail:25" || got["Agent registration token"] != "set" || got["Queue timeout"] != "never" ||
		got["Pipelines a build"] != "12" || got["Jobs a build"] != "34" || got["Stages a pipeline"] != "5" || got["Jobs a pipeline"] != "6" {
		t.Errorf("settings %v", got)
	}
}
