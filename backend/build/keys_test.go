package build_test

import (
	"context"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

const keysCI = `
main:
  push:
    - name: prep
      stages:
        - { name: r, type: cnb:resolve, options: { key: data-ready } }
        - { name: w, type: cnb:await, options: { key: model-ready } }
    - name: train
      stages:
        - { name: w, type: cnb:await, options: { key: data-ready } }
        - { name: r, type: cnb:resolve, options: { key: model-ready } }
    - name: eval
      stages:
        - { name: w, type: cnb:await, options: { key: nobody-resolves } }
`

func TestResolveAndAwait(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		f.commit("ci", map[string]string{".cnb.yml": keysCI})
		bs := f.push("refs/heads/main", git.ZeroSHA, "main")
		var ps []build.Pipeline
		db.Where("build_id = ?", bs[0].ID).Order("position").Find(&ps)
		prep, train, eval := &ps[0], &ps[1], &ps[2]

		// Not resolved yet: the await waits, and no dead lock is found (prep still runs).
		if _, ok, err := f.builds.Await(ctx, train, "data-ready"); ok || err != nil {
			t.Fatalf("an early await: %v %v", ok, err)
		}
		if err := f.builds.Resolve(ctx, prep, "data-ready", map[string]any{"path": "/data", "b": map[string]any{"c": 2}}); err != nil {
			t.Fatal(err)
		}
		data, ok, err := f.builds.Await(ctx, train, "data-ready")
		if !ok || err != nil || data["path"] != "/data" {
			t.Fatalf("await after the resolve: %v %v %v", data, ok, err)
		}
		// Awaited any number of times, resolved once.
		if _, ok, _ := f.builds.Await(ctx, eval, "data-ready"); !ok {
			t.Fatal("a second await did not get the key")
		}
		if err := f.builds.Resolve(ctx, train, "data-ready", nil); errStatus(err) != 409 || !strings.Contains(err.Error(), "dead lock found.") {
			t.Fatalf("a second resolve: %v", err)
		}
		// Nobody resolves it.
		if _, _, err := f.builds.Await(ctx, eval, "nobody-resolves"); errStatus(err) != 409 || !strings.Contains(err.Error(), "dead lock found. no pipeline of this build resolves") {
			t.Fatalf("an await of a key nobody resolves: %v", err)
		}

		// A cycle: prep awaits model-ready (train resolves it) while train awaits a key only
		// prep resolves. Keys are per build: a fresh build of the same file.
		f.commit("again", nil)
		bs = f.push("refs/heads/main", bs[0].CommitSHA, "main")
		ps = nil
		db.Where("build_id = ?", bs[0].ID).Order("position").Find(&ps)
		prep, train = &ps[0], &ps[1]
		if _, ok, err := f.builds.Await(ctx, train, "data-ready"); ok || err != nil {
			t.Fatalf("keys leaked across builds: %v %v", ok, err)
		}
		if _, _, err := f.builds.Await(ctx, prep, "model-ready"); errStatus(err) != 409 || !strings.Contains(err.Error(), "wait for each other") {
			t.Fatalf("the cycle was not found: %v", err)
		}
		// The resolver ended without resolving.
		db.Model(&build.Pipeline{}).Where("id = ?", prep.ID).Update("status", build.StatusFailed)
		if _, _, err := f.builds.Await(ctx, train, "data-ready"); errStatus(err) != 409 || !strings.Contains(err.Error(), "ended without resolving") {
			t.Fatalf("the resolver's end was not a dead lock: %v", err)
		}
	})
}
