package config

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The deployment files under deploy/ use only settings the README's tables document (so a
// renamed or removed variable cannot live on in a manifest), and the Kubernetes manifests are
// well-formed YAML documents with a kind each. The Kubernetes executor's (kubernetes/executor)
// are also applied to the real test cluster by e2e TestKubernetesDeployManifests; the others
// are not (deploy/README.md says what was and was not run).
func TestDeployFilesUseDocumentedSettings(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	row := regexp.MustCompile("(?m)^\\| `(NIMBUS_[A-Z0-9_]+)`(?:, `(NIMBUS_[A-Z0-9_]+)`)*")
	for _, m := range row.FindAllString(string(readme), -1) {
		for _, v := range regexp.MustCompile(`NIMBUS_[A-Z0-9_]+`).FindAllString(m, -1) {
			documented[v] = true
		}
	}
	if len(documented) < 40 {
		t.Fatalf("found %d documented settings in README.md: the table format changed?", len(documented))
	}
	files, _ := filepath.Glob(filepath.Join(root, "deploy", "kubernetes", "*.yaml"))
	executor, _ := filepath.Glob(filepath.Join(root, "deploy", "kubernetes", "executor", "*.yaml"))
	if len(executor) < 4 {
		t.Fatalf("deploy/kubernetes/executor: %v", executor)
	}
	files = append(files, executor...)
	units, _ := filepath.Glob(filepath.Join(root, "deploy", "systemd", "*.service"))
	if len(files) < 2 || len(units) < 2 {
		t.Fatalf("deploy files: %v %v", files, units)
	}
	use := regexp.MustCompile(`NIMBUS_[A-Z0-9_]+`)
	for _, f := range append(files, units...) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range use.FindAllString(string(raw), -1) {
			if !documented[v] {
				t.Errorf("%s uses %s, which the README's tables do not document", filepath.Base(f), v)
			}
		}
		if !strings.HasSuffix(f, ".yaml") {
			continue
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		n := 0
		for {
			var doc struct {
				APIVersion string `yaml:"apiVersion"`
				Kind       string `yaml:"kind"`
			}
			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: document %d: %v", filepath.Base(f), n+1, err)
			}
			if doc.APIVersion == "" || doc.Kind == "" {
				t.Errorf("%s: document %d has no apiVersion or kind", filepath.Base(f), n+1)
			}
			n++
		}
	}
}
