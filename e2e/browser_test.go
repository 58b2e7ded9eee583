package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/internal/testenv"
)

// chromium returns Debian's Chromium, which make test installs; missing it fails under CI.
func chromium(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if testenv.CI() {
			t.Fatal("chromium is not installed (make test installs it with apt)")
		}
		t.Skip("chromium is not installed; run make test")
	}
	return path
}

// The embedded dashboard loads in a real headless browser and reaches the API: the page's
// script fetches /api/v1/version and renders it.
func TestDashboardRendersInChromium(t *testing.T) {
	browser := chromium(t)
	if _, err := os.Stat(filepath.Join("..", "frontend", "dist", "index.html")); err != nil {
		if testenv.CI() {
			t.Fatal("frontend/dist is not built; make test builds it first")
		}
		t.Skip("frontend/dist is not built; run make build")
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	p := start(t, dir, []string{"NIMBUS_LISTEN=" + addr, "NIMBUS_BUILTIN_AGENT=false"}, "nimbus-server")
	waitReady(t, "http://"+addr, p, 30*time.Second)
	if status, body := get(t, "http://"+addr+"/"); status != 200 || !strings.Contains(body, `<div id="root">`) {
		if testenv.CI() {
			t.Fatalf("the server binary was built without the dashboard (status %d)", status)
		}
		t.Skipf("this server binary was built without the dashboard (status %d); build with make build", status)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+filepath.Join(home, "profile"), "--virtual-time-budget=10000", "--dump-dom", "http://"+addr+"/")
	cmd.Env = []string{"HOME=" + home, "XDG_CONFIG_HOME=" + home, "XDG_CACHE_HOME=" + home, "PATH=" + os.Getenv("PATH")}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	dom := string(out)
	if !strings.Contains(dom, "Server version") {
		t.Fatalf("the dashboard did not render the server version:\n%s", dom)
	}
}
