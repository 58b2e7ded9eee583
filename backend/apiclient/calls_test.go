package apiclient

import "testing"

// A secret file's path keeps its slashes as separators (the route takes the rest of the path),
// while each part is still escaped.
func TestSecretFilePathKeepsSlashes(t *testing.T) {
	if got, want := secretFilePath("ml", "keys", "prod/env file.json"), "/api/v1/repos/ml/keys/secret-files/prod/env%20file.json"; got != want {
		t.Fatalf("%s, want %s", got, want)
	}
}
