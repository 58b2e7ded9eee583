package build_test

import (
	"context"
	"testing"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

func TestNextVersionTag(t *testing.T) {
	for _, c := range []struct {
		tags []string
		want string
	}{
		{nil, "v1.0.0"},
		{[]string{"latest", "release-2"}, "v1.0.0"},
		{[]string{"v1.2.3", "v1.10.0", "v1.9.9"}, "v1.10.1"},
		{[]string{"0.4.9", "v0.4.2"}, "0.4.10"},
		{[]string{"v2.0.0", "v10.0.0-rc1"}, "v2.0.1"},
	} {
		if got := build.NextVersionTag(c.tags); got != c.want {
			t.Errorf("after %v: %s, want %s", c.tags, got, c.want)
		}
	}
}

// The auto_tag button: without auto_tag pipelines under the default branch ("$" ones do not
// count), it tags the next version on the head and fires tag_push; with them, they run.
func TestAutoTag(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		_, err := f.builds.AutoTag(ctx, f.access, f.user)
		if fault.KindOf(err) != fault.KindConflict {
			t.Fatalf("an empty repo: %v", err)
		}
		const fallbackOnly = "$:\n  auto_tag:\n    - stages: [ { name: ignored, script: echo no } ]\n" +
			"\"v*\":\n  tag_push:\n    - stages: [ { name: release, script: echo $CNB_BRANCH } ]\n"
		head := f.commit("ci", map[string]string{".cnb.yml": fallbackOnly})
		f.push("refs/heads/main", git.ZeroSHA, "main")
		f.git("tag", "v1.4.2")
		f.git("push", "-q", f.bare, "v1.4.2")

		got, err := f.builds.AutoTag(ctx, f.access, f.user)
		if err != nil {
			t.Fatal(err)
		}
		if got.Build != nil || got.Tag != "v1.4.3" || got.Commit != head || len(got.TagPush) != 1 || got.TagPush[0].Event != "tag_push" {
			t.Fatalf("the default: %+v", got)
		}
		if sha, err := git.ResolveRef(ctx, f.bare, "refs/tags/v1.4.3"); err != nil || sha != head {
			t.Errorf("v1.4.3 is at %q (%v), want %s", sha, err, head)
		}

		// An override under main runs instead, on main's head.
		override := "main:\n  auto_tag:\n    - name: my-tagger\n      stages: [ { name: tag, script: echo custom } ]\n"
		head = f.commit("own tagger", map[string]string{".cnb.yml": override})
		f.push("refs/heads/main", git.ZeroSHA, "main")
		got, err = f.builds.AutoTag(ctx, f.access, f.user)
		if err != nil {
			t.Fatal(err)
		}
		if got.Build == nil || got.Build.Event != "auto_tag" || got.Build.CommitSHA != head || got.Tag != "" {
			t.Fatalf("the override: %+v", got)
		}
	})
}
