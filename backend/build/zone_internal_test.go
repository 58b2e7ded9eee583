package build

import (
	"testing"
	"time"
)

// The API names the schedules' zone as browsers' Intl knows it: never Go's "UTC+8".
func TestZoneIDIsABrowserZone(t *testing.T) {
	utc8 := time.FixedZone("UTC+8", 8*3600)
	for _, c := range []struct {
		configured string
		loc        *time.Location
		want       string
	}{
		{"Asia/Shanghai", utc8, "Asia/Shanghai"},
		{"UTC+8", utc8, "Etc/GMT-8"},
		{"", utc8, "Etc/GMT-8"},
		{"UTC-5", time.FixedZone("UTC-5", -5*3600), "Etc/GMT+5"},
		{"UTC", time.UTC, "UTC"},
		{"", time.UTC, "UTC"},
	} {
		if got := zoneID(c.configured, c.loc); got != c.want {
			t.Errorf("zoneID(%q, %s) = %q, want %q", c.configured, c.loc, got, c.want)
		}
	}
}
