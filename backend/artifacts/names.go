package artifacts

import (
	"regexp"
	"strings"

	"github.com/nimbus-build/nimbus/backend/api"
)

// Latest, as a version in a URL, names the package's newest version. No version may be called
// that.
const Latest = "latest"

// Names are URL path segments, appear in shell commands and are the names files get on disk
// when they are pulled, so they are strict: letters, digits and a few separators, starting with
// a letter or digit (never "." or "-": no hidden files, no options), no "..", no slash or
// backslash. Case is kept and matters.
var (
	packageRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)
	versionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$`)
	fileRE    = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._+-]{0,254}$`)
)

// validName reports whether s matches re and holds no "..".
func validName(re *regexp.Regexp, s string) bool {
	return re.MatchString(s) && !strings.Contains(s, "..")
}

// checkNames validates the names of a file to upload (422 naming the field).
func checkNames(pkg, version, file string) error {
	switch {
	case !validName(packageRE, pkg):
		return api.Invalid("package", "a package name is 1–100 letters, digits, '.', '-' or '_', starts with a letter or digit and holds no '..'")
	case !validName(versionRE, version) || strings.EqualFold(version, Latest):
		return api.Invalid("version", "a version is 1–128 letters, digits, '.', '+', '-' or '_', starts with a letter or digit, holds no '..' and is not %q", Latest)
	case !validName(fileRE, file):
		return api.Invalid("file", "a file name is 1–255 letters, digits, '.', '+', '-' or '_', starts with a letter, digit or '_' and holds no '..'")
	}
	return nil
}

// validRef reports whether the names of a read are well-formed (version may be "latest");
// reads of malformed names are 404s, like names that do not exist.
func validRef(pkg, version, file string) bool {
	return (validName(packageRE, pkg) || pkg == ReleasePackage) && (version == Latest || validName(versionRE, version)) &&
		(file == "" || validName(fileRE, file))
}
