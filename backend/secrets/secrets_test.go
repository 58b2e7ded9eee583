package secrets

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadKeyGeneratesOnceAndKeeps(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	k1, err := LoadKey(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	k2, err := LoadKey(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(k1) != 32 || !bytes.Equal(k1, k2) {
		t.Fatalf("key not stable: %x vs %x", k1, k2)
	}
	st, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v", st.Mode().Perm())
	}
}

func TestLoadKeyConfigured(t *testing.T) {
	hexKey := strings.Repeat("ab", 32)
	k, err := LoadKey(t.TempDir(), hexKey)
	if err != nil || k[0] != 0xab || len(k) != 32 {
		t.Fatalf("k=%x err=%v", k, err)
	}
	for _, bad := range []string{"abc", strings.Repeat("zz", 32), strings.Repeat("ab", 16)} {
		if _, err := LoadKey(t.TempDir(), bad); err == nil {
			t.Errorf("key %q accepted", bad)
		}
	}
}

func TestBoxRoundTripAndBinding(t *testing.T) {
	box, err := NewBox(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := box.Seal([]byte("hunter2"), "repo:1:PASSWORD")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("hunter2")) {
		t.Fatal("plaintext visible in ciphertext")
	}
	got, err := box.Open(sealed, "repo:1:PASSWORD")
	if err != nil || string(got) != "hunter2" {
		t.Fatalf("open: %q %v", got, err)
	}
	if _, err := box.Open(sealed, "repo:2:PASSWORD"); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("moved ciphertext opened: %v", err)
	}
	sealed[len(sealed)-1] ^= 1
	if _, err := box.Open(sealed, "repo:1:PASSWORD"); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("tampered ciphertext opened: %v", err)
	}
	other, _ := NewBox(bytes.Repeat([]byte{8}, 32))
	s2, _ := box.Seal([]byte("x"), "c")
	if _, err := other.Open(s2, "c"); !errors.Is(err, ErrDecrypt) {
		t.Fatal("opened with another key")
	}
	if _, err := box.Open([]byte("short"), "c"); !errors.Is(err, ErrDecrypt) {
		t.Fatal("short input opened")
	}
}

func TestLoadTokenKeepsOneToken(t *testing.T) {
	dir := t.TempDir()
	a, err := LoadToken(dir, "reg.token", "")
	if err != nil || len(a) != 64 {
		t.Fatalf("%q %v", a, err)
	}
	b, _ := LoadToken(dir, "reg.token", "")
	if a != b {
		t.Fatal("token changed between loads")
	}
	if c, _ := LoadToken(dir, "reg.token", "configured"); c != "configured" {
		t.Fatal("configured token ignored")
	}
}
