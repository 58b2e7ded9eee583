// Package downloads serves the nimbus CLI from the server itself, so that every place that says
// "run nimbus …" (the artifact instructions, a YAML error's pointer to `nimbus lint`, a job's
// snippet) can link a download that works on the install at hand, without network access to
// anywhere else:
//
//	GET /downloads/nimbus-linux-amd64         the statically linked CLI (Range, HEAD, caching)
//	GET /downloads/nimbus-linux-amd64.sha256  its checksum, as sha256sum prints it
//
// The file is the one NIMBUS_CLI_PATH names, else `nimbus` beside nimbus-server (make build and
// the server image put the three binaries together), else `nimbus` on PATH. Without one both
// routes answer 404 with the error envelope and what to install. Downloads are public: the CLI
// is no secret, and a new user needs it before they have a token.
package downloads

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/fault"
)

// CLIName is the CLI's name under /downloads.
const CLIName = "nimbus-linux-amd64"

// Handler serves the downloads.
type Handler struct {
	path string // "" when there is no CLI to serve
	why  string
	log  *slog.Logger

	mu      sync.Mutex
	sumOf   time.Time // the modification time the cached sum is of
	sum     string
	sumSize int64
}

// New finds the CLI (configured: NIMBUS_CLI_PATH, "" for the default search, "off" for none).
func New(configured string, log *slog.Logger) *Handler {
	h := &Handler{log: log}
	h.path, h.why = find(configured)
	if h.path == "" {
		log.Info("the nimbus CLI is not served at /downloads/"+CLIName, "why", h.why)
	}
	return h
}

// Available says whether the CLI is served.
func (h *Handler) Available() bool { return h.path != "" }

func find(configured string) (string, string) {
	switch configured {
	case "off":
		return "", "turned off (NIMBUS_CLI_PATH=off)"
	case "":
	default:
		if st, err := os.Stat(configured); err != nil || st.IsDir() {
			return "", fmt.Sprintf("NIMBUS_CLI_PATH %s is not a file", configured)
		}
		return configured, ""
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "nimbus")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, ""
		}
	}
	if p, err := exec.LookPath("nimbus"); err == nil {
		return p, ""
	}
	return "", "no nimbus executable beside nimbus-server or on PATH (set NIMBUS_CLI_PATH)"
}

// Routes implements server.Module.
func (h *Handler) Routes(root *gin.Engine, _ *gin.RouterGroup) {
	rs := api.NewRoutes(root.Group("/downloads"), h.log)
	rs.GET("/"+CLIName, h.cli)
	rs.HEAD("/"+CLIName, h.cli)
	rs.GET("/"+CLIName+".sha256", h.checksum)
}

func (h *Handler) open() (*os.File, os.FileInfo, error) {
	if h.path == "" {
		return nil, nil, fault.NotFound("this installation serves no nimbus CLI: %s", h.why)
	}
	f, err := os.Open(h.path)
	if err != nil {
		return nil, nil, fault.NotFound("the nimbus CLI is not readable on this installation: %v", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

func (h *Handler) cli(c *gin.Context) error {
	f, st, err := h.open()
	if err != nil {
		return err
	}
	defer f.Close()
	c.Header("Content-Type", "application/octet-stream")
	c.Header("Content-Disposition", `attachment; filename="nimbus"`)
	c.Header("Cache-Control", "no-cache") // revalidated: an upgrade of the server replaces it
	if sum, err := h.sha256(f, st); err == nil {
		c.Header("ETag", `"`+sum+`"`)
		c.Header("X-Checksum-Sha256", sum)
	}
	http.ServeContent(c.Writer, c.Request, "nimbus", st.ModTime(), f)
	return nil
}

func (h *Handler) checksum(c *gin.Context) error {
	f, st, err := h.open()
	if err != nil {
		return err
	}
	defer f.Close()
	sum, err := h.sha256(f, st)
	if err != nil {
		return err
	}
	c.Header("Content-Type", "text/plain; charset=utf-8")
	c.String(http.StatusOK, "%s  nimbus\n", sum)
	return nil
}

// sha256 is the file's checksum, computed once per version of the file; f is left at its start.
func (h *Handler) sha256(f *os.File, st os.FileInfo) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sum != "" && h.sumOf.Equal(st.ModTime()) && h.sumSize == st.Size() {
		return h.sum, nil
	}
	d := sha256.New()
	if _, err := io.Copy(d, f); err != nil {
		return "", err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	h.sum, h.sumOf, h.sumSize = hex.EncodeToString(d.Sum(nil)), st.ModTime(), st.Size()
	return h.sum, nil
}
