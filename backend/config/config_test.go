package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/pipeline/spec"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadDefaults(t *testing.T) {
	c, rest, err := Load("nimbus-server", nil, envOf(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != 0 {
		t.Fatalf("rest = %v", rest)
	}
	if c.Listen != "127.0.0.1:8080" || c.PublicURL != "http://127.0.0.1:8080" || !filepath.IsAbs(c.DataDir) || filepath.Base(c.DataDir) != "data" {
		t.Fatalf("defaults: %+v", c)
	}
	if !c.Embedded() || !c.BuiltinAgent || c.AgentExecutor != "auto" {
		t.Fatalf("all-in-one defaults: %+v", c)
	}
}

func TestLoadPrecedenceAndDerived(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		check func(*Config) string
	}{
		{"env sets listen and derives public url from it", nil, map[string]string{"NIMBUS_LISTEN": "0.0.0.0:9000"},
			func(c *Config) string {
				if c.PublicURL != "http://127.0.0.1:9000" {
					return c.PublicURL
				}
				return ""
			}},
		{"flag beats env", []string{"--listen", "127.0.0.1:7000"}, map[string]string{"NIMBUS_LISTEN": "127.0.0.1:9000"},
			func(c *Config) string {
				if c.Listen != "127.0.0.1:7000" {
					return c.Listen
				}
				return ""
			}},
		{"external services turn the builtin agent off", nil,
			map[string]string{"NIMBUS_DATABASE_URL": "postgres://u@h/db", "NIMBUS_REDIS_URL": "redis://h:6379"},
			func(c *Config) string {
				if c.BuiltinAgent || c.Embedded() {
					return "builtin agent on with external services"
				}
				return ""
			}},
		{"explicit builtin agent wins", nil,
			map[string]string{"NIMBUS_DATABASE_URL": "postgres://u@h/db", "NIMBUS_BUILTIN_AGENT": "true"},
			func(c *Config) string {
				if !c.BuiltinAgent {
					return "builtin agent off"
				}
				return ""
			}},
		{"public url trailing slash trimmed", nil, map[string]string{"NIMBUS_PUBLIC_URL": "https://ci.example.com/"},
			func(c *Config) string {
				if c.PublicURL != "https://ci.example.com" {
					return c.PublicURL
				}
				return ""
			}},
		{"build limits default to spec's and are set one by one", []string{"--pipeline-max-stages", "7"},
			map[string]string{"NIMBUS_BUILD_MAX_PIPELINES": "10", "NIMBUS_BUILD_MAX_JOBS": "50", "NIMBUS_PIPELINE_MAX_JOBS": "20"},
			func(c *Config) string {
				def := spec.DefaultLimits()
				if c.Limits != (spec.Limits{Pipelines: 10, BuildJobs: 50, Stages: 7, Jobs: 20}) || def.Stages == 7 {
					return fmt.Sprintf("%+v", c.Limits)
				}
				if d, _, _ := Load("nimbus-server", nil, envOf(nil), io.Discard); d.Limits != def {
					return fmt.Sprintf("defaults %+v", d.Limits)
				}
				return ""
			}},
		{"duration from env", nil, map[string]string{"NIMBUS_SHUTDOWN_TIMEOUT": "5s"},
			func(c *Config) string {
				if c.ShutdownTimeout != 5*time.Second {
					return c.ShutdownTimeout.String()
				}
				return ""
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, err := Load("nimbus-server", tt.args, envOf(tt.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if msg := tt.check(c); msg != "" {
				t.Fatalf("unexpected: %s", msg)
			}
		})
	}
}

func TestLoadRejectsBadValues(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"NIMBUS_LISTEN": "nope"}, "NIMBUS_LISTEN"},
		{map[string]string{"NIMBUS_DATABASE_URL": "mysql://x"}, "NIMBUS_DATABASE_URL"},
		{map[string]string{"NIMBUS_REDIS_URL": "http://x"}, "NIMBUS_REDIS_URL"},
		{map[string]string{"NIMBUS_BUILTIN_AGENT": "maybe"}, "NIMBUS_BUILTIN_AGENT"},
		{map[string]string{"NIMBUS_AGENT_EXECUTOR": "podman"}, "NIMBUS_AGENT_EXECUTOR"},
		{map[string]string{"NIMBUS_PUBLIC_URL": "ftp://x"}, "NIMBUS_PUBLIC_URL"},
		{map[string]string{"NIMBUS_SHUTDOWN_TIMEOUT": "soon"}, "NIMBUS_SHUTDOWN_TIMEOUT"},
		{map[string]string{"NIMBUS_LOG_LEVEL": "loud"}, "NIMBUS_LOG_LEVEL"},
		{map[string]string{"NIMBUS_BUILD_MAX_PIPELINES": "0"}, "NIMBUS_BUILD_MAX_PIPELINES"},
		{map[string]string{"NIMBUS_PIPELINE_MAX_JOBS": "-1"}, "NIMBUS_PIPELINE_MAX_JOBS"},
	}
	for _, tt := range tests {
		_, _, err := Load("nimbus-server", nil, envOf(tt.env), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("env %v: err = %v, want mention of %s", tt.env, err, tt.want)
		}
	}
}

func TestHelpListsEveryFlagWithItsVariable(t *testing.T) {
	var out strings.Builder
	_, _, err := Load("nimbus-server", []string{"--help"}, envOf(nil), &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v", err)
	}
	for _, v := range []string{"NIMBUS_LISTEN", "NIMBUS_PUBLIC_URL", "NIMBUS_DATA_DIR", "NIMBUS_DATABASE_URL",
		"NIMBUS_REDIS_URL", "NIMBUS_SECRET_KEY", "NIMBUS_BUILTIN_AGENT", "NIMBUS_AGENT_EXECUTOR", "--listen", "migrate",
		"NIMBUS_BUILD_MAX_PIPELINES", "NIMBUS_BUILD_MAX_JOBS", "NIMBUS_PIPELINE_MAX_STAGES", "NIMBUS_PIPELINE_MAX_JOBS"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("--help lacks %s:\n%s", v, out.String())
		}
	}
}
