package storage

import (
	"crypto/sha256"
	"encoding"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/opencontainers/go-digest"
)

// sessionState is what a backend keeps beside an upload's bytes. The running sha256 is saved
// after every chunk, so committing a sha256 blob (nearly all of them) needs no second pass
// over the data, whichever replica received the chunks. sha512 uploads are rare and are
// hashed once more at commit.
type sessionState struct {
	Size      int64     `json:"size"`
	SHA256    []byte    `json:"sha256"` // the marshalled state of the running hash
	Chunks    []chunk   `json:"chunks,omitempty"`
	StartedAt time.Time `json:"started_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// chunk is one appended piece (the S3 backend stores each as its own object).
type chunk struct {
	Offset int64 `json:"offset"`
	Size   int64 `json:"size"`
}

func newSessionState(now time.Time) (*sessionState, error) {
	st := &sessionState{StartedAt: now, UpdatedAt: now}
	if err := st.saveHash(sha256.New()); err != nil {
		return nil, err
	}
	return st, nil
}

// hasher returns the running sha256, restored from its saved state.
func (st *sessionState) hasher() (hash.Hash, error) {
	h := sha256.New()
	u, ok := h.(encoding.BinaryUnmarshaler)
	if !ok {
		return nil, fmt.Errorf("storage: sha256 state cannot be restored")
	}
	if err := u.UnmarshalBinary(st.SHA256); err != nil {
		return nil, fmt.Errorf("storage: restore sha256 state: %w", err)
	}
	return h, nil
}

// next checks that a chunk starts at the session's end and returns the running hash to feed it.
func (st *sessionState) next(offset int64) (hash.Hash, error) {
	if offset != st.Size {
		return nil, &OffsetError{Size: st.Size}
	}
	return st.hasher()
}

func (st *sessionState) saveHash(h hash.Hash) error {
	m, ok := h.(encoding.BinaryMarshaler)
	if !ok {
		return fmt.Errorf("storage: sha256 state cannot be saved")
	}
	b, err := m.MarshalBinary()
	if err != nil {
		return fmt.Errorf("storage: save sha256 state: %w", err)
	}
	st.SHA256 = b
	return nil
}

// sha256Digest is the digest of everything appended so far.
func (st *sessionState) sha256Digest() (digest.Digest, error) {
	h, err := st.hasher()
	if err != nil {
		return "", err
	}
	return digest.NewDigest(digest.SHA256, h), nil
}

func (st *sessionState) info(id string) UploadInfo {
	return UploadInfo{ID: id, Size: st.Size, StartedAt: st.StartedAt, UpdatedAt: st.UpdatedAt}
}

func (st *sessionState) marshal() ([]byte, error) { return json.Marshal(st) }

func parseSessionState(b []byte) (*sessionState, error) {
	var st sessionState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("storage: corrupt upload state: %w", err)
	}
	return &st, nil
}

// verify checks that the session's bytes hash to want: from the saved state for sha256, by
// reading them again (open) for sha512.
func (st *sessionState) verify(want digest.Digest, open func() (io.ReadCloser, error)) error {
	if want.Algorithm() == digest.SHA256 {
		got, err := st.sha256Digest()
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("%w: got %s, want %s", ErrDigestMismatch, got, want)
		}
		return nil
	}
	rc, err := open()
	if err != nil {
		return err
	}
	defer rc.Close()
	v := want.Verifier()
	if _, err := io.Copy(v, rc); err != nil {
		return fmt.Errorf("storage: read upload: %w", err)
	}
	if !v.Verified() {
		return fmt.Errorf("%w: want %s", ErrDigestMismatch, want)
	}
	return nil
}
