// Package registry serves the OCI distribution API (v1.1) at /v2/: image and artifact pushes
// and pulls for docker, oras, helm and every other OCI client, the referrers API, deletes, and
// the Docker-style token endpoint they log in through.
//
// Repository names are {org}/{repo} and {org}/{repo}/{name}, in lower case: the Nimbus repo
// (matched case-insensitively) owns them, and who may pull, push or delete is what package repo
// says about that repo (ResolveRegistry). Blob bytes are in the artifact store (package
// artifacts/storage), shared by every repository and keyed by digest; the database says which
// repository holds which blob, manifest and tag.
//
// The registry answers in OCI's error format ({"errors":[{"code":"BLOB_UNKNOWN",…}]}), not in
// Nimbus's API envelope: OCI clients parse it. See README.md for the flow of a push and the
// authorization rules.
package registry
