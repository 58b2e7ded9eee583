package build

import (
	"strconv"
	"strings"
)

// A build's CNB_BUILD_ID is "nimbus-" and its id. Pipelines name things after it (the
// build-scoped artifact versions of package artifacts), so it is made and read here only.
const buildIDPrefix = "nimbus-"

// BuildIDOf is the CNB_BUILD_ID of the build with this id.
func BuildIDOf(id int64) string { return buildIDPrefix + strconv.FormatInt(id, 10) }

// ParseBuildID reads a CNB_BUILD_ID back; ok is false for anything else ("nimbus-01" too: one
// build has one spelling).
func ParseBuildID(s string) (id int64, ok bool) {
	rest, found := strings.CutPrefix(s, buildIDPrefix)
	if !found || rest == "" || rest[0] == '0' || rest[0] == '+' {
		return 0, false
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	return id, err == nil && id > 0
}
