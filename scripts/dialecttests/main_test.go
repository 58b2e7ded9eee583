package main

import (
	"slices"
	"testing"
)

// Only top-level calls of the dual-database runners count, and a package that merely shares a
// dual test's name is run by the second pass too (whatever the first pass skipped, it runs).
func TestFind(t *testing.T) {
	tests, dirs, err := find("testdata")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"TestBoth", "TestMatrix"}; !slices.Equal(tests, want) {
		t.Errorf("tests %q, want %q", tests, want)
	}
	if want := []string{"./testdata/a", "./testdata/b"}; !slices.Equal(dirs, want) {
		t.Errorf("dirs %q, want %q", dirs, want)
	}
}
