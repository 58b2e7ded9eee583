package artifacts_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/backend/artifacts"
)

// eachDialect runs fn against a world on SQLite and on PostgreSQL.
func eachDialect(t *testing.T, env map[string]string, fn func(t *testing.T, w *world)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, newWorld(t, false, env))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, newWorld(t, true, env))
	})
}

// A pipeline publishes a model, people read it every way a client resumes, listings show what
// produced it, published files never change, deletes need admin.
func TestPublishDownloadAndList(t *testing.T) {
	eachDialect(t, nil, func(t *testing.T, w *world) {
		weights, cfg := randomBytes(300_000), []byte(`{"layers": 12}`)
		r := w.put("job", apiBase+"/bert/v1/model.bin", weights, true)
		if r.Status != http.StatusCreated {
			t.Fatalf("push: %d %s", r.Status, r.Body)
		}
		var f artifacts.FileJSON
		r.decode(t, &f)
		if f.Digest != "sha256:"+sha256Hex(weights) || f.Size != int64(len(weights)) || !strings.HasSuffix(f.DownloadURL, apiBase+"/bert/v1/model.bin") {
			t.Fatalf("pushed file %+v", f)
		}
		// The same bytes again are a no-op, with the checksum (body unread) or without it.
		for _, sum := range []bool{true, false} {
			if r := w.put("job", apiBase+"/bert/v1/model.bin", weights, sum); r.Status != http.StatusOK {
				t.Fatalf("same content again (checksum %v): %d %s", sum, r.Status, r.Body)
			}
		}
		// Other bytes under a published name are a conflict, and leave nothing behind.
		before, sessions := w.blobs(), w.uploads()
		other := randomBytes(1000)
		for _, sum := range []bool{true, false} {
			if r := w.put("job", apiBase+"/bert/v1/model.bin", other, sum); r.Status != http.StatusConflict || r.code() != "conflict" {
				t.Fatalf("other content (checksum %v): %d %s", sum, r.Status, r.Body)
			}
		}
		if len(w.blobs()) != len(before) || w.uploads() != sessions {
			t.Fatal("a refused upload left bytes in the store")
		}
		// The pipeline adds a file to its version (with the RFC 3230 header); a person may not.
		sum := sha256.Sum256(cfg)
		if r := w.do("job", "PUT", apiBase+"/bert/v1/config.json", cfg, "Digest", "sha-256="+base64.StdEncoding.EncodeToString(sum[:])); r.Status != http.StatusCreated {
			t.Fatalf("second file: %d %s", r.Status, r.Body)
		}
		if r := w.put("dave", apiBase+"/bert/v1/extra.txt", []byte("x"), true); r.Status != http.StatusConflict {
			t.Fatalf("a person adding to a pipeline's version: %d %s", r.Status, r.Body)
		}
		v2 := randomBytes(5000)
		if r := w.put("dave", apiBase+"/bert/v2/model.bin", v2, false); r.Status != http.StatusCreated {
			t.Fatalf("v2 by a person: %d %s", r.Status, r.Body)
		}

		// Listings.
		var pkgs struct{ Items []artifacts.PackageJSON }
		w.do("deploy", "GET", apiBase, nil).decode(t, &pkgs)
		if len(pkgs.Items) != 1 || pkgs.Items[0].Name != "bert" || pkgs.Items[0].VersionCount != 2 || pkgs.Items[0].Latest != "v2" {
			t.Fatalf("packages %+v", pkgs)
		}
		var vers struct {
			Items      []artifacts.VersionJSON
			NextCursor string `json:"next_cursor"`
		}
		w.do("rita", "GET", apiBase+"/bert?limit=1", nil).decode(t, &vers)
		if len(vers.Items) != 1 || vers.Items[0].Version != "v2" || vers.Items[0].Build != nil || vers.Items[0].PushedBy != "dave" || vers.NextCursor == "" {
			t.Fatalf("first page of versions %+v", vers)
		}
		cursor := vers.NextCursor
		vers.NextCursor = ""
		w.do("rita", "GET", apiBase+"/bert?limit=1&cursor="+cursor, nil).decode(t, &vers)
		if len(vers.Items) != 1 || vers.Items[0].Version != "v1" || vers.NextCursor != "" {
			t.Fatalf("second page of versions %+v", vers)
		}
		v1 := vers.Items[0]
		if v1.Build == nil || v1.Build.Number != w.buildNumber || v1.Build.Commit != w.commit || v1.FileCount != 2 ||
			v1.Size != int64(len(weights)+len(cfg)) || v1.PushedBy != "dave" {
			t.Fatalf("v1 does not say what produced it: %+v %+v", v1, v1.Build)
		}
		var detail artifacts.VersionJSON
		w.do("deploy", "GET", apiBase+"/bert/latest", nil).decode(t, &detail)
		if detail.Version != "v2" || len(detail.Files) != 1 {
			t.Fatalf("latest %+v", detail)
		}
		w.do("deploy", "GET", apiBase+"/bert/v1", nil).decode(t, &detail)
		if len(detail.Files) != 2 || detail.Files[0].Name != "config.json" || detail.Files[1].Digest != f.Digest {
			t.Fatalf("v1 files %+v", detail.Files)
		}

		checkDownloads(t, w, weights, f.Digest)
		if r := w.do("deploy", "GET", apiBase+"/bert/latest/model.bin", nil); r.Status != 200 || !bytes.Equal(r.Body, v2) ||
			r.Header.Get("X-Artifact-Version") != "v2" {
			t.Fatalf("latest download: %d %q", r.Status, r.Header.Get("X-Artifact-Version"))
		}

		// Deletes: admins only; the version goes with its last file, and the name is free again.
		for _, who := range []string{"rita", "dave", "deploy", "job"} {
			if r := w.do(who, "DELETE", apiBase+"/bert/v2/model.bin", nil); r.Status != http.StatusForbidden {
				t.Fatalf("delete as %s: %d %s", who, r.Status, r.Body)
			}
		}
		if r := w.do("alice", "DELETE", apiBase+"/bert/latest/model.bin", nil); r.Status != http.StatusNotFound {
			t.Fatalf("delete through latest: %d", r.Status)
		}
		if r := w.do("alice", "DELETE", apiBase+"/bert/v2/model.bin", nil); r.Status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		if r := w.do("alice", "GET", apiBase+"/bert/v2", nil); r.Status != http.StatusNotFound {
			t.Fatalf("the emptied version is still there: %d", r.Status)
		}
		if r := w.put("dave", apiBase+"/bert/v2/model.bin", other, true); r.Status != http.StatusCreated {
			t.Fatalf("republish after delete: %d %s", r.Status, r.Body)
		}
		if r := w.do("alice", "DELETE", apiBase+"/bert/v1", nil); r.Status != http.StatusNoContent {
			t.Fatalf("delete version: %d %s", r.Status, r.Body)
		}
		if r := w.do("alice", "GET", apiBase+"/bert/v1/model.bin", nil); r.Status != http.StatusNotFound {
			t.Fatalf("file of a deleted version: %d", r.Status)
		}
	})
}

