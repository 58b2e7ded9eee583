package artifacts_test

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

const releases = "/api/v1/repos/acme/models/releases"

// tag commits to acme/models and pushes the tag, with the real git client.
func (w *world) tag(name string) {
	w.t.Helper()
	dir := w.t.TempDir()
	run := func(args ...string) {
		w.t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=A", "-c", "user.email=a@x"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			w.t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(dir, "README"), []byte(name), 0o644)
	run("add", ".")
	run("commit", "-q", "-m", name)
	run("tag", "-a", name, "-m", name)
	run("push", "-q", w.repoPath, "refs/tags/"+name)
}

type releaseJSON struct {
	Tag, Title, Notes string
	PreRelease        bool `json:"pre_release"`
	Latest            bool
	Commit            string
	Build             *struct{ Number int64 }
	Files             []struct {
		Name, Digest string
		Size         int64
		DownloadURL  string `json:"download_url"`
	}
}

// A pipeline makes a release of a tag and publishes two files; a deploy token downloads them
// with their digests; people read and update it by the rules; admins delete it.
func TestReleases(t *testing.T) {
	eachDialect(t, nil, func(t *testing.T, w *world) {
		body := []byte(`{"title":"Model v1","notes":"first"}`)
		if r := w.do("job", "PUT", releases+"/v1", body); r.Status != http.StatusUnprocessableEntity {
			t.Fatalf("a release of a missing tag: %d %s", r.Status, r.Body)
		}
		w.tag("v1")
		var rel releaseJSON
		r := w.do("job", "PUT", releases+"/v1", body)
		if r.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		r.decode(t, &rel)
		if rel.Tag != "v1" || rel.Title != "Model v1" || rel.Notes != "first" || !rel.Latest || rel.Build == nil || rel.Build.Number != w.buildNumber || rel.Commit != w.commit {
			t.Fatalf("the release %+v", rel)
		}
		a, b := randomBytes(3000), randomBytes(5000)
		for name, data := range map[string][]byte{"model.bin": a, "config.json": b} {
			if r := w.put("job", releases+"/v1/files/"+name, data, true); r.Status != http.StatusCreated {
				t.Fatalf("publish %s: %d %s", name, r.Status, r.Body)
			}
		}
		// A retry of the same bytes is a no-op; other bytes under the name are refused.
		if r := w.put("job", releases+"/v1/files/model.bin", a, true); r.Status != http.StatusOK {
			t.Fatalf("a retried publish: %d %s", r.Status, r.Body)
		}
		if r := w.put("job", releases+"/v1/files/model.bin", b, true); r.Status != http.StatusConflict {
			t.Fatalf("other bytes: %d %s", r.Status, r.Body)
		}
		w.do("deploy", "GET", releases+"/v1", nil).decode(t, &rel)
		if len(rel.Files) != 2 || rel.Files[0].Name != "config.json" || rel.Files[0].Digest != "sha256:"+sha256Hex(b) || rel.Files[1].Digest != "sha256:"+sha256Hex(a) {
			t.Fatalf("files %+v", rel.Files)
		}
		for i, data := range [][]byte{b, a} {
			r := w.do("deploy", "GET", releases+"/v1/files/"+rel.Files[i].Name, nil)
			if r.Status != http.StatusOK || string(r.Body) != string(data) || r.Header.Get("X-Checksum-Sha256") != sha256Hex(data) {
				t.Fatalf("deploy download of %s: %d, %d bytes", rel.Files[i].Name, r.Status, len(r.Body))
			}
		}
		// Counted in the team's storage, and not listed among the artifacts.
		var usage struct {
			Files int64 `json:"file_bytes"`
		}
		w.do("alice", "GET", "/api/v1/orgs/acme/storage", nil).decode(t, &usage)
		if usage.Files != int64(len(a)+len(b)) {
			t.Fatalf("file bytes %d, want %d", usage.Files, len(a)+len(b))
		}
		if r := w.do("alice", "GET", apiBase, nil); r.Status != http.StatusOK || string(r.Body) != `{"items":[]}` {
			t.Fatalf("artifacts listing: %s", r.Body)
		}

		// Who may do what.
		for _, c := range []struct {
			who, method, path string
			body              []byte
			want              int
		}{
			{"rita", "PUT", releases + "/v1", body, http.StatusForbidden},
			{"bob", "GET", releases + "/v1", nil, http.StatusNotFound},
			{"", "GET", releases, nil, http.StatusNotFound},
			{"deploy", "PUT", releases + "/v1", body, http.StatusForbidden},
			{"dave", "PUT", releases + "/v1", body, http.StatusConflict}, // made by a pipeline
			{"dave", "DELETE", releases + "/v1", nil, http.StatusForbidden},
			{"alice", "PUT", releases + "/v1", []byte(`{"title":1}`), http.StatusBadRequest},
			{"alice", "PUT", releases + "/v1", []byte(`{"titel":"x"}`), http.StatusBadRequest},
			{"alice", "GET", releases + "/v9", nil, http.StatusNotFound},
		} {
			if r := w.do(c.who, c.method, c.path, c.body); r.Status != c.want {
				t.Errorf("%s %s %s: %d %s, want %d", c.who, c.method, c.path, r.Status, r.Body, c.want)
			}
		}
		// overlying replaces it: its files go, and its producer is now a person.
		r = w.do("dave", "PUT", releases+"/v1", []byte(`{"title":"v1 again","overlying":true,"pre_release":true}`))
		if r.Status != http.StatusOK {
			t.Fatalf("overlying: %d %s", r.Status, r.Body)
		}
		rel = releaseJSON{}
		r.decode(t, &rel)
		if rel.Title != "v1 again" || rel.Build != nil || len(rel.Files) != 0 || !rel.PreRelease || rel.Latest {
			t.Fatalf("after overlying: %+v", rel)
		}
		w.tag("v2")
		w.do("dave", "PUT", releases+"/v2", []byte(`{}`))
		var list struct{ Items []releaseJSON }
		w.do("rita", "GET", releases, nil).decode(t, &list)
		if len(list.Items) != 2 || list.Items[0].Tag != "v2" || list.Items[0].Title != "v2" || !list.Items[0].Latest {
			t.Fatalf("list %+v", list.Items)
		}
		if r := w.do("alice", "DELETE", releases+"/v1", nil); r.Status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		if r := w.do("alice", "GET", releases+"/v1", nil); r.Status != http.StatusNotFound {
			t.Fatalf("after delete: %d", r.Status)
		}
	})
}
