package artifacts_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/nimbus-build/nimbus/backend/artifacts"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/build/buildtest"
	"github.com/nimbus-build/nimbus/backend/clock"
)

// A build's hand-off version ($CNB_BUILD_ID): every pipeline of the build adds to it, nobody
// else pushes there, it never becomes "latest", and the collector removes it (and then its
// bytes) once the build has ended longer ago than the retention, not before.
func TestBuildScopedVersions(t *testing.T) {
	eachDialect(t, nil, func(t *testing.T, w *world) {
		ctx := context.Background()
		var b build.Build
		if err := w.app.DB.Where("number = ?", w.buildNumber).Take(&b).Error; err != nil {
			t.Fatal(err)
		}
		scoped := build.BuildIDOf(b.ID)
		// A second pipeline of the same build, and a pipeline of another build of the repo.
		sibling, err := buildtest.Seed(w.app.DB, buildtest.Running{RepoID: b.RepoID, OrgID: 1, Build: b.ID})
		if err != nil {
			t.Fatal(err)
		}
		other, err := buildtest.Seed(w.app.DB, buildtest.Running{RepoID: b.RepoID, OrgID: 1, Number: 8, Commit: w.commit})
		if err != nil {
			t.Fatal(err)
		}
		w.creds["sibling"], w.creds["other"] = sibling.JobToken, other.JobToken

		model, ckpt, metrics, theirs := randomBytes(1000), randomBytes(2000), []byte(`{"acc":0.9}`), randomBytes(3000)
		for _, c := range []struct {
			who, path string
			data      []byte
			want      int
		}{
			{"job", "/ckpt/v1/model.bin", model, 201},
			{"job", "/ckpt/" + scoped + "/best.pt", ckpt, 201},
			{"sibling", "/ckpt/" + scoped + "/metrics.json", metrics, 201}, // any pipeline of the build
			{"sibling", "/ckpt/v1/extra.bin", metrics, 409},                // a plain version: its pipeline only
			{"dave", "/ckpt/" + scoped + "/x.bin", metrics, 403},           // a person
			{"other", "/ckpt/" + scoped + "/x.bin", metrics, 403},          // another build
			{"other", "/ckpt/" + build.BuildIDOf(other.BuildID) + "/best.pt", theirs, 201},
			{"job", "/handoff/" + scoped + "/data.tgz", metrics, 201},
		} {
			if r := w.put(c.who, apiBase+c.path, c.data, true); r.Status != c.want {
				t.Fatalf("%s PUT %s: %d %s, want %d", c.who, c.path, r.Status, r.Body, c.want)
			}
		}
		if r := w.put("dave", apiBase+"/ckpt/"+scoped+"/x.bin", metrics, true); r.code() != "forbidden" {
			t.Fatalf("a person's push to a hand-off version: %s", r.Body)
		}

		// latest skips hand-off versions; the version says what it is.
		var v struct {
			Version     string `json:"version"`
			BuildScoped bool   `json:"build_scoped"`
			Files       []struct{ Name string }
		}
		w.do("rita", "GET", apiBase+"/ckpt/latest", nil).decode(t, &v)
		if v.Version != "v1" || v.BuildScoped {
			t.Fatalf("latest of ckpt is %+v, want v1", v)
		}
		w.do("rita", "GET", apiBase+"/ckpt/"+scoped, nil).decode(t, &v)
		if v.Version != scoped || !v.BuildScoped || len(v.Files) != 2 {
			t.Fatalf("the hand-off version: %+v", v)
		}
		if r := w.do("rita", "GET", apiBase+"/handoff/latest", nil); r.Status != 404 {
			t.Fatalf("a package of hand-off versions only has a latest: %d %s", r.Status, r.Body)
		}
		var pkgs struct {
			Items []struct{ Name, Latest string }
		}
		w.do("rita", "GET", apiBase, nil).decode(t, &pkgs)
		if len(pkgs.Items) != 2 || pkgs.Items[0].Latest != "v1" || pkgs.Items[1].Latest != "" {
			t.Fatalf("packages: %+v", pkgs.Items)
		}

		gc := artifacts.NewCollector(w.app.DB, w.app.Builds, w.app.Storage, w.app.Registry, clock.Real{}, slog.New(slog.DiscardHandler),
			artifacts.CollectorConfig{Grace: time.Nanosecond, BuildRetention: time.Hour})
		// Running builds keep theirs, and so does one that ended within the retention.
		end := time.Now().Add(-30 * time.Minute)
		if err := buildtest.Ended(w.app.DB, b.ID, end); err != nil {
			t.Fatal(err)
		}
		if rep, err := gc.Collect(ctx); err != nil || rep.VersionsExpired != 0 || rep.Deleted != 0 {
			t.Fatalf("within the retention: %+v %v", rep, err)
		}
		end = time.Now().Add(-2 * time.Hour)
		if err := buildtest.Ended(w.app.DB, b.ID, end); err != nil {
			t.Fatal(err)
		}
		rep, err := gc.Collect(ctx)
		if err != nil || rep.VersionsExpired != 2 || rep.Deleted != 2 {
			// ckpt's and handoff's versions; best.pt's bytes and data.tgz's (metrics.json's
			// bytes are data.tgz's: the same blob, referenced by nothing any more).
			t.Fatalf("after the retention: %+v %v", rep, err)
		}
		for _, path := range []string{"/ckpt/" + scoped, "/handoff"} {
			if r := w.do("alice", "GET", apiBase+path, nil); r.Status != 404 {
				t.Errorf("%s outlived its retention: %d", path, r.Status)
			}
		}
		left := w.blobs()
		for name, data := range map[string][]byte{"model.bin": model, "the other build's": theirs} {
			if _, ok := left[string(digest.SHA256.FromBytes(data))]; !ok {
				t.Errorf("%s bytes were collected", name)
			}
		}
		if _, ok := left[string(digest.SHA256.FromBytes(ckpt))]; ok || len(left) != 2 {
			t.Errorf("left in the store: %v", left)
		}
		if r := w.do("alice", "GET", apiBase+"/ckpt/"+build.BuildIDOf(other.BuildID), nil); r.Status != 200 {
			t.Errorf("the running build's hand-off version: %d", r.Status)
		}
	})
}
