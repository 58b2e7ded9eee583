package git

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// CheckRefName returns nil when ref (a full name: "refs/heads/main", "refs/tags/v1") may be
// pushed, else an error that says why, in words a person pushing can act on.
//
// The rule is git's own (git check-ref-format) plus one of Nimbus's: the name must be valid
// UTF-8. git allows any byte in a ref name, but a branch or tag name is also a value in the
// database (builds, schedules, the dashboard's URLs), and PostgreSQL refuses text that is not
// UTF-8; such a push used to succeed and then fire nothing. GitHub and GitLab show branch
// names as text too, and git's own receive-pack refuses names outside the rest of the rule
// ("funny refname"), so a client sees one consistent refusal for both.
func CheckRefName(ref string) error {
	if !utf8.ValidString(ref) {
		return errors.New("the name is not valid UTF-8")
	}
	if !strings.HasPrefix(ref, "refs/") {
		return errors.New("the name is not under refs/")
	}
	switch {
	case ref == "@", strings.Contains(ref, "@{"):
		return errors.New(`the name may not be "@" or contain "@{"`)
	case strings.Contains(ref, ".."):
		return errors.New(`the name may not contain ".."`)
	case strings.HasSuffix(ref, "/"), strings.HasSuffix(ref, "."):
		return errors.New(`the name may not end with "/" or "."`)
	}
	for _, c := range ref {
		if c < ' ' || c == 0x7f || strings.ContainsRune(" ~^:?*[\\", c) {
			return errors.New(`the name may not contain control characters, spaces or any of ~ ^ : ? * [ \`)
		}
	}
	for _, part := range strings.Split(ref, "/") {
		switch {
		case part == "":
			return errors.New(`the name may not contain "//"`)
		case strings.HasPrefix(part, "."):
			return errors.New(`no part of the name may start with "."`)
		case strings.HasSuffix(part, ".lock"):
			return errors.New(`no part of the name may end with ".lock"`)
		}
	}
	return nil
}