// checkDownloads reads a file the ways clients resume: whole, by range, with If-Range and
// ETag, and HEAD.
func checkDownloads(t *testing.T, w *world, data []byte, d string) {
	t.Helper()
	path := apiBase + "/bert/v1/model.bin"
	r := w.do("deploy", "GET", path, nil)
	if r.Status != 200 || !bytes.Equal(r.Body, data) || r.Header.Get("ETag") != `"`+d+`"` ||
		r.Header.Get("X-Checksum-Sha256") != strings.TrimPrefix(d, "sha256:") || r.Header.Get("Accept-Ranges") != "bytes" {
		t.Fatalf("download: %d %v", r.Status, r.Header)
	}
	etag := r.Header.Get("ETag")
	r = w.do("deploy", "GET", path, nil, "Range", "bytes=1000-", "If-Range", etag)
	if r.Status != http.StatusPartialContent || !bytes.Equal(r.Body, data[1000:]) {
		t.Fatalf("resume: %d (%d bytes)", r.Status, len(r.Body))
	}
	r = w.do("deploy", "GET", path, nil, "Range", "bytes=1000-", "If-Range", `"sha256:other"`)
	if r.Status != http.StatusOK || !bytes.Equal(r.Body, data) {
		t.Fatalf("If-Range of other content must send it whole: %d", r.Status)
	}
	r = w.do("deploy", "GET", path, nil, "Range", fmt.Sprintf("bytes=%d-", len(data)))
	if r.Status != http.StatusRequestedRangeNotSatisfiable || r.code() != "bad_request" ||
		r.Header.Get("Content-Range") != fmt.Sprintf("bytes */%d", len(data)) {
		t.Fatalf("a range past the end: %d %v %s", r.Status, r.Header, r.Body)
	}
	if r = w.do("deploy", "GET", path, nil, "If-None-Match", etag); r.Status != http.StatusNotModified {
		t.Fatalf("If-None-Match: %d", r.Status)
	}
	r = w.do("deploy", "HEAD", path, nil)
	if r.Status != 200 || r.Header.Get("Content-Length") != fmt.Sprint(len(data)) || len(r.Body) != 0 {
		t.Fatalf("HEAD: %d %v", r.Status, r.Header)
	}
}

