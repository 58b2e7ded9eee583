package protocol

import "strings"

// ReplaceVars is the one implementation of the .cnb.yml substitution grammar, used by the backend
// when it plans and by the agent when it expands run-time variables:
//
//   - $NAME and ${NAME} are references, NAME being [A-Za-z_][A-Za-z0-9_]*; each is replaced by
//     repl(name, raw), raw being the reference as written;
//   - a backslash before a dollar (`\$`) is an escaped dollar and is replaced by escaped;
//   - everything else, including a lone "$" and ${…} with anything but a name inside, is literal.
func ReplaceVars(s string, repl func(name, raw string) string, escaped string) string {
	if !strings.ContainsRune(s, '$') {
		return s // the common case: no allocation
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c == '\\' && i+1 < len(s) && s[i+1] == '$' {
			b.WriteString(escaped)
			i += 2
			continue
		}
		if c != '$' {
			b.WriteByte(c)
			i++
			continue
		}
		name, n := refAt(s[i:])
		if n == 0 {
			b.WriteByte(c)
			i++
			continue
		}
		b.WriteString(repl(name, s[i:i+n]))
		i += n
	}
	return b.String()
}

// refAt parses a reference at the start of s (which begins with '$') and returns the name and
// the length of the reference, or 0 when s does not start with one.
func refAt(s string) (string, int) {
	if len(s) > 1 && s[1] == '{' {
		end := strings.IndexByte(s, '}')
		if end < 0 || !isName(s[2:end]) {
			return "", 0
		}
		return s[2:end], end + 1
	}
	n := 1
	for n < len(s) && isNameByte(s[n], n == 1) {
		n++
	}
	if n == 1 {
		return "", 0
	}
	return s[1:n], n
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isNameByte(s[i], i == 0) {
			return false
		}
	}
	return true
}

func isNameByte(c byte, first bool) bool {
	switch {
	case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		return true
	case c >= '0' && c <= '9':
		return !first
	}
	return false
}

// ValidVarName reports whether s can be an environment variable name in a .cnb.yml.
func ValidVarName(s string) bool { return isName(s) }

// ExpandVars is what the agent applies, when a job starts, to the fields of a plan or job whose
// RuntimeVars is not empty: references to those names become their value in env (missing: empty),
// `\$` becomes "$", and any other reference stays as written.
func ExpandVars(s string, runtimeVars []string, env map[string]string) string {
	return ReplaceVars(s, func(name, raw string) string {
		for _, v := range runtimeVars {
			if v == name {
				return env[name]
			}
		}
		return raw
	}, "$")
}
