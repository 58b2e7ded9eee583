package downloads

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

func serve(t *testing.T, h *Handler) *httptest.Server {
	t.Helper()
	gin.SetMode(gin.TestMode)
	r := gin.New()
	h.Routes(r, r.Group("/api/v1"))
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv
}

func TestServesTheCLI(t *testing.T) {
	body := []byte("\x7fELF pretend nimbus binary\n")
	p := filepath.Join(t.TempDir(), "nimbus")
	if err := os.WriteFile(p, body, 0o755); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, New(p, slog.New(slog.NewTextHandler(io.Discard, nil))))
	sum := sha256.Sum256(body)
	want := hex.EncodeToString(sum[:])

	resp, err := http.Get(srv.URL + "/downloads/nimbus-linux-amd64")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(got) != string(body) || resp.Header.Get("X-Checksum-Sha256") != want ||
		!strings.Contains(resp.Header.Get("Content-Disposition"), `filename="nimbus"`) {
		t.Fatalf("download: %d %q %v", resp.StatusCode, got, resp.Header)
	}
	// A range, and a revalidation by ETag.
	req, _ := http.NewRequest("GET", srv.URL+"/downloads/nimbus-linux-amd64", nil)
	req.Header.Set("Range", "bytes=1-3")
	resp, _ = http.DefaultClient.Do(req)
	got, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 206 || string(got) != "ELF" {
		t.Fatalf("range: %d %q", resp.StatusCode, got)
	}
	req, _ = http.NewRequest("GET", srv.URL+"/downloads/nimbus-linux-amd64", nil)
	req.Header.Set("If-None-Match", `"`+want+`"`)
	resp, _ = http.DefaultClient.Do(req)
	resp.Body.Close()
	if resp.StatusCode != 304 {
		t.Fatalf("revalidation: %d", resp.StatusCode)
	}
	resp, _ = http.Get(srv.URL + "/downloads/nimbus-linux-amd64.sha256")
	got, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(got) != want+"  nimbus\n" {
		t.Fatalf("checksum: %d %q", resp.StatusCode, got)
	}
}

func TestNoCLIIsAClear404(t *testing.T) {
	srv := serve(t, New("off", slog.New(slog.NewTextHandler(io.Discard, nil))))
	for _, path := range []string{"/downloads/nimbus-linux-amd64", "/downloads/nimbus-linux-amd64.sha256"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var env struct {
			Error struct {
				Code, Message string
			} `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&env)
		resp.Body.Close()
		if resp.StatusCode != 404 || env.Error.Code != "not_found" || !strings.Contains(env.Error.Message, "NIMBUS_CLI_PATH=off") {
			t.Errorf("%s: %d %+v", path, resp.StatusCode, env)
		}
	}
}
