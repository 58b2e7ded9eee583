// Package frontend embeds the built dashboard (frontend/dist, produced by `make build` with Vite)
// so nimbus-server ships as one binary. A fresh clone holds only dist/.gitkeep; the server then
// serves a placeholder page that says how to build the dashboard.
package frontend

import (
	"embed"
	"io/fs"
)

//go:embed all:dist
var dist embed.FS

// Dist returns the built dashboard's files, index.html at the root.
func Dist() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		// fs.Sub fails only for an invalid path; "dist" is a constant valid one.
		return dist
	}
	return sub
}
