// Package secrets owns the server's secret key and encrypts values at rest with it (AES-256-GCM).
//
// The key comes from NIMBUS_SECRET_KEY or, when that is empty, from a file in the data dir that
// the first start generates (mode 0600). Losing that file makes stored secrets unreadable, so it
// is created once and never rewritten.
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KeyFile is the name of the generated key file in the data dir.
const KeyFile = "secret.key"

// ErrDecrypt means a ciphertext was altered, moved to another row or sealed with another key.
var ErrDecrypt = errors.New("secrets: cannot decrypt: wrong key, tampered value or wrong context")

// LoadKey returns the 32-byte key: configured (64 hex chars) when non-empty, else the key file in
// dataDir, generated on first use.
func LoadKey(dataDir, configured string) ([]byte, error) {
	if configured != "" {
		return parseKey(configured, "NIMBUS_SECRET_KEY")
	}
	path := filepath.Join(dataDir, KeyFile)
	b, err := os.ReadFile(path)
	if err == nil {
		return parseKey(string(b), path)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read secret key: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generate secret key: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	// O_EXCL: two processes starting on one data dir must not each write a different key.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return LoadKey(dataDir, "")
	}
	if err != nil {
		return nil, fmt.Errorf("create secret key file: %w", err)
	}
	if _, err := f.WriteString(hex.EncodeToString(key) + "\n"); err != nil {
		f.Close()
		return nil, fmt.Errorf("write secret key file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("write secret key file: %w", err)
	}
	return key, nil
}

func parseKey(s, from string) ([]byte, error) {
	key, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("secret key from %s must be 64 hex characters (32 bytes)", from)
	}
	return key, nil
}

// Box seals and opens values with the server key.
type Box struct{ aead cipher.AEAD }

// NewBox returns a Box for a 32-byte key.
func NewBox(key []byte) (*Box, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	return &Box{aead: aead}, nil
}

// Seal encrypts plaintext. context binds the ciphertext to where it is stored (say "repo:42:AWS_KEY"),
// so a value copied into another row fails to open instead of leaking there.
func (b *Box) Seal(plaintext []byte, context string) ([]byte, error) {
	nonce := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(plaintext)+b.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("secrets: nonce: %w", err)
	}
	return b.aead.Seal(nonce, nonce, plaintext, []byte(context)), nil
}

// Open decrypts what Seal produced with the same context.
func (b *Box) Open(sealed []byte, context string) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < n+b.aead.Overhead() {
		return nil, ErrDecrypt
	}
	out, err := b.aead.Open(nil, sealed[:n], sealed[n:], []byte(context))
	if err != nil {
		return nil, ErrDecrypt
	}
	return out, nil
}

// LoadToken returns configured when it is set, else the token kept in dataDir/file, generated
// (64 hex characters, mode 0600) the first time. The agent registration token is kept this way.
func LoadToken(dataDir, file, configured string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	path := filepath.Join(dataDir, file)
	if b, err := os.ReadFile(path); err == nil {
		if tok := strings.TrimSpace(string(b)); tok != "" {
			return tok, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(raw)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return LoadToken(dataDir, file, "")
	}
	if err != nil {
		return "", fmt.Errorf("create %s: %w", path, err)
	}
	defer f.Close()
	if _, err := f.WriteString(tok + "\n"); err != nil {
		return "", err
	}
	return tok, nil
}
