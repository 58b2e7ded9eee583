package artifacts_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/nimbus-build/nimbus/backend/artifacts"
)

const hfBase = "/api/v1/hf"

// The Hugging Face endpoint: model info, tree and resolve at every revision form, the headers
// huggingface_hub and @huggingface/hub read, Range and HEAD, and the registry's authorization
// (another team's private repo is a 404, a bad token a 401).
func TestHuggingFaceEndpoint(t *testing.T) {
	eachDialect(t, nil, func(t *testing.T, w *world) {
		weights1, weights2, cfg := randomBytes(70_000), randomBytes(90_000), []byte(`{"hidden_size": 8}`)
		for _, up := range []struct {
			who, path string
			data      []byte
		}{
			// "models" is the repo's default package (named like the repo); bert another one.
			{"dave", apiBase + "/models/v1/model.safetensors", weights1},
			{"dave", apiBase + "/models/v1/config.json", cfg},
			{"dave", apiBase + "/models/v2/model.safetensors", weights2},
			{"dave", apiBase + "/models/v2/config.json", cfg},
			{"job", apiBase + "/bert/b1/w.bin", weights1},
			{"alice", "/api/v1/repos/acme/pub/artifacts/pub/1.0/w.bin", cfg},
		} {
			if r := w.put(up.who, up.path, up.data, true); r.Status != http.StatusCreated {
				t.Fatalf("publish %s: %d %s", up.path, r.Status, r.Body)
			}
		}

		// Model info: main is the newest version; the files are LFS files by their sha256.
		var latest artifacts.HFModelInfo
		r := w.do("deploy", "GET", hfBase+"/api/models/acme/models", nil)
		if r.Status != http.StatusOK {
			t.Fatalf("info: %d %s", r.Status, r.Body)
		}
		r.decode(t, &latest)
		if latest.ID != "acme/models" || latest.ModelID != latest.ID || len(latest.SHA) != 40 || !latest.Private ||
			latest.Nimbus.Version != "v2" || latest.Nimbus.Package != "models" || len(latest.Siblings) != 2 {
			t.Fatalf("info %+v", latest)
		}
		if s := latest.Siblings[1]; s.RFilename != "model.safetensors" || s.Size != int64(len(weights2)) || s.LFS.SHA256 != sha256Hex(weights2) ||
			s.LFS.Size != s.Size || s.LFS.PointerSize < 100 {
			t.Fatalf("sibling %+v", s)
		}
		// A version by name, and by the commit id the endpoint hands out; main names the same
		// version as latest and as no revision at all.
		var v1, v1ByCommit, mainInfo, head artifacts.HFModelInfo
		w.do("deploy", "GET", hfBase+"/api/models/acme/models/revision/v1", nil).decode(t, &v1)
		if v1.Nimbus.Version != "v1" || v1.SHA == latest.SHA || v1.Siblings[1].LFS.SHA256 != sha256Hex(weights1) {
			t.Fatalf("v1 info %+v", v1)
		}
		w.do("deploy", "GET", hfBase+"/api/models/acme/models/revision/"+v1.SHA, nil).decode(t, &v1ByCommit)
		w.do("deploy", "GET", hfBase+"/api/models/acme/models/revision/main", nil).decode(t, &mainInfo)
		w.do("deploy", "GET", hfBase+"/api/models/acme/models/revision/HEAD", nil).decode(t, &head) // @huggingface/hub's modelInfo
		if v1ByCommit.Nimbus.Version != "v1" || v1ByCommit.SHA != v1.SHA || mainInfo.SHA != latest.SHA || head.SHA != latest.SHA {
			t.Fatalf("by commit %+v, main %+v", v1ByCommit, mainInfo)
		}
		// Another package: the org.repo owner form; a pipeline's version names its commit.
		var bert artifacts.HFModelInfo
		w.do("deploy", "GET", hfBase+"/api/models/acme.models/bert", nil).decode(t, &bert)
		if bert.ID != "acme.models/bert" || bert.Nimbus.Build == nil || bert.Nimbus.Build.Commit != w.commit || len(bert.Siblings) != 1 {
			t.Fatalf("bert info %+v", bert)
		}

		// The tree, as @huggingface/hub's listFiles reads it: one page, no Link.
		var tree []artifacts.HFTreeEntry
		r = w.do("deploy", "GET", hfBase+"/api/models/acme/models/tree/v1?recursive=true&expand=false", nil)
		r.decode(t, &tree)
		if r.Status != http.StatusOK || r.Header.Get("Link") != "" || len(tree) != 2 || tree[1].Type != "file" || tree[1].Path != "model.safetensors" ||
			tree[1].LFS.OID != sha256Hex(weights1) || tree[1].Size != int64(len(weights1)) {
			t.Fatalf("tree: %d %+v", r.Status, tree)
		}

		// resolve: the bytes and the headers the clients read.
		file := hfBase + "/acme/models/resolve/main/model.safetensors"
		r = w.do("deploy", "GET", file, nil)
		tag := `"` + sha256Hex(weights2) + `"`
		if r.Status != http.StatusOK || !bytes.Equal(r.Body, weights2) {
			t.Fatalf("resolve: %d, %d bytes", r.Status, len(r.Body))
		}
		for k, want := range map[string]string{
			"ETag": tag, "X-Linked-Etag": tag, "X-Linked-Size": strconv.Itoa(len(weights2)), "X-Repo-Commit": latest.SHA,
			"Accept-Ranges": "bytes", "Content-Length": strconv.Itoa(len(weights2)),
			"Content-Disposition": `attachment; filename=model.safetensors`,
		} {
			if got := r.Header.Get(k); got != want {
				t.Errorf("%s = %q, want %q", k, got, want)
			}
		}
		// At the commit id of v1 (snapshot_download's second step), the other bytes.
		if r := w.do("deploy", "GET", hfBase+"/acme/models/resolve/"+v1.SHA+"/model.safetensors", nil); !bytes.Equal(r.Body, weights1) ||
			r.Header.Get("X-Repo-Commit") != v1.SHA {
			t.Fatalf("resolve at v1's commit: %d %s", r.Status, r.Header)
		}
		// Range (fileDownloadInfo asks bytes=0-0 for the size), If-Range, If-None-Match, HEAD.
		r = w.do("deploy", "GET", file, nil, "Range", "bytes=0-0")
		if r.Status != http.StatusPartialContent || r.Header.Get("Content-Range") != fmt.Sprintf("bytes 0-0/%d", len(weights2)) || len(r.Body) != 1 {
			t.Fatalf("range 0-0: %d %s", r.Status, r.Header)
		}
		r = w.do("deploy", "GET", file, nil, "Range", "bytes=100-199", "If-Range", tag)
		if r.Status != http.StatusPartialContent || !bytes.Equal(r.Body, weights2[100:200]) {
			t.Fatalf("range with If-Range: %d", r.Status)
		}
		if r := w.do("deploy", "GET", file, nil, "Range", "bytes=100-199", "If-Range", `"`+sha256Hex(weights1)+`"`); r.Status != http.StatusOK {
			t.Fatalf("If-Range with another ETag: %d, want the whole file", r.Status)
		}
		if r := w.do("deploy", "GET", file, nil, "If-None-Match", tag); r.Status != http.StatusNotModified {
			t.Fatalf("If-None-Match: %d", r.Status)
		}
		if r := w.do("deploy", "GET", file, nil, "Range", "bytes=999999-"); r.Status != http.StatusRequestedRangeNotSatisfiable || r.code() != "bad_request" {
			t.Fatalf("range past the end: %d %s", r.Status, r.Body)
		}
		r = w.do("deploy", "HEAD", file, nil)
		if r.Status != http.StatusOK || len(r.Body) != 0 || r.Header.Get("Content-Length") != strconv.Itoa(len(weights2)) ||
			r.Header.Get("X-Linked-Etag") != tag || r.Header.Get("X-Repo-Commit") != latest.SHA {
			t.Fatalf("HEAD: %d %s", r.Status, r.Header)
		}
		// raw is resolve (no LFS pointers here): @huggingface/hub's fileExists HEADs it.
		if r := w.do("deploy", "HEAD", hfBase+"/acme/models/raw/main/model.safetensors", nil); r.Status != http.StatusOK || r.Header.Get("X-Linked-Etag") != tag {
			t.Fatalf("HEAD raw: %d %s", r.Status, r.Header)
		}
		if r := w.do("deploy", "GET", hfBase+"/acme/models/raw/v1/config.json", nil); !bytes.Equal(r.Body, cfg) {
			t.Fatalf("GET raw: %d %s", r.Status, r.Body)
		}
		if r := w.do("deploy", "HEAD", hfBase+"/acme/models/raw/main/missing.bin", nil); r.Status != http.StatusNotFound || r.Header.Get("X-Error-Code") != "EntryNotFound" {
			t.Fatalf("HEAD raw of a missing file: %d", r.Status)
		}
		if r := w.do("deploy", "GET", hfBase+"/acme.models/bert/resolve/b1/w.bin", nil); !bytes.Equal(r.Body, weights1) {
			t.Fatalf("bert's file: %d", r.Status)
		}

		// A ".." segment never reaches a route: the edge refuses the URL (400).
		if r := w.do("deploy", "GET", hfBase+"/acme/models/resolve/main/..", nil); r.Status != http.StatusBadRequest || r.code() != "bad_request" {
			t.Errorf("a .. file: %d %s, want 400 bad_request", r.Status, r.Body)
		}
		// What is not there, with the hub's error codes (clients map them to their errors).
		for _, c := range []struct{ path, code string }{
			{hfBase + "/acme/models/resolve/main/missing.bin", "EntryNotFound"},
			{hfBase + "/acme/models/resolve/v9/config.json", "RevisionNotFound"},
			{hfBase + "/acme/models/resolve/" + fmt.Sprintf("%040x", 999999) + "/config.json", "RevisionNotFound"},
			{hfBase + "/acme.models/nope/resolve/main/config.json", "RepoNotFound"},
			{hfBase + "/acme/nope/resolve/main/config.json", "RepoNotFound"},
			{hfBase + "/api/models/acme.models/.hidden", "RepoNotFound"},
			{hfBase + "/api/models/acme.pub/bert", "RepoNotFound"}, // bert is a package of models, not of pub
		} {
			r := w.do("deploy", "GET", c.path, nil)
			if r.Status != http.StatusNotFound || r.Header.Get("X-Error-Code") != c.code || r.code() != "not_found" {
				t.Errorf("%s: %d %q %s, want 404 %s", c.path, r.Status, r.Header.Get("X-Error-Code"), r.Body, c.code)
			}
		}

		// Authorization is the registry's: a private repo is a 404 to anonymous callers and to
		// other teams, a bad token a 401, a token without registry:read a 403; a public repo
		// reads anonymously.
		for _, c := range []struct {
			who    string
			status int
		}{{"", 404}, {"bob", 404}, {"reposcope", 403}, {"rita", 200}, {"readonly", 200}, {"job", 200}} {
			if r := w.do(c.who, "GET", file, nil); r.Status != c.status {
				t.Errorf("%q: %d %s, want %d", c.who, r.Status, r.Body, c.status)
			}
			if r := w.do(c.who, "GET", hfBase+"/api/models/acme/models", nil); r.Status != c.status {
				t.Errorf("%q info: %d, want %d", c.who, r.Status, c.status)
			}
		}
		if r := w.do("", "GET", file, nil, "Authorization", "Bearer nbd_not-a-token"); r.Status != http.StatusUnauthorized {
			t.Errorf("a bad token: %d %s", r.Status, r.Body)
		}
		if r := w.do("", "GET", hfBase+"/acme/pub/resolve/main/w.bin", nil); r.Status != http.StatusOK || !bytes.Equal(r.Body, cfg) {
			t.Errorf("public repo, anonymous: %d %s", r.Status, r.Body)
		}
		var pub artifacts.HFModelInfo
		w.do("", "GET", hfBase+"/api/models/acme/pub", nil).decode(t, &pub)
		if pub.Private || pub.Nimbus.Version != "1.0" {
			t.Errorf("public info %+v", pub)
		}
		// Writes are not part of the protocol here.
		if r := w.do("alice", "PUT", file, cfg); r.Status != http.StatusMethodNotAllowed {
			t.Errorf("PUT resolve: %d", r.Status)
		}
	})
}
