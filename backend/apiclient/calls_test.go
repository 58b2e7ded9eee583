package apiclient

import (
	"fmt"
	"testing"
)

// A secret file's path keeps its slashes as separators (the route takes the rest of the path),
// while each part is still escaped.
func TestSecretFilePathKeepsSlashes(t *testing.T) {
	if got, want := secretFilePath("ml", "keys", "prod/env file.json"), "/api/v1/repos/ml/keys/secret-files/prod/env%20file.json"; got != want {
		t.Fatalf("%s, want %s", got, want)
	}
}

// A record's differences and timings print their values, not the addresses of their pointers,
// and say which side has none.
func TestRecordDiffPrints(t *testing.T) {
	a, ms := "sha256:1", int64(1200)
	d := RecordDiff{
		Differences: []RecordDifference{{Category: "image", Key: "train", A: &a}},
		Timings:     []RecordTiming{{Key: "train", AMs: &ms}},
	}
	got := fmt.Sprintf("%+v %v", d.Differences, d.Timings)
	if want := "[image train: sha256:1 → -] [train: 1200 ms → - ms]"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
