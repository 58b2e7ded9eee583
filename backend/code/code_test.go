package code_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/app"
	"github.com/nimbus-build/nimbus/backend/app/apptest"
	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/build"
	"github.com/nimbus-build/nimbus/backend/code"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/git/gittest"
	"github.com/nimbus-build/nimbus/backend/pull"
	"github.com/nimbus-build/nimbus/backend/repo"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/internal/testenv"
)

// getJSON reads an API path as the token into out and returns the status and headers.
func getJSON(t testing.TB, base, token, path string, out any) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/api/v1"+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if out != nil && res.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("%s: %v\n%s", path, err, body)
		}
	}
	return res.StatusCode, res.Header, body
}

// The code routes over a small repository: branches and tags with their check state, a tree
// with its README, text, binary, LFS and raw files, a paged history and a commit's diff.
func TestCodeRoutes(t *testing.T) {
	ctx := context.Background()
	s := apptest.Start(t, nil, app.Options{})
	alice := s.Signup(t, "alice")
	r := s.Repo(t, s.Org(t, alice, "ml"), "trainer", repo.Private)
	bare := s.App.Repos.Path(r)
	var stream strings.Builder
	files := []map[string]string{
		{"README.md": "# trainer\n", "train.py": "lr = 0.1\n"},
		{"data/rows.csv": "a,b\n1,2\n", "model.bin": "\x00\x01\x02", "weights.safetensors": "version https://git-lfs.github.com/spec/v1\noid sha256:abc123\nsize 4096\n"},
		{"train.py": "lr = 0.01\nepochs = 3\n"},
	}
	for i, fs := range files {
		fmt.Fprintf(&stream, "commit refs/heads/main\nmark :%d\ncommitter Alice <alice@example.com> %d +0000\ndata <<EOM\nstep %d\nEOM\n", i+1, 1700000000+i, i+1)
		names := make([]string, 0, len(fs))
		for n := range fs {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			fmt.Fprintf(&stream, "M 100644 inline %s\ndata %d\n%s\n", n, len(fs[n]), fs[n])
		}
	}
	stream.WriteString("reset refs/tags/v1\nfrom :2\n")
	gittest.FastImport(t, bare, []byte(stream.String()))
	head, err := git.ResolveRef(ctx, bare, "main")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.App.Builds.SetStatus(ctx, r, head, alice.ID, 0, build.StatusInput{Context: "eval", State: build.StateSuccess}); err != nil {
		t.Fatal(err)
	}
	tok := s.Token(t, alice, auth.ScopeRepoRead)
	get := func(path string, out any) (int, http.Header, []byte) {
		t.Helper()
		return getJSON(t, s.URL, tok, "/repos/ml/trainer"+path, out)
	}

	var refs struct{ Items []code.RefJSON }
	get("/branches", &refs)
	if len(refs.Items) != 1 || refs.Items[0].Name != "main" || !refs.Items[0].Default || refs.Items[0].Commit.SHA != head ||
		refs.Items[0].Commit.Checks != "success" || refs.Items[0].Commit.Title != "step 3" {
		t.Errorf("branches %+v", refs.Items)
	}
	get("/tags", &refs)
	if len(refs.Items) != 1 || refs.Items[0].Name != "v1" || refs.Items[0].Commit.Title != "step 2" || refs.Items[0].Commit.Checks != "" {
		t.Errorf("tags %+v", refs.Items)
	}

	var tree code.TreeJSON
	get("/tree", &tree)
	var names []string
	for _, e := range tree.Entries {
		names = append(names, e.Type+":"+e.Name)
	}
	if tree.Commit != head || tree.Readme != "README.md" ||
		!slices.Equal(names, []string{"tree:data", "blob:README.md", "blob:model.bin", "blob:train.py", "blob:weights.safetensors"}) {
		t.Errorf("tree %+v", tree)
	}
	get("/tree?ref=v1&path=data", &tree)
	if len(tree.Entries) != 1 || tree.Entries[0].Path != "data/rows.csv" || tree.Entries[0].Size != 8 {
		t.Errorf("data at v1 %+v", tree)
	}

	var blob code.BlobJSON
	get("/blob?path=train.py", &blob)
	if blob.Content == nil || *blob.Content != "lr = 0.01\nepochs = 3\n" || blob.Binary || blob.LFS != nil {
		t.Errorf("train.py %+v", blob)
	}
	get("/blob?path=train.py&ref=v1", &blob)
	if blob.Content == nil || *blob.Content != "lr = 0.1\n" {
		t.Errorf("train.py at v1 %+v", blob)
	}
	get("/blob?path=model.bin", &blob)
	if !blob.Binary || blob.Content != nil || blob.Size != 3 {
		t.Errorf("model.bin %+v", blob)
	}
	get("/blob?path=weights.safetensors", &blob)
	if blob.LFS == nil || blob.LFS.OID != "sha256:abc123" || blob.LFS.Size != 4096 {
		t.Errorf("the LFS pointer %+v", blob)
	}
	st, hdr, body := get("/raw?path=model.bin", nil)
	if st != 200 || string(body) != "\x00\x01\x02" || hdr.Get("Content-Type") != "application/octet-stream" ||
		!strings.HasPrefix(hdr.Get("Content-Disposition"), "attachment") || hdr.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("raw model.bin: %d %v %q", st, hdr, body)
	}
	st, hdr, body = get("/raw?path=README.md", nil)
	if st != 200 || string(body) != "# trainer\n" || hdr.Get("Content-Type") != "text/plain; charset=utf-8" || !strings.Contains(hdr.Get("Content-Security-Policy"), "sandbox") {
		t.Errorf("raw README.md: %d %v %q", st, hdr, body)
	}

	var page struct {
		Items      []code.CommitJSON
		NextCursor string `json:"next_cursor"`
	}
	get("/commits?limit=2", &page)
	if len(page.Items) != 2 || page.Items[0].SHA != head || page.Items[0].Checks != "success" || page.NextCursor == "" {
		t.Fatalf("first page %+v", page)
	}
	cursor := page.NextCursor
	page.NextCursor = ""
	get("/commits?limit=2&cursor="+cursor, &page)
	if len(page.Items) != 1 || page.Items[0].Title != "step 1" || page.NextCursor != "" {
		t.Errorf("last page %+v", page)
	}
	get("/commits?path=train.py", &page)
	if len(page.Items) != 2 {
		t.Errorf("commits of train.py: %d, want 2", len(page.Items))
	}

	// A request's files and commits: against the merge base.
	gittest.FastImport(t, bare, []byte("commit refs/heads/tune\ncommitter Bob <bob@example.com> 1700000100 +0000\ndata <<EOM\ntune\nEOM\nfrom refs/heads/main^0\nM 100644 inline train.py\ndata 10\nlr = 0.05\n\n"))
	who := pull.Person{ID: alice.ID, Name: alice.Username, Email: alice.Email}
	if _, err := s.App.Pulls.Open(ctx, r, who, pull.OpenInput{Source: "tune", Target: "main", Title: "Tune"}); err != nil {
		t.Fatal(err)
	}
	var prFiles struct{ Items []code.FileJSON }
	get("/pulls/1/files", &prFiles)
	if len(prFiles.Items) != 1 || prFiles.Items[0].Path != "train.py" || prFiles.Items[0].Additions != 1 || prFiles.Items[0].Deletions != 2 {
		t.Errorf("the request's files %+v", prFiles.Items)
	}
	var prCommits struct{ Items []code.CommitJSON }
	get("/pulls/1/commits", &prCommits)
	if len(prCommits.Items) != 1 || prCommits.Items[0].Title != "tune" || prCommits.Items[0].AuthorName != "Bob" {
		t.Errorf("the request's commits %+v", prCommits.Items)
	}

	var detail code.CommitDetailJSON
	get("/commits/main", &detail)
	if detail.SHA != head || len(detail.Parents) != 1 || len(detail.Files) != 1 || detail.Files[0].Path != "train.py" ||
		detail.Files[0].Additions != 2 || detail.Files[0].Deletions != 1 || !strings.Contains(detail.Files[0].Patch, "+epochs = 3\n") {
		t.Errorf("the head commit %+v", detail)
	}
	get("/commits/main~2", &detail)
	if len(detail.Parents) != 0 || len(detail.Files) != 2 || detail.Files[0].Status != "added" {
		t.Errorf("the root commit %+v", detail)
	}
}

