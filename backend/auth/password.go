package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// Password rules (documented in the README):
//   - 10 to 256 characters;
//   - not one of the most common breached passwords (an embedded list, compared case-insensitively);
//   - does not contain the username or the email's local part (when those are 4+ characters).
const (
	MinPasswordLen = 10
	MaxPasswordLen = 256
)

// argon2id parameters: OWASP's recommended minimum (19 MiB, 2 passes, 1 lane), the default
// PasswordCost.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024
	argonThreads = 1
	argonKeyLen  = 32
)

// PasswordCost is the work of one argon2id password hash: passes over MemoryKiB of memory. The
// zero value is OWASP's recommended minimum (2 passes over 19 MiB), which every server uses.
// A hash carries its parameters and checkPassword reads them from it, so a cost changes new
// hashes only. Tests hash hundreds of passwords under the race detector, where one hash at the
// real cost takes half a second of CPU: they use CheapPasswords, the same code at less work.
type PasswordCost struct {
	Time, MemoryKiB uint32
}

// CheapPasswords is the cost for tests: one pass over 64 KiB.
func CheapPasswords() PasswordCost { return PasswordCost{Time: 1, MemoryKiB: 64} }

// orDefault is c, or OWASP's minimum when c is the zero value.
func (c PasswordCost) orDefault() PasswordCost {
	if c.Time == 0 || c.MemoryKiB == 0 {
		return PasswordCost{Time: argonTime, MemoryKiB: argonMemory}
	}
	return c
}

// ErrWrongPassword is returned by checkPassword for a mismatch.
var ErrWrongPassword = errors.New("auth: wrong password")

// CheckPasswordRules returns a message for people when pw breaks a rule, or "".
func CheckPasswordRules(pw, username, email string) string {
	n := utf8.RuneCountInString(pw)
	if n < MinPasswordLen {
		return fmt.Sprintf("password must be at least %d characters", MinPasswordLen)
	}
	if n > MaxPasswordLen {
		return fmt.Sprintf("password must be at most %d characters", MaxPasswordLen)
	}
	lower := strings.ToLower(pw)
	if commonPasswords[lower] {
		return "password is one of the most common breached passwords; choose another"
	}
	local, _, _ := strings.Cut(strings.ToLower(email), "@")
	for _, part := range []string{strings.ToLower(username), local} {
		if len(part) >= 4 && strings.Contains(lower, part) {
			return "password must not contain your username or email"
		}
	}
	return ""
}

// hashPassword returns an encoded argon2id hash of pw at cost c, in the PHC string format.
func hashPassword(pw string, c PasswordCost) (string, error) {
	c = c.orDefault()
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("auth: salt: %w", err)
	}
	key := argon2.IDKey([]byte(pw), salt, c.Time, c.MemoryKiB, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, c.MemoryKiB, c.Time, argonThreads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key)), nil
}

// checkPassword verifies pw against an encoded hash, using the parameters stored in it so that
// raising the defaults later keeps old hashes valid.
func checkPassword(encoded, pw string) error {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return fmt.Errorf("auth: unsupported password hash")
	}
	var version int
	var mem, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return fmt.Errorf("auth: unsupported argon2 version")
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &mem, &t, &p); err != nil {
		return fmt.Errorf("auth: malformed password hash: %w", err)
	}
	salt, err := base64.RawStdEncoding.DecodeString(parts[4])
	if err != nil {
		return fmt.Errorf("auth: malformed password hash: %w", err)
	}
	want, err := base64.RawStdEncoding.DecodeString(parts[5])
	if err != nil {
		return fmt.Errorf("auth: malformed password hash: %w", err)
	}
	got := argon2.IDKey([]byte(pw), salt, t, mem, p, uint32(len(want)))
	if subtle.ConstantTimeCompare(got, want) != 1 {
		return ErrWrongPassword
	}
	return nil
}

// dummyHash is checked against when a login names no existing user, so that the response time
// does not reveal which usernames exist: a hash of cost c that matches no password.
func dummyHash(c PasswordCost) string {
	c = c.orDefault()
	return fmt.Sprintf("$argon2id$v=19$m=%d,t=%d,p=1$c29tZXNhbHRzb21lc2FsdA$0000000000000000000000000000000000000000000", c.MemoryKiB, c.Time)
}

// commonPasswords is a short list of the most common passwords in public breach corpora that
// are 10+ characters long (shorter ones fail the length rule anyway).
var commonPasswords = func() map[string]bool {
	m := map[string]bool{}
	for _, p := range strings.Fields(`
		1234567890 0123456789 1234567891 12345678910 123456789a 1q2w3e4r5t 1qaz2wsx3edc
		qwertyuiop qwerty1234 qwerty12345 qwerty123456 1234qwerty password12 password123
		password1234 password12345 passw0rd123 iloveyou123 abcdefghij abc1234567 abcd123456
		a123456789 aa12345678 asdfghjkl1 asdfghjkl; zxcvbnm123 qazwsxedc1 qazwsxedcrfv
		q1w2e3r4t5 q1w2e3r4t5y6 1q2w3e4r5t6y 123123123123 1111111111 0000000000 9876543210
		12345678901 123456789012 1234554321 1122334455 1234512345 5555555555 7777777777
		letmein123 welcome123 welcome1234 sunshine12 princess12 football12 baseball12
		dragon1234 monkey1234 master1234 superman12 trustno1234 administrator admin12345
		admin123456 changeme123 changeme1234 p@ssw0rd123 p@ssword123 password!1 iloveyou12
		computer12 internet12 samsung123 michael123 jennifer12 starwars12 whatever12
		liverpool1 chelsea123 arsenal123 blink18218 pokemon123 naruto1234 lovelove12
		qwertyuiop1 asdfasdfasdf zaq12wsxcde 1qazxsw2 qweasdzxc1 googledummy nimbus1234
		woaini1314 woaini520 5201314520 1314520520 aa123456789 qq123456789 iloveyou1314
		`) {
		m[p] = true
	}
	return m
}()
