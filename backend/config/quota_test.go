package config

import (
	"io"
	"testing"
)

func TestStorageQuota(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "1500": 1500, "10KB": 10_000, "10 KiB": 10 << 10, "2MiB": 2 << 20, "3GB": 3e9, "50GiB": 50 << 30,
		"1TiB": 1 << 40, "7B": 7,
	} {
		c := &Config{StorageQuota: in}
		if got, err := c.Quota(); err != nil || got != want {
			t.Errorf("Quota(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1.5GiB", "ten", "GiB", "1PB", "99999999999TiB"} {
		if _, err := (&Config{StorageQuota: in}).Quota(); err == nil {
			t.Errorf("Quota(%q) accepted", in)
		}
	}
	env := map[string]string{"NIMBUS_STORAGE_QUOTA": "lots"}
	if _, _, err := Load("nimbus-server", []string{"--data-dir", t.TempDir()}, func(k string) string { return env[k] }, io.Discard); err == nil {
		t.Error("an invalid NIMBUS_STORAGE_QUOTA was accepted")
	}
	env = map[string]string{"NIMBUS_STORAGE_QUOTA": "1GiB", "NIMBUS_GC_INTERVAL": "10m"}
	c, _, err := Load("nimbus-server", []string{"--data-dir", t.TempDir()}, func(k string) string { return env[k] }, io.Discard)
	if err != nil || c.GCInterval.Minutes() != 10 {
		t.Fatalf("load: %+v %v", c, err)
	}
	if q, _ := c.Quota(); q != 1<<30 {
		t.Errorf("quota %d", q)
	}
}