// Bad input: every refused upload leaves the database, the store and its sessions as they
// were.
func TestBadInputKeepsNothing(t *testing.T) {
	eachDialect(t, map[string]string{"NIMBUS_STORAGE_QUOTA": "64KiB"}, func(t *testing.T, w *world) {
		data := randomBytes(1000)
		big := randomBytes(70 << 10)
		sum := sha256Hex(data)
		cases := []struct {
			name, who, path string
			body            []byte
			header          []string
			want            int
		}{
			// Names that break the path rule (internal/userpath) are a 400 saying why; names
			// outside a name's alphabet a 422.
			{"package ..", "dave", apiBase + "/../v1/f", data, nil, 400},
			{"version ..", "dave", apiBase + "/p/../f", data, nil, 400},
			{"file ..", "dave", apiBase + "/p/v1/..", data, nil, 400},
			{"encoded ..", "dave", apiBase + "/p/v1/%2e%2e", data, nil, 400},
			{"encoded slash", "dave", apiBase + "/p/v1/a%2Fb", data, nil, 404},
			{"backslash", "dave", apiBase + "/p/v1/a%5Cb", data, nil, 400},
			{"hidden file", "dave", apiBase + "/p/v1/.env", data, nil, 422},
			{"NUL", "dave", apiBase + "/p/v1/a%00b", data, nil, 400},
			{"option-like", "dave", apiBase + "/-rf/v1/f", data, nil, 422},
			{"version latest", "dave", apiBase + "/p/latest/f", data, nil, 422},
			{"long name", "dave", apiBase + "/p/v1/" + strings.Repeat("a", 256), data, nil, 400},
			{"name outside the alphabet", "dave", apiBase + "/p/v1/a%20b", data, nil, 422},
			{"wrong checksum", "dave", apiBase + "/p/v1/f", data, []string{"X-Checksum-Sha256", sha256Hex(big)}, 400},
			{"malformed checksum", "dave", apiBase + "/p/v1/f", data, []string{"X-Checksum-Sha256", "abc"}, 400},
			{"wrong Digest", "dave", apiBase + "/p/v1/f", data, []string{"Digest", "sha-256=" + base64.StdEncoding.EncodeToString(make([]byte, 32))}, 400},
			{"headers disagree", "dave", apiBase + "/p/v1/f", data, []string{"X-Checksum-Sha256", sum, "Digest", "sha-256=" + base64.StdEncoding.EncodeToString(make([]byte, 32))}, 400},
			{"over the quota", "dave", apiBase + "/p/v1/f", big, nil, 413},
			{"over the quota, with checksum", "dave", apiBase + "/p/v1/f", big, []string{"X-Checksum-Sha256", sha256Hex(big)}, 413},
			{"token without registry:write", "readonly", apiBase + "/p/v1/f", data, nil, 403},
			{"token with repo scopes only", "reposcope", apiBase + "/p/v1/f", data, nil, 403},
			{"deploy token", "deploy", apiBase + "/p/v1/f", data, nil, 403},
			{"reporter", "rita", apiBase + "/p/v1/f", data, nil, 403},
			{"another team's repo", "bob", apiBase + "/p/v1/f", data, nil, 404},
			{"into another team's repo", "alice", "/api/v1/repos/other/secret/artifacts/p/v1/f", data, nil, 404},
			{"anonymous", "", apiBase + "/p/v1/f", data, nil, 404},
			{"anonymous, public repo", "", "/api/v1/repos/acme/pub/artifacts/p/v1/f", data, nil, 401},
			{"archived repo", "alice", "/api/v1/repos/acme/old/artifacts/p/v1/f", data, nil, 403},
		}
		before, sessions := w.blobs(), w.uploads()
		rows := w.rows()
		for _, c := range cases {
			r := w.do(c.who, "PUT", c.path, c.body, c.header...)
			if r.Status != c.want || r.code() == "" {
				t.Errorf("%s: %d (%s), want %d: %s", c.name, r.Status, r.code(), c.want, r.Body)
			}
		}
		// The same oversize body without Content-Length: the quota cuts the stream.
		req, _ := http.NewRequest("PUT", w.srv.URL+apiBase+"/p/v1/chunked", struct{ *bytes.Reader }{bytes.NewReader(big)})
		req.Header.Set("Authorization", "Bearer "+w.creds["dave"])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("chunked over the quota: %d", res.StatusCode)
		}
		if got := w.blobs(); len(got) != len(before) {
			t.Errorf("refused uploads left blobs: %v", got)
		}
		if w.uploads() != sessions {
			t.Error("refused uploads left upload sessions")
		}
		if got := w.rows(); got != rows {
			t.Errorf("refused uploads changed the database: %s → %s", rows, got)
		}
		// A ".." segment never reaches a route: the edge refuses the URL (400).
		if r := w.do("alice", "GET", apiBase+"/../v1/f", nil); r.Status != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400", apiBase+"/../v1/f", r.Status)
		}
		// Reads of malformed or unknown names are 404s, and other teams' repos too.
		for _, p := range []string{apiBase + "/p/v1/.env", apiBase + "/p/LATEST/f", apiBase + "/nope/latest/f",
			"/api/v1/repos/other/secret/artifacts/p/v1/f"} {
			if r := w.do("alice", "GET", p, nil); r.Status != http.StatusNotFound {
				t.Errorf("GET %s: %d", p, r.Status)
			}
		}
		// Dots inside a name make no ".." segment: bert..v2.bin was refused as if it climbed
		// out of its version.
		if r := w.do("dave", "PUT", apiBase+"/p/v1/bert..v2.bin", data); r.Status != http.StatusCreated {
			t.Errorf("bert..v2.bin: %d, want 201: %s", r.Status, r.Body)
		}
	})
}

// rows counts the rows of the files' tables.
func (w *world) rows() string {
	w.t.Helper()
	var counts []string
	for _, m := range artifacts.Models() {
		var n int64
		if err := w.app.DB.Model(m).Count(&n).Error; err != nil {
			w.t.Fatal(err)
		}
		counts = append(counts, fmt.Sprint(n))
	}
	return strings.Join(counts, "/")
}
