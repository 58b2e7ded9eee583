// Package httpuse is CheckHTTP's test case: a service file that speaks HTTP (every line marked
// "flagged" is a violation), a client that may use net/http, and a handler file that may do all.
package httpuse

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin" // flagged

	"github.com/nimbus-build/nimbus/backend/api" // flagged
)

var _ gin.HandlerFunc
var _ api.Page

func find() (int, error) {
	return http.StatusNotFound, errors.New("no") // flagged
}

// answer writes a response with plain numbers, no constant named: still a status, still flagged.
func answer(w http.ResponseWriter, missing bool) {
	if missing {
		http.Error(w, "no such thing", 404) // flagged
		return
	}
	w.WriteHeader(204) // flagged
}