// BenchmarkCodeBrowse measures, on a repository of 10,000 commits behind the whole app's HTTP
// server (PostgreSQL), what the code pages ask most: the root tree (target < 100 ms) and a
// commit whose diff is 5,000 lines (target < 300 ms), p50 of 30 reads each.
// Alone: e2e/testenv.sh go test -run '^$' -bench CodeBrowse -benchtime 1x -v ./backend/code
func BenchmarkCodeBrowse(b *testing.B) {
	const commits, rounds, lines = 10_000, 30, 5_000
	srv := apptest.Start(b, map[string]string{"NIMBUS_DATABASE_URL": storetest.PostgresURL(b), "NIMBUS_REDIS_URL": testenv.RedisURL(b)}, app.Options{})
	owner := srv.Signup(b, "bencher")
	r := srv.Repo(b, srv.Org(b, owner, "bench"), "history", "private")
	path := srv.App.Repos.Path(r)
	gittest.BigHistory(b, path, commits, "")
	var big strings.Builder
	for i := range lines {
		fmt.Fprintf(&big, "weights[%d] = %d\n", i, i*7919%10007)
	}
	gittest.FastImport(b, path, fmt.Appendf(nil, "commit refs/heads/main\ncommitter Bench <bench@example.com> 1800000000 +0000\ndata <<EOM\nbig\nEOM\nfrom refs/heads/main^0\nM 100644 inline src/weights.py\ndata %d\n%s\n", big.Len(), big.String()))
	token := srv.Token(b, owner, auth.ScopeRepoRead)
	p50 := func(path string, check func([]byte)) float64 {
		var took []time.Duration
		for range rounds {
			began := time.Now()
			st, _, body := getJSON(b, srv.URL, token, path, nil)
			took = append(took, time.Since(began))
			if st != http.StatusOK {
				b.Fatalf("%s: %d %s", path, st, body)
			}
			check(body)
		}
		slices.Sort(took)
		return float64(took[len(took)/2].Microseconds()) / 1000
	}
	for b.Loop() {
		tree := p50("/repos/bench/history/tree", func(body []byte) {
			var t code.TreeJSON
			if json.Unmarshal(body, &t) != nil || len(t.Entries) != 1 || t.Entries[0].Name != "src" {
				b.Fatalf("tree %s", body)
			}
		})
		diff := p50("/repos/bench/history/commits/main", func(body []byte) {
			var d code.CommitDetailJSON
			if json.Unmarshal(body, &d) != nil || len(d.Files) != 1 || d.Files[0].Additions != lines || d.Files[0].Truncated {
				b.Fatalf("diff %.200s", body)
			}
		})
		b.ReportMetric(tree, "tree-p50-ms")
		b.ReportMetric(diff, "diff5000-p50-ms")
		b.Logf("%d commits: root tree p50 %.1f ms (target < 100), a %d-line diff p50 %.1f ms (target < 300)", commits, tree, lines, diff)
	}
}
