package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestHelpListsEveryFlagWithItsVariable(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"--help"}, func(string) string { return "" }, &out, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"--server", "NIMBUS_SERVER_URL", "--token", "NIMBUS_AGENT_TOKEN", "--name", "NIMBUS_AGENT_NAME",
		"--concurrency", "NIMBUS_AGENT_CONCURRENCY", "--gpus", "NIMBUS_AGENT_GPUS", "--default-image",
		"NIMBUS_AGENT_DEFAULT_IMAGE", "cnbcool/default-build-env:latest", "--work-dir", "NIMBUS_AGENT_WORK_DIR"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

func TestBadSettingsAreRefused(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"NIMBUS_AGENT_GPUS": "all"}, "NIMBUS_AGENT_GPUS"},
		{map[string]string{"NIMBUS_AGENT_CONCURRENCY": "-1"}, "NIMBUS_AGENT_CONCURRENCY"},
		{map[string]string{"NIMBUS_AGENT_CPUS": "0"}, "NIMBUS_AGENT_CPUS"},
		{map[string]string{"NIMBUS_AGENT_CONCURRENCY": "x"}, "NIMBUS_AGENT_CONCURRENCY"},
	} {
		var out bytes.Buffer
		err := run(context.Background(), nil, func(k string) string { return tt.env[k] }, &out, &out)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err = %v", tt.env, err)
		}
	}
}

func TestATokenIsRequiredBeforeTheFirstRegistration(t *testing.T) {
	env := map[string]string{"NIMBUS_AGENT_EXECUTOR": "shell", "NIMBUS_AGENT_GPUS": "none", "NIMBUS_AGENT_WORK_DIR": t.TempDir()}
	var out bytes.Buffer
	err := run(context.Background(), nil, func(k string) string { return env[k] }, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "registration token is required") {
		t.Fatalf("err = %v", err)
	}
}
