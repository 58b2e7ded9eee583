// Package userpath is the one rule for a path that a user or a pipeline names: the path of a
// secret repository's file, the file an import reads from a repository, an include the CLI
// reads, a model or release file's name, a file of a job's checkout that the agent reads or
// uploads. The server and the agent both check paths with it, so a path means the same thing,
// and is refused for the same reason, wherever it is named.
//
// A path follows the rule when it is
//
//   - not empty, valid UTF-8, at most MaxLen bytes;
//   - free of control characters (Unicode category Cc: NUL, tab, newline, ESC, DEL, C1);
//   - slash-separated: no backslash, which is a separator on Windows and an escape in globs;
//   - relative: no leading "/";
//   - made of segments that are neither empty (no "//", no trailing "/"), nor "." nor "..",
//     and at most MaxSegment bytes each.
//
// Everything else is allowed: spaces, letters of any script, dots inside or at the start of a
// segment (".env", "a..b", "v1.2"), nested folders ("models/bert/config.json"). Callers may be
// stricter about names (an artifact's file name is also a URL segment with a smaller alphabet),
// never looser.
//
// Check and Name refuse; they never repair. A stored path is the path the user wrote, so
// "a//b.yml" is not quietly stored as "a/b.yml", nor "/etc/x.yml" as "etc/x.yml": either would
// make two spellings name one file, and the second one surprising. Clean is for paths of a
// file system the caller controls (a job's checkout), where "./env.yml" and "env.yml" are the
// same file by definition: it normalizes first and checks what comes out.
//
// It lives under agent/ because agent packages may never import backend packages, while the
// backend may import this one.
package userpath

import (
	"fmt"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	// MaxLen bounds a whole path, in bytes.
	MaxLen = 1024
	// MaxSegment bounds one segment (a file or folder name), in bytes: what common file
	// systems allow.
	MaxSegment = 255
	// shown bounds how much of a refused path an Error keeps, so an error about a huge path
	// stays small.
	shown = 256
)

// Error is a path the rule refuses, and why.
type Error struct {
	// Path is the refused path, cut to its first 256 bytes when longer.
	Path string
	// Reason completes a sentence that starts with the path: `has a ".." segment`.
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("path %q %s", e.Path, e.Reason) }

func refuse(p, format string, args ...any) *Error {
	if len(p) > shown {
		p = p[:shown]
	}
	return &Error{Path: p, Reason: fmt.Sprintf(format, args...)}
}

// Check returns nil when p follows the rule, and an *Error saying what breaks it otherwise.
func Check(p string) error {
	if e := check(p); e != nil {
		return e
	}
	return nil
}

func check(p string) *Error {
	if e := checkText(p); e != nil {
		return e
	}
	if strings.HasPrefix(p, "/") {
		return refuse(p, `starts with "/" (paths are relative)`)
	}
	for seg := range strings.SplitSeq(p, "/") {
		switch {
		case seg == "":
			return refuse(p, `has an empty segment ("//" or a "/" at the end)`)
		case seg == "." || seg == "..":
			return refuse(p, "has a %q segment", seg)
		case len(seg) > MaxSegment:
			return refuse(p, "has a segment of %d bytes (at most %d)", len(seg), MaxSegment)
		}
	}
	return nil
}

// Name is Check for a name that is one segment: a file of a flat listing, a version, a tag.
func Name(s string) error {
	if e := check(s); e != nil {
		return e
	}
	if strings.Contains(s, "/") {
		return refuse(s, `holds a "/" (a name is one segment, without folders)`)
	}
	return nil
}

// Clean normalizes p lexically (path.Clean: "./a//b/" is "a/b", "a/../b" is "b") and checks
// the result: for a path of a file system the caller controls, where spellings of one file are
// the same file. It returns "." when p names the folder it is relative to; whether that is
// acceptable is the caller's to say. A path that climbs out of that folder is refused.
func Clean(p string) (string, error) {
	if e := checkText(p); e != nil {
		return "", e
	}
	c := path.Clean(p)
	switch {
	case c == ".":
		return c, nil
	case c == ".." || strings.HasPrefix(c, "../"):
		return "", refuse(p, "leads out of the folder it is relative to")
	}
	if e := check(c); e != nil {
		return "", refuse(p, "%s", e.Reason)
	}
	return c, nil
}

// checkText is the part of the rule about the characters of p, whatever its segments.
func checkText(p string) *Error {
	switch {
	case p == "":
		return refuse(p, "is empty")
	case !utf8.ValidString(p):
		return refuse(p, "is not valid UTF-8")
	case len(p) > MaxLen:
		return refuse(p, "is %d bytes long (at most %d)", len(p), MaxLen)
	}
	for _, r := range p {
		switch {
		case unicode.IsControl(r):
			return refuse(p, "holds a control character (%U)", r)
		case r == '\\':
			return refuse(p, `holds a backslash (the separator is "/")`)
		}
	}
	return nil
}
