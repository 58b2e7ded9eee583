package server

import (
	"errors"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/nimbus-build/nimbus/backend/fault"
)

// placeholderPage is served when the binary was built without the dashboard (`go build` without
// `make build`), so the server still says what it is instead of a bare 404.
const placeholderPage = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Nimbus</title></head>
<body><main><h1>Nimbus</h1><p>The server is running, but this binary was built without the dashboard.
Run <code>make build</code> to embed it. The API is at <a href="/api/v1/version">/api/v1</a>.</p></main></body></html>`

// noRoute hands git and registry paths to their handlers, answers unknown /api paths with the
// error envelope and everything else with the dashboard: a real file when one exists, else index.html so client-side routes survive a reload.
func (s *Server) noRoute(c *gin.Context) {
	p := c.Request.URL.Path
	if s.deps.Git != nil && isGitPath(p) {
		s.deps.Git.ServeHTTP(c.Writer, c.Request)
		return
	}
	if s.deps.Registry != nil && isRegistryPath(p) {
		s.deps.Registry.ServeHTTP(c.Writer, c.Request)
		return
	}
	if p == "/api" || strings.HasPrefix(p, "/api/") || (c.Request.Method != http.MethodGet && c.Request.Method != http.MethodHead) {
		s.fail(c, fault.NotFound("no route for %s %s", c.Request.Method, p))
		return
	}
	fsys := s.deps.Frontend
	if fsys == nil {
		servePlaceholder(c)
		return
	}
	name := strings.TrimPrefix(path.Clean(p), "/")
	if name != "" {
		if st, err := fs.Stat(fsys, name); err == nil && !st.IsDir() {
			if strings.HasPrefix(name, "assets/") {
				// Vite fingerprints asset names, so they never change under one name.
				c.Header("Cache-Control", "public, max-age=31536000, immutable")
			}
			c.FileFromFS(name, http.FS(fsys))
			return
		}
	}
	index, err := fs.ReadFile(fsys, "index.html")
	if errors.Is(err, fs.ErrNotExist) {
		servePlaceholder(c)
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-cache")
	c.Data(http.StatusOK, "text/html; charset=utf-8", index)
}

// isGitPath reports whether p is under /{org}/{repo}.git/, git's smart HTTP namespace. The git
// handler validates the names itself.
func isGitPath(p string) bool {
	parts := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 3)
	return len(parts) == 3 && strings.HasSuffix(parts[1], ".git")
}

// isRegistryPath reports whether p is under /v2, the OCI registry's namespace.
func isRegistryPath(p string) bool { return p == "/v2" || strings.HasPrefix(p, "/v2/") }

func servePlaceholder(c *gin.Context) {
	c.Data(http.StatusOK, "text/html; charset=utf-8", []byte(placeholderPage))
}
