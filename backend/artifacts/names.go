package artifacts

import (
	"regexp"
	"strings"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/internal/userpath"
)

// Latest, as a version in a URL, names the package's newest version. No version may be called
// that.
const Latest = "latest"

// Names are URL path segments, appear in shell commands and are the names files get on disk
// when they are pulled. Each is one segment under the path rule (internal/userpath: checkNames
// refuses what breaks it first, as a 400 that says why), in a smaller alphabet: letters, digits
// and a few separators, starting with a letter or digit (never "." or "-": no hidden files, no
// options; a file may start with "_"). The alphabets are stricter than the path rule everywhere
// (no slash, backslash, control character or leading "."), so a name one accepts is a valid
// segment too. Case is kept and matters. Inside a name, dots are free: "bert..v2.bin" is a
// name, ".." is not.
var (
	packageRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)
	versionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$`)
	fileRE    = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._+-]{0,254}$`)
)

// checkNames validates the names of a file to upload: a 400 naming the name and the reason
// when one breaks the path rule, else a 422 naming the field when one is outside its alphabet.
func checkNames(pkg, version, file string) error {
	for _, name := range []string{pkg, version, file} {
		if err := userpath.Name(name); err != nil {
			return err
		}
	}
	switch {
	case !packageRE.MatchString(pkg):
		return fault.Invalid("package", "a package name is 1–100 letters, digits, '.', '-' or '_' and starts with a letter or digit")
	case !versionRE.MatchString(version) || strings.EqualFold(version, Latest):
		return fault.Invalid("version", "a version is 1–128 letters, digits, '.', '+', '-' or '_', starts with a letter or digit and is not %q", Latest)
	case !fileRE.MatchString(file):
		return fault.Invalid("file", "a file name is 1–255 letters, digits, '.', '+', '-' or '_' and starts with a letter, digit or '_'")
	}
	return nil
}

// validRef reports whether the names of a read are well-formed (version may be "latest");
// reads of malformed names are 404s, like names that do not exist.
func validRef(pkg, version, file string) bool {
	return (packageRE.MatchString(pkg) || pkg == ReleasePackage) && (version == Latest || versionRE.MatchString(version)) &&
		(file == "" || fileRE.MatchString(file))
}
