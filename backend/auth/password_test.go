package auth

import (
	"errors"
	"strings"
	"testing"
)

func TestPasswordHashRoundTrip(t *testing.T) {
	h, err := hashPassword("a long enough passphrase", PasswordCost{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("hash %q", h)
	}
	if err := checkPassword(h, "a long enough passphrase"); err != nil {
		t.Fatal(err)
	}
	if err := checkPassword(h, "a long enough passphrasE"); !errors.Is(err, ErrWrongPassword) {
		t.Fatalf("wrong password: %v", err)
	}
	h2, _ := hashPassword("a long enough passphrase", PasswordCost{})
	if h == h2 {
		t.Fatal("two hashes of one password are equal: no salt")
	}
	// A cheaper cost (tests') is the same scheme, its parameters in the hash; a hash of either
	// cost verifies whatever the service's cost is now.
	cheap, err := hashPassword("a long enough passphrase", CheapPasswords())
	if err != nil || !strings.HasPrefix(cheap, "$argon2id$v=19$m=64,t=1,p=1$") || checkPassword(cheap, "a long enough passphrase") != nil {
		t.Fatalf("cheap hash %q: %v", cheap, err)
	}
	if err := checkPassword(dummyHash(CheapPasswords()), "x"); !errors.Is(err, ErrWrongPassword) ||
		!strings.HasPrefix(dummyHash(PasswordCost{}), "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("the dummy hash: %v", err)
	}
	for _, bad := range []string{"", "$bcrypt$x", "$argon2id$v=19$m=x$a$b", "$argon2id$v=18$m=1,t=1,p=1$YQ$YQ"} {
		if err := checkPassword(bad, "x"); err == nil || errors.Is(err, ErrWrongPassword) {
			t.Errorf("malformed hash %q: %v", bad, err)
		}
	}
}

func TestScopes(t *testing.T) {
	s, err := ParseScopes([]string{"repo:write", "billing:read", "repo:write"})
	if err != nil || s.String() != "billing:read repo:write" {
		t.Fatalf("%v %v", s, err)
	}
	if !s.Has("repo:read") || s.Has("billing:write") || s.Has("registry:read") {
		t.Fatalf("implication wrong: %v", s)
	}
	if _, err := ParseScopes([]string{"root"}); err == nil {
		t.Fatal("unknown scope accepted")
	}
}
