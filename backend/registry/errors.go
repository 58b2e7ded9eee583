package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/nimbus-build/nimbus/backend/api"
)

// OCI error codes (distribution-spec "Error Codes"). The registry speaks this format, not
// package api's envelope: OCI clients show these messages and switch on these codes.
const (
	CodeBlobUnknown         = "BLOB_UNKNOWN"
	CodeBlobUploadInvalid   = "BLOB_UPLOAD_INVALID"
	CodeBlobUploadUnknown   = "BLOB_UPLOAD_UNKNOWN"
	CodeDigestInvalid       = "DIGEST_INVALID"
	CodeManifestBlobUnknown = "MANIFEST_BLOB_UNKNOWN"
	CodeManifestInvalid     = "MANIFEST_INVALID"
	CodeManifestUnknown     = "MANIFEST_UNKNOWN"
	CodeNameInvalid         = "NAME_INVALID"
	CodeNameUnknown         = "NAME_UNKNOWN"
	CodeSizeInvalid         = "SIZE_INVALID"
	CodeUnauthorized        = "UNAUTHORIZED"
	CodeDenied              = "DENIED"
	CodeUnsupported         = "UNSUPPORTED"
	CodeTooManyRequests     = "TOOMANYREQUESTS"
)

// Error is an OCI error answer: a status and one error of the body.
type Error struct {
	Status  int
	Code    string
	Message string
	// challenge is set on 401s: the scope the client should ask the token endpoint for.
	challenge string
	// header is added to the answer (Location and Range of a 416).
	header http.Header
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

func ociError(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func errNameUnknown(name string) *Error {
	return ociError(http.StatusNotFound, CodeNameUnknown, "repository name not known to registry: %s", name)
}

func errBlobUnknown(d string) *Error {
	return ociError(http.StatusNotFound, CodeBlobUnknown, "blob unknown to registry: %s", d)
}

func errManifestUnknown(ref string) *Error {
	return ociError(http.StatusNotFound, CodeManifestUnknown, "manifest unknown: %s", ref)
}

func errUploadUnknown() *Error {
	return ociError(http.StatusNotFound, CodeBlobUploadUnknown, "blob upload unknown to registry")
}

func errDigestInvalid(format string, args ...any) *Error {
	return ociError(http.StatusBadRequest, CodeDigestInvalid, format, args...)
}

func errManifestInvalid(format string, args ...any) *Error {
	return ociError(http.StatusBadRequest, CodeManifestInvalid, format, args...)
}

// errorBody is {"errors":[{"code","message","detail"}]}.
type errorBody struct {
	Errors []errorEntry `json:"errors"`
}

type errorEntry struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Detail  any    `json:"detail"`
}

// Refuse answers a request the server refuses before it reaches the registry (a URL that is
// not valid UTF-8) in OCI's error format: a 400 is NAME_INVALID, a 404 NAME_UNKNOWN, as the
// registry answers names of the wrong shape itself.
func (h *Handler) Refuse(w http.ResponseWriter, r *http.Request, status int, message string) {
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	code := CodeNameInvalid
	if status == http.StatusNotFound {
		code = CodeNameUnknown
	}
	h.fail(w, r, ociError(status, code, "%s", message))
}

// fail writes err: an *Error as itself, anything else as a logged 500 that reveals nothing.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		if api.ClientGone(r.Context()) {
			// An upload or pull the client gave up on (docker and oras cancel on ^C and retry).
			h.log.DebugContext(r.Context(), "registry request abandoned by its client", "method", r.Method, "path", r.URL.Path, "err", err)
			w.WriteHeader(api.StatusClientClosed)
			return
		}
		h.log.ErrorContext(r.Context(), "registry request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		e = ociError(http.StatusInternalServerError, "INTERNAL", "internal error")
	}
	for k, vs := range e.header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", h.challenge(e.challenge))
	}
	body, _ := json.Marshal(errorBody{Errors: []errorEntry{{Code: e.Code, Message: e.Message, Detail: nil}}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(e.Status)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}
