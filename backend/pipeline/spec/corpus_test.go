package spec

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// corpusRepo loads one folder of testdata/corpus as an in-memory repository.
func corpusRepo(t testing.TB, dir string) mapFS {
	t.Helper()
	repo := mapFS{}
	root := filepath.Join("testdata", "corpus", dir)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		repo[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

// corpusIndex reads INDEX.tsv: folder → the event families it declares.
func corpusIndex(t testing.TB) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "corpus", "INDEX.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		cols := strings.Split(line, "\t")
		if i == 0 || len(cols) < 5 {
			continue
		}
		var events []string
		if cols[4] != "-" {
			events = strings.Split(cols[4], ",")
		}
		out[cols[0]] = events
	}
	return out
}

// Every real .cnb.yml of the corpus lints without errors and plans every event it declares.
func TestCorpus(t *testing.T) {
	index := corpusIndex(t)
	if len(index) < 20 {
		t.Fatalf("INDEX.tsv lists %d folders", len(index))
	}
	for dir, indexed := range index {
		t.Run(dir, func(t *testing.T) {
			repo := corpusRepo(t, dir)
			src := []byte(repo[".cnb.yml"])
			cfg, ds := Parse(src, Options{Files: repo})
			if ds.HasErrors() {
				t.Fatalf("lint errors:\n%v", ds.Filter(SeverityError))
			}
			var families []string
			for _, d := range cfg.Declarations() {
				families = append(families, eventFamily(d.Event))
				trig := Trigger{Event: d.Event, Branch: refFor(t, cfg, d.BranchKey)}
				if isTagEvent(d.Event) {
					trig.Tag, trig.Branch = trig.Branch, ""
				}
				set, pds, err := cfg.Plan(trig)
				if err != nil {
					t.Fatalf("%s %s: %v", d.BranchKey, d.Event, pds)
				}
				if len(set.Pipelines) < 1 {
					t.Errorf("%s %s on %q planned nothing", d.BranchKey, d.Event, trig.refName())
				}
				for _, p := range set.Pipelines {
					if p.Event != cnbEvent(d.Event) || p.Runner.Cpus < 1 || p.Runner.Class == "" {
						t.Errorf("%s: event %q runner %+v", p.Name, p.Event, p.Runner)
					}
				}
			}
			for _, e := range indexed {
				if !slices.Contains(families, e) {
					t.Errorf("INDEX.tsv says the folder declares %q; found %v", e, families)
				}
			}
		})
	}
}

// refFor picks a ref the branch key matches: for "$", one that no glob key matches if there is
// such a ref, since "$" is a fallback.
func refFor(t *testing.T, cfg *Config, key string) string {
	t.Helper()
	if key == "$" {
		for _, ref := range []string{"zz-unmatched", "fallback/x"} {
			matched := false
			for _, b := range cfg.branches {
				matched = matched || !b.fallback && b.glob.Match(ref)
			}
			if !matched {
				return ref
			}
		}
		return "zz-unmatched"
	}
	ref := sampleRef(key)
	g, err := CompileGlob(key)
	if err != nil || !g.Match(ref) {
		t.Fatalf("no sample ref for %q (tried %q)", key, ref)
	}
	return ref
}
