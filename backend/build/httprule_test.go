package build_test

import (
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/backend/internal/layering"
)

// handlerFile says whether a file may import gin or backend/api and name net/http's status
// codes: a file named http.go, http_*.go or *_http.go, or any file of an edge package. Those
// speak HTTP in every file: the edge itself (api, server, and apiclient, its Go client), the composition root (app), the
// binaries (cmd), and the packages that implement an HTTP protocol of their own — registry
// (OCI distribution), git (smart HTTP) and artifacts/storage (an S3 client and range serving).
// backend/fault's doc says the same.
func handlerFile(pkg, file string) bool {
	if file == "http.go" || strings.HasPrefix(file, "http_") || strings.HasSuffix(file, "_http.go") {
		return true
	}
	for _, e := range []string{"api", "apiclient", "server", "app", "cmd", "registry", "git", "artifacts/storage"} {
		if p := module + "/backend/" + e; pkg == p || strings.HasPrefix(pkg, p+"/") {
			return true
		}
	}
	return false
}

// checkHTTP: service code says what went wrong with a backend/fault kind and never sees a
// status code, so outside handler files no backend file imports gin or backend/api, names
// an http.Status… constant, calls http.Error, NotFound or Redirect, or writes a status with
// WriteHeader (net/http itself may serve a client). Test files may: they assert
// on what the edge answers. On the tree before faults (main at d14a85c) it found 90
// places in 44 files.
func checkHTTP(t *testing.T, code *layering.Code) {
	t.Helper()
	framework := []string{"github.com/gin-gonic/gin", module + "/backend/api"}
	for _, u := range layering.CheckHTTP(code, framework, func(pkg, file string) bool {
		return !strings.HasPrefix(pkg, module+"/backend/") || handlerFile(pkg, file)
	}) {
		t.Error(u)
	}
}
