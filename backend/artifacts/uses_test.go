package artifacts_test

import (
	"fmt"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/build/buildtest"
)

// The server writes down what a pipeline's job token pushed and pulled, with digests: a push
// again counts once, a HEAD is no pull, a person's transfers are nobody's; the listing is the
// repo's readers', and a pipeline is found only under its own repo.
func TestPipelineArtifactUses(t *testing.T) {
	eachDialect(t, nil, func(t *testing.T, w *world) {
		var b build.Build
		if err := w.app.DB.Where("number = ?", w.buildNumber).Take(&b).Error; err != nil {
			t.Fatal(err)
		}
		var pipes []build.Pipeline
		if err := w.app.DB.Where("build_id = ?", b.ID).Find(&pipes).Error; err != nil || len(pipes) != 1 {
			t.Fatalf("pipelines: %v %v", pipes, err)
		}
		sibling, err := buildtest.Seed(w.app.DB, buildtest.Running{RepoID: b.RepoID, OrgID: 1, Build: b.ID})
		if err != nil {
			t.Fatal(err)
		}
		w.creds["sibling"] = sibling.JobToken

		weights, data := randomBytes(500), randomBytes(700)
		for _, c := range []struct {
			who, method, path string
			body              []byte
			want              int
		}{
			{"job", "PUT", "/bert/v1/weights.bin", weights, 201},
			{"job", "PUT", "/bert/v1/weights.bin", weights, 200}, // again: counted once
			{"dave", "PUT", "/data/v1/train.tgz", data, 201},     // a person's: nobody's use
			{"job", "GET", "/data/v1/train.tgz", nil, 200},
			{"job", "HEAD", "/data/latest/train.tgz", nil, 200}, // no pull
			{"sibling", "GET", "/bert/latest/weights.bin", nil, 200},
		} {
			var r resp
			if c.method == "PUT" {
				r = w.put(c.who, apiBase+c.path, c.body, true)
			} else {
				r = w.do(c.who, c.method, apiBase+c.path, nil)
			}
			if r.Status != c.want {
				t.Fatalf("%s %s %s: %d %s", c.who, c.method, c.path, r.Status, r.Body)
			}
		}

		type use struct{ Repo, Package, Version, File, Digest string }
		var got struct{ Pushed, Pulled []use }
		path := func(id int64) string { return fmt.Sprintf("/api/v1/repos/acme/models/pipelines/%d/artifacts", id) }
		// A token with the repo scope, as for builds (the world's others have registry scopes).
		if r := w.do("rita", "GET", path(pipes[0].ID), nil); r.Status != 403 {
			t.Fatalf("a registry-scoped token reads a pipeline's uses: %d", r.Status)
		}
		w.do("reposcope", "GET", path(pipes[0].ID), nil).decode(t, &got)
		want := func(pkg, file string, raw []byte) use {
			return use{"acme/models", pkg, "v1", file, string(digest.SHA256.FromBytes(raw))}
		}
		if len(got.Pushed) != 1 || got.Pushed[0] != want("bert", "weights.bin", weights) ||
			len(got.Pulled) != 1 || got.Pulled[0] != want("data", "train.tgz", data) {
			t.Fatalf("the job's pipeline moved %+v", got)
		}
		w.do("reposcope", "GET", path(sibling.PipelineID), nil).decode(t, &got)
		if len(got.Pushed) != 0 || len(got.Pulled) != 1 || got.Pulled[0] != want("bert", "weights.bin", weights) {
			t.Fatalf("the sibling moved %+v", got)
		}
		for who, p := range map[string]string{
			"bob":       path(pipes[0].ID),                                                         // another team
			"reposcope": fmt.Sprintf("/api/v1/repos/acme/pub/pipelines/%d/artifacts", pipes[0].ID), // under another repo
		} {
			if r := w.do(who, "GET", p, nil); r.Status != 404 {
				t.Errorf("%s GET %s: %d, want 404", who, p, r.Status)
			}
		}
		if r := w.do("reposcope", "GET", "/api/v1/repos/acme/models/pipelines/nope/artifacts", nil); r.Status != 404 {
			t.Errorf("a pipeline id that is no number: %d", r.Status)
		}
	})
}
