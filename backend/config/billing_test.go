package config

import (
	"io"
	"testing"
)

// The workspaces' free CPU quota is a setting of its own, beside the builds', read and checked
// the same way.
func TestFreeWorkspaceCoreHours(t *testing.T) {
	load := func(env map[string]string, args ...string) (*Config, error) {
		c, _, err := Load("nimbus-server", append([]string{"--data-dir", t.TempDir()}, args...), envOf(env), io.Discard)
		return c, err
	}
	c, err := load(nil)
	if err != nil {
		t.Fatal(err)
	}
	if ws, err := c.FreeWorkspaceCoreSeconds(); err != nil || ws != 1600*3600 {
		t.Fatalf("default workspace quota %d core-seconds, %v; want 1600 core-hours", ws, err)
	}
	if b, _ := c.FreeCoreSeconds(); b != 160*3600 {
		t.Fatalf("default build quota %d core-seconds", b)
	}
	c, err = load(map[string]string{"NIMBUS_BILLING_FREE_WORKSPACE_CPU_CORE_HOURS": "0.01"})
	if ws, _ := c.FreeWorkspaceCoreSeconds(); err != nil || ws != 36 {
		t.Fatalf("0.01 h from the environment: %d core-seconds, %v", ws, err)
	}
	c, err = load(map[string]string{"NIMBUS_BILLING_FREE_WORKSPACE_CPU_CORE_HOURS": "5"}, "--billing-free-workspace-cpu-core-hours", "0")
	if ws, _ := c.FreeWorkspaceCoreSeconds(); err != nil || ws != 0 {
		t.Fatalf("the flag over the environment: %d core-seconds, %v", ws, err)
	}
	for _, bad := range []string{"-1", "lots", "1e10", " h"} {
		if _, err := load(map[string]string{"NIMBUS_BILLING_FREE_WORKSPACE_CPU_CORE_HOURS": bad}); err == nil {
			t.Errorf("NIMBUS_BILLING_FREE_WORKSPACE_CPU_CORE_HOURS=%q accepted", bad)
		}
	}
}
