// Package artifacts holds the generic files of a repo (model weights, tokenizers, datasets:
// package → version → files, at /api/v1/repos/{org}/{repo}/artifacts/…) and what the files and
// the OCI registry (package registry) share about stored bytes: each team's storage usage and
// quota (Blobs) and the garbage collector that removes blobs nothing references (Collector).
//
// The bytes live in the content-addressed store (package artifacts/storage); a file is a name
// for a blob in a version. Uploads stream into the store and are verified against the client's
// checksum; published files never change (another upload of other bytes is a 409) until they
// are deleted; a version pushed with a pipeline's job token records that pipeline, its build and
// its commit. Downloads serve Range and If-Range with the digest as ETag, so clients resume.
//
// Authorization is the registry's (repo.ResolveRegistry): registry:read to read, registry:write
// to push (developers, the repo's own job token) and to delete (admins). See README.md.
package artifacts
