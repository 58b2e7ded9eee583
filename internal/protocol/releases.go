package protocol

// Releases: the git:release task and the cnbcool/attachments plugin, which the agent runs
// itself, create a release of the pipeline's repo and publish its files with the pipeline's job
// token through the public API (backend/artifacts/releases.go), as any client with that token
// could:
//
//	PUT /api/v1/repos/{org}/{repo}/releases/{tag}               ReleaseRequest → 200/201 Release
//	PUT /api/v1/repos/{org}/{repo}/releases/{tag}/files/{file}  raw bytes, X-Checksum-Sha256
//	GET /api/v1/repos/{org}/{repo}/releases/{tag}               Release

// ReleaseRequest creates or updates a release.
type ReleaseRequest struct {
	Title      string `json:"title"`
	Notes      string `json:"notes"`
	PreRelease bool   `json:"pre_release"`
	Latest     *bool  `json:"latest,omitempty"`
	Overlying  bool   `json:"overlying"`
}

// Release is the part of a release the agent reads back.
type Release struct {
	Tag   string        `json:"tag"`
	Title string        `json:"title"`
	Files []ReleaseFile `json:"files"`
}

// ReleaseFile is a file of a release.
type ReleaseFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	Digest string `json:"digest"`
}
