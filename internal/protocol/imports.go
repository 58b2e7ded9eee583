package protocol

// Imports: a job's env files (`imports:`) and the files of `settingsFrom` / `optionsFrom` that
// live in a repository of this install, read by the agent on the pipeline's behalf when the job
// starts (their paths may use variables only known then):
//
//	POST /api/v1/agent/leases/{lease}/imports   ImportRequest → 200 ImportFile
//	     → 403 with code CodeImportRefused: a secret repository's rule refused this pipeline (the
//	       message names the rule); the job, and so the pipeline, fails with it
//	     → 404: no such repo, file or ref, or a private repo of another team
//	     → 400: not a file URL ({host}/{org}/{repo}/-/blob/{ref}/{path}), or a {path} that breaks
//	       the path rule (internal/userpath), the message naming it and the reason
//
// The server checks who may read the file (backend/repo/imports.go: a secret repository's
// allow_* rules, or its admins by default; same-team and public repos freely) and audits every
// read of a secret repository, allowed or not. The agent parses the file (internal/envfile) and
// masks every value of a secret repository's file in the logs. Paths without a URL (`./env.yml`)
// are files of the job's checkout and never reach the server.

// PathImportsSuffix follows /api/v1/agent/leases/{lease}/.
const PathImportsSuffix = "imports"

// CodeImportRefused is the error code of an import a secret repository's rule refused.
const CodeImportRefused = "import_refused"

// Kinds of file references, for ImportRequest.Kind.
const (
	ImportEnv          = "imports"
	ImportSettingsFrom = "settingsFrom"
	ImportOptionsFrom  = "optionsFrom"
)

// ImportRequest asks for one file.
type ImportRequest struct {
	// URL is the reference as the .cnb.yml has it, variables expanded.
	URL string `json:"url"`
	// Kind is how the job uses it (ImportEnv, ImportSettingsFrom, ImportOptionsFrom).
	Kind string `json:"kind"`
	// Image is the image of the job that reads it, for allow_images.
	Image string `json:"image,omitempty"`
	// Job is the job's key, for the audit.
	Job string `json:"job,omitempty"`
}

// ImportFile is the file.
type ImportFile struct {
	// Name is the file's name; its extension says its format.
	Name    string `json:"name"`
	Content string `json:"content"`
	// Secret: it comes from a secret repository, and its values are masked in every log.
	Secret bool `json:"secret,omitempty"`
}
