package runnerclass

import "testing"

// Every tag of the default table selects exactly one class, the default tag among them, and a
// class's canonical tag is its first: the spec, the scheduler and billing all look classes up by
// tag and would disagree otherwise.
func TestDefaultsNameEachTagOnce(t *testing.T) {
	seen := map[string]string{}
	for _, c := range Defaults() {
		if len(c.Tags) == 0 {
			t.Fatalf("a class without tags: %+v", c)
		}
		for _, tag := range c.Tags {
			if other, dup := seen[tag]; dup {
				t.Errorf("tag %q selects both %s and %s", tag, other, c.Tags[0])
			}
			seen[tag] = c.Tags[0]
		}
		if (c.FixedCPUs > 0) == (c.MaxCPUs > 0) {
			t.Errorf("%s: either fixed cores or a range, not both or neither: %+v", c.Tags[0], c)
		}
		if c.MaxDuration <= 0 {
			t.Errorf("%s has no time cap", c.Tags[0])
		}
	}
	if seen[DefaultTag] != "cnb:arch:amd64" {
		t.Errorf("the default tag selects %q, want cnb:arch:amd64", seen[DefaultTag])
	}
	if gpu := seen["cnb:arch:amd64:gpu:L40"]; gpu != "cnb:arch:amd64:gpu:L40" {
		t.Errorf("the L40 tag selects %q", gpu)
	}
}

// A team runner's class reserves one core unless asked for more, up to MaxTeamCPUs, with no GPU.
func TestTeam(t *testing.T) {
	c := Team("seele-macbook")
	if c.Tags[0] != "seele-macbook" || c.DefaultCPUs != 1 || c.MinCPUs != 1 || c.MaxCPUs != MaxTeamCPUs || c.GPU != "" || c.FixedCPUs != 0 {
		t.Errorf("Team = %+v", c)
	}
}

// Tags outside the cnb: namespace that no class claims name team runners (moved from the spec's
// team-runner test).
func TestIsTeamTag(t *testing.T) {
	for tag, want := range map[string]bool{"seele-macbook": true, "cnb:arch:amd64": false, "cnb:whatever": false, "": false} {
		if got := IsTeamTag(tag, Defaults()); got != want {
			t.Errorf("IsTeamTag(%q) = %v", tag, got)
		}
	}
	// A tag a configured class claims is that class's, whatever its namespace.
	if IsTeamTag("own-class", []Class{{Tags: []string{"own-class"}}}) {
		t.Error("a configured class's tag is not a team tag")
	}
}
