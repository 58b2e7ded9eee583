package build_test

import (
	"slices"
	"testing"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/backend/testworld"
)

// TestPushLines: what `git push` prints for the builds a push started, one line per build with
// its number, ref and event and the address of its page; a failed build says where its file
// broke; a push that started nothing prints nothing.
func TestPushLines(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		lines := func(bs []*build.Build) []string {
			return f.builds.PushLines(f.access.Org.Name, f.access.Repo.Name, bs)
		}
		page := testworld.PublicURL + "/team/trainer/builds/"

		first := f.commit("readme", map[string]string{"README.md": "hi"})
		if got := lines(f.push("refs/heads/main", git.ZeroSHA, "main")); len(got) != 0 {
			t.Fatalf("a push without .cnb.yml printed %q", got)
		}
		f.commit("ci", map[string]string{".cnb.yml": twoPipelines})
		got := lines(f.push("refs/heads/main", first, "main"))
		if want := []string{"Nimbus: build #1 for refs/heads/main (push): " + page + "1"}; !slices.Equal(got, want) {
			t.Fatalf("lines %q, want %q", got, want)
		}

		// A new branch fires two events: a line for each build, in order.
		f.git("checkout", "-q", "-b", "dev/x")
		got = lines(f.push("refs/heads/dev/x", git.ZeroSHA, "dev/x"))
		want := []string{
			"Nimbus: build #2 for refs/heads/dev/x (push): " + page + "2",
			"Nimbus: build #3 for refs/heads/dev/x (branch.create): " + page + "3",
		}
		if !slices.Equal(got, want) {
			t.Fatalf("lines %q, want %q", got, want)
		}

		f.git("tag", "v1")
		if got := lines(f.push("refs/tags/v1", git.ZeroSHA, "v1")); !slices.Equal(got, []string{"Nimbus: build #4 for refs/tags/v1 (tag_push): " + page + "4"}) {
			t.Fatalf("tag lines %q", got)
		}

		f.git("checkout", "-q", "main")
		head := f.git("rev-parse", "HEAD")
		f.commit("broken", map[string]string{".cnb.yml": "main:\n  push:\n    - runner:\n        tags: cnb:arch:quantum\n      stages: [ { name: a, script: x } ]\n"})
		got = lines(f.push("refs/heads/main", head, "main"))
		if want := []string{"Nimbus: build #5 for refs/heads/main (push) failed (.cnb.yml:4:15): " + page + "5"}; !slices.Equal(got, want) {
			t.Fatalf("lines %q, want %q", got, want)
		}
	})
}
