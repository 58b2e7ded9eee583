// Package imagebuild makes the environment images of docker.build and of the built-in task
// docker:cache: it versions an image by the content it is built from, reuses it when the engine
// or the registry already has that version, and otherwise builds it on the agent's Docker
// engine and pushes it, so that the next pipeline, on any agent, pulls instead of building.
//
// The package is the agent's and knows nothing of pipelines: the runner turns docker.build or
// the task's options into a Spec, names the image and hands over the credentials (see
// agent/runner/envimage.go). README.md explains the version hash and the order of reuse.
package imagebuild

import (
	"fmt"
	"slices"

	"github.com/nimbus-build/nimbus/internal/userpath"
)

// Spec is what an image is built from. Paths are relative to the checkout, with slashes.
type Spec struct {
	// Dockerfile is required.
	Dockerfile string
	// Target is the stage of a multi-stage Dockerfile to build; "" = the last.
	Target string
	// By are the files and folders the build sees besides the Dockerfile: nothing else of the
	// checkout is in the build context.
	By []string
	// VersionBy are the files and folders the version depends on; By when empty.
	VersionBy []string
	// BuildArgs are passed as --build-arg and, unless IgnoreBuildArgsInVersion, versioned.
	BuildArgs                map[string]string
	IgnoreBuildArgsInVersion bool
}

// versionBy is what the version hashes besides the Dockerfile.
func (s Spec) versionBy() []string {
	if len(s.VersionBy) > 0 {
		return s.VersionBy
	}
	return s.By
}

// cleanPath turns a user's path into the slash-separated path of fs.FS ("." is the checkout
// itself), by the path rule (internal/userpath.Clean). An absolute path or one that leaves the
// checkout is refused: the build must never see the agent's own files.
func cleanPath(what, p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("%s: empty path", what)
	}
	c, err := userpath.Clean(p)
	if err != nil {
		return "", fmt.Errorf("%s: %w: the path must be relative to the workspace and stay inside it", what, err)
	}
	return c, nil
}

// cleanPaths cleans a list, drops duplicates and sorts it, so neither order nor spelling
// ("./a", "a/") changes what a list means.
func cleanPaths(what string, ps []string) ([]string, error) {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		c, err := cleanPath(what, p)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
