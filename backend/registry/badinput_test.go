package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/nimbus-build/nimbus/backend/artifacts/storage"
	"github.com/nimbus-build/nimbus/backend/registry"
)

// Bad input never writes anything: names that climb out, wrong digests, broken manifests,
// sessions of another repository, chunks out of order. A ".." segment (escaped or not) is
// refused by the server's edge before the registry sees it: 400 NAME_INVALID.
func TestBadInputWritesNothing(t *testing.T) {
	w := newWorld(t)
	blob, d := randomBlob()
	w.push("alice", "acme/app", blob)
	cases := []struct {
		what, method, path string
		body               []byte
		header             []string
		status             int
		code               string
	}{
		{"escaped dot-dot", "GET", "/v2/acme/%2e%2e/other/secret/tags/list", nil, nil, 400, registry.CodeNameInvalid},
		{"escaped slash", "GET", "/v2/acme%2Fapp/tags/list", nil, nil, 404, registry.CodeNameUnknown},
		{"upper case", "GET", "/v2/Acme/App/tags/list", nil, nil, 404, registry.CodeNameUnknown},
		{"dot-dot component", "POST", "/v2/acme/app/../../other/secret/blobs/uploads/", nil, nil, 400, registry.CodeNameInvalid},
		{"wrong digest", "POST", "/v2/acme/app/blobs/uploads/?digest=" + string(digest.SHA256.FromString("other")), blob, nil, 400, registry.CodeDigestInvalid},
		{"malformed digest", "POST", "/v2/acme/app/blobs/uploads/?digest=sha256:zzz", blob, nil, 400, registry.CodeDigestInvalid},
		{"unsupported algorithm", "POST", "/v2/acme/app/blobs/uploads/?digest=md5:d41d8cd98f00b204e9800998ecf8427e", blob, nil, 400, registry.CodeDigestInvalid},
		{"traversal digest", "GET", "/v2/acme/app/blobs/sha256:..%2F..%2Fetc", nil, nil, 400, registry.CodeNameInvalid},
		{"blob of another repository", "GET", "/v2/acme/app/img/blobs/" + string(d), nil, nil, 404, registry.CodeBlobUnknown},
		{"manifest not JSON", "PUT", "/v2/acme/app/manifests/v1", []byte("{"), []string{"Content-Type", "application/vnd.oci.image.manifest.v1+json"}, 400, registry.CodeManifestInvalid},
		{"manifest schema 1", "PUT", "/v2/acme/app/manifests/v1", []byte(`{"schemaVersion":1}`), nil, 400, registry.CodeManifestInvalid},
		{"manifest media type mismatch", "PUT", "/v2/acme/app/manifests/v1", []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`),
			[]string{"Content-Type", "application/vnd.oci.image.manifest.v1+json"}, 400, registry.CodeManifestInvalid},
		{"manifest unknown media type", "PUT", "/v2/acme/app/manifests/v1", []byte(`{"schemaVersion":2,"mediaType":"text/plain"}`), nil, 400, registry.CodeManifestInvalid},
		{"manifest bad layer digest", "PUT", "/v2/acme/app/manifests/v1", []byte(`{"schemaVersion":2,"config":{"mediaType":"a/b","digest":"` + string(d) + `","size":1},"layers":[{"mediaType":"a/b","digest":"sha256:../x","size":1}]}`), nil, 400, registry.CodeManifestInvalid},
		{"manifest digest mismatch", "PUT", "/v2/acme/app/manifests/" + string(d), []byte(`{"schemaVersion":2,"manifests":[]}`), nil, 400, registry.CodeDigestInvalid},
		{"bad tag", "PUT", "/v2/acme/app/manifests/-bad", []byte(`{"schemaVersion":2,"manifests":[]}`), nil, 400, registry.CodeManifestInvalid},
		{"bad tag parameter", "PUT", "/v2/acme/app/manifests/v1?tag=..", []byte(`{"schemaVersion":2,"manifests":[]}`), nil, 400, registry.CodeManifestInvalid},
		{"manifest too large", "PUT", "/v2/acme/app/manifests/v1", bytes.Repeat([]byte(" "), 4<<20+1), nil, 413, registry.CodeSizeInvalid},
		{"unknown upload", "PATCH", "/v2/acme/app/blobs/uploads/0123456789abcdef0123456789abcdef", []byte("x"), nil, 404, registry.CodeBlobUploadUnknown},
		{"upload id traversal", "PATCH", "/v2/acme/app/blobs/uploads/..", []byte("x"), nil, 400, registry.CodeNameInvalid},
		{"wrong method", "POST", "/v2/acme/app/manifests/v1", nil, nil, 405, registry.CodeUnsupported},
	}
	for _, c := range cases {
		before := w.counts()
		r := w.do("alice", c.method, c.path, c.body, c.header...)
		if r.Status != c.status || r.code() != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.what, r.Status, r.Body, c.status, c.code)
		}
		if after := w.counts(); after != before {
			t.Errorf("%s: changed %s into %s", c.what, before, after)
		}
	}
}

func TestUploadSessionsThroughHTTP(t *testing.T) {
	w := newWorld(t)
	data := bytes.Repeat([]byte("0123456789"), 300)
	d := digest.SHA256.FromBytes(data)
	start := func(name string) string {
		r := w.do("alice", "POST", "/v2/"+name+"/blobs/uploads/", nil)
		if r.Status != 202 || r.Header.Get("Range") != "0-0" {
			t.Fatalf("start: %d %v", r.Status, r.Header)
		}
		return r.Header.Get("Location")
	}
	loc := start("acme/app")
	// The session is acme/app's: another repository does not know it.
	other := strings.Replace(loc, "/acme/app/", "/acme/pub/", 1)
	if r := w.do("alice", "PATCH", other, data[:10]); r.Status != 404 || r.code() != registry.CodeBlobUploadUnknown {
		t.Fatalf("session of another repository: %d %s", r.Status, r.Body)
	}
	if r := w.do("alice", "PATCH", loc, data[:1000], "Content-Range", "0-999"); r.Status != 202 || r.Header.Get("Range") != "0-999" {
		t.Fatalf("first chunk: %d %v", r.Status, r.Header)
	}
	// Out of order: 416, and where to go on.
	r := w.do("alice", "PATCH", loc, data[2000:], "Content-Range", "2000-2999")
	if r.Status != 416 || r.Header.Get("Range") != "0-999" || r.Header.Get("Location") == "" {
		t.Fatalf("out-of-order chunk: %d %v %s", r.Status, r.Header, r.Body)
	}
	if r := w.do("alice", "PATCH", loc, data[1000:1500], "Content-Range", "1000-1999"); r.Status != 400 || r.code() != registry.CodeSizeInvalid {
		t.Fatalf("Content-Range longer than the body: %d %s", r.Status, r.Body)
	}
	if r := w.do("alice", "GET", loc, nil); r.Status != 204 || r.Header.Get("Range") != "0-999" {
		t.Fatalf("status: %d %v", r.Status, r.Header)
	}
	// The last chunk with the PUT, under a wrong digest: 400, the session is gone, nothing kept.
	before := w.counts()
	bad := digest.SHA256.FromBytes(data[:10])
	if r := w.do("alice", "PUT", loc+"?digest="+string(bad), data[1000:], "Content-Range", "1000-2999"); r.Status != 400 || r.code() != registry.CodeDigestInvalid {
		t.Fatalf("wrong digest: %d %s", r.Status, r.Body)
	}
	if r := w.do("alice", "GET", loc, nil); r.Status != 404 {
		t.Fatalf("session after a wrong digest: %d", r.Status)
	}
	if after := w.counts(); after != before {
		t.Fatalf("a wrong digest kept something: %s → %s", before, after)
	}
	// Again, properly: stream, then PUT with the digest.
	loc = start("acme/app")
	if r := w.do("alice", "PATCH", loc, data); r.Status != 202 {
		t.Fatalf("stream: %d", r.Status)
	}
	r = w.do("alice", "PUT", loc+"?digest="+string(d), nil)
	if r.Status != 201 || r.Header.Get("Docker-Content-Digest") != string(d) || r.Header.Get("Location") != "/v2/acme/app/blobs/"+string(d) {
		t.Fatalf("finish: %d %v %s", r.Status, r.Header, r.Body)
	}
	// Resumed downloads: Range and If-Range on the digest ETag.
	r = w.do("alice", "GET", "/v2/acme/app/blobs/"+string(d), nil, "Range", "bytes=100-199", "If-Range", `"`+string(d)+`"`)
	if r.Status != 206 || !bytes.Equal(r.Body, data[100:200]) || r.Header.Get("Content-Range") != fmt.Sprintf("bytes 100-199/%d", len(data)) {
		t.Fatalf("range: %d %v", r.Status, r.Header)
	}
	r = w.do("alice", "GET", "/v2/acme/app/blobs/"+string(d), nil, "Range", "bytes=100-199", "If-Range", `"sha256:other"`)
	if r.Status != 200 || len(r.Body) != len(data) {
		t.Fatalf("stale If-Range: %d", r.Status)
	}
	// A cancelled session is gone.
	loc = start("acme/app")
	if r := w.do("alice", "DELETE", loc, nil); r.Status != 204 {
		t.Fatalf("cancel: %d", r.Status)
	}
	if r := w.do("alice", "PATCH", loc, data); r.Status != 404 {
		t.Fatalf("patch after cancel: %d", r.Status)
	}
}

// Mounts never cross teams: not from a named repository the caller cannot read, and not by
// digest alone.
func TestMountsStayWithinWhatTheCallerReads(t *testing.T) {
	w := newWorld(t)
	secret, d := randomBlob()
	if s := w.push("bob", "other/secret", secret); s != 201 {
		t.Fatal(s)
	}
	for _, q := range []string{"?mount=" + string(d) + "&from=other/secret", "?mount=" + string(d)} {
		r := w.do("alice", "POST", "/v2/acme/app/blobs/uploads/"+q, nil)
		if r.Status != 202 {
			t.Fatalf("mount %s: %d %s", q, r.Status, r.Body)
		}
	}
	if r := w.do("alice", "HEAD", "/v2/acme/app/blobs/"+string(d), nil); r.Status != 404 {
		t.Fatalf("another team's blob became readable: %d", r.Status)
	}
	// Within a team, both mount.
	own, od := randomBlob()
	w.push("alice", "acme/pub", own)
	for i, q := range []string{"?mount=" + string(od) + "&from=acme/pub", "?mount=" + string(od)} {
		name := []string{"acme/app", "acme/app/img"}[i]
		if r := w.do("alice", "POST", "/v2/"+name+"/blobs/uploads/"+q, nil); r.Status != 201 || r.Header.Get("Docker-Content-Digest") != string(od) {
			t.Fatalf("mount %s into %s: %d %s", q, name, r.Status, r.Body)
		}
	}
}

func TestTagPagesAndDeletes(t *testing.T) {
	w := newWorld(t)
	cfg, cd := randomBlob()
	w.push("alice", "acme/app", cfg)
	man := []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"` + string(cd) + `","size":1000},"layers":[]}`)
	md := digest.SHA256.FromBytes(man)
	for _, tag := range []string{"b", "a", "d", "c", "e"} {
		if r := w.do("dave", "PUT", "/v2/acme/app/manifests/"+tag, man, "Content-Type", "application/vnd.oci.image.manifest.v1+json"); r.Status != 201 {
			t.Fatalf("put %s: %d %s", tag, r.Status, r.Body)
		}
	}
	var got []string
	next := "/v2/acme/app/tags/list?n=2"
	for next != "" {
		r := w.do("rita", "GET", next, nil)
		var page struct {
			Name string   `json:"name"`
			Tags []string `json:"tags"`
		}
		if err := json.Unmarshal(r.Body, &page); err != nil || r.Status != 200 || page.Name != "acme/app" || len(page.Tags) > 2 {
			t.Fatalf("page %s: %d %s", next, r.Status, r.Body)
		}
		got = append(got, page.Tags...)
		next = ""
		if l := r.Header.Get("Link"); l != "" {
			next = strings.TrimSuffix(strings.TrimPrefix(l, "<"), `>; rel="next"`)
		}
	}
	if strings.Join(got, ",") != "a,b,c,d,e" {
		t.Fatalf("pages: %v", got)
	}
	r := w.do("rita", "GET", "/v2/acme/app/manifests/a", nil)
	if r.Status != 200 || !bytes.Equal(r.Body, man) || r.Header.Get("Content-Type") != "application/vnd.oci.image.manifest.v1+json" ||
		r.Header.Get("Docker-Content-Digest") != string(md) {
		t.Fatalf("get by tag: %d %v", r.Status, r.Header)
	}
	// Deletes are for repo admins: a developer may overwrite a tag, not remove it.
	if r := w.do("dave", "DELETE", "/v2/acme/app/manifests/a", nil); r.Status != 403 {
		t.Fatalf("developer deleting a tag: %d", r.Status)
	}
	if r := w.do("alice", "DELETE", "/v2/acme/app/manifests/a", nil); r.Status != 202 {
		t.Fatalf("delete tag: %d", r.Status)
	}
	if r := w.do("alice", "HEAD", "/v2/acme/app/manifests/a", nil); r.Status != 404 {
		t.Fatalf("deleted tag: %d", r.Status)
	}
	if r := w.do("alice", "DELETE", "/v2/acme/app/manifests/"+string(md), nil); r.Status != 202 {
		t.Fatalf("delete manifest: %d", r.Status)
	}
	if r := w.do("alice", "GET", "/v2/acme/app/tags/list", nil); !strings.Contains(string(r.Body), `"tags":[]`) {
		t.Fatalf("tags after deleting their manifest: %s", r.Body)
	}
	if r := w.do("alice", "DELETE", "/v2/acme/app/blobs/"+string(cd), nil); r.Status != 202 {
		t.Fatalf("delete blob: %d", r.Status)
	}
	if r := w.do("alice", "HEAD", "/v2/acme/app/blobs/"+string(cd), nil); r.Status != http.StatusNotFound {
		t.Fatalf("deleted blob: %d", r.Status)
	}
}

func TestGarbageCollectorQueries(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	blob, d := randomBlob()
	w.push("alice", "acme/app", blob)
	if ok, err := w.app.Registry.BlobReferenced(ctx, d); err != nil || !ok {
		t.Fatalf("linked blob: %v %v", ok, err)
	}
	w.do("alice", "DELETE", "/v2/acme/app/blobs/"+string(d), nil)
	if ok, err := w.app.Registry.BlobReferenced(ctx, d); err != nil || ok {
		t.Fatalf("unlinked blob: %v %v", ok, err)
	}
	loc := w.do("alice", "POST", "/v2/acme/app/blobs/uploads/", nil).Header.Get("Location")
	w.do("alice", "PATCH", loc, blob)
	if n, err := w.app.Registry.ExpireUploads(ctx, w.clock.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("fresh upload expired: %d %v", n, err)
	}
	if n, err := w.app.Registry.ExpireUploads(ctx, w.clock.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("expire: %d %v", n, err)
	}
	if r := w.do("alice", "GET", loc, nil); r.Status != 404 {
		t.Fatalf("expired upload: %d", r.Status)
	}
	left := 0
	w.app.Storage.WalkUploads(ctx, func(storage.UploadInfo) error { left++; return nil })
	if left != 0 {
		t.Fatalf("%d storage sessions left", left)
	}
}

// TestRoutesAreServed: every route Routes lists reaches an endpoint of that method (never "no
// registry endpoint" or 405), so the server's bad-input sweep, which takes its registry routes
// from Routes, sweeps real ones.
func TestRoutesAreServed(t *testing.T) {
	w := newWorld(t)
	vals := strings.NewReplacer("{name}", "acme/app", "{reference}", "latest", "{digest}", "sha256:"+strings.Repeat("0", 64),
		"{session}", "0123456789abcdef0123456789abcdef")
	routes := w.app.Registry.Routes()
	if len(routes) < 12 {
		t.Fatalf("only %d routes: %+v", len(routes), routes)
	}
	for _, rt := range routes {
		r := w.do("alice", rt.Method, vals.Replace(rt.Path), nil)
		// (A HEAD answer has no body to say "no registry endpoint"; its GET twin is listed too.)
		if r.Status == http.StatusMethodNotAllowed || strings.Contains(string(r.Body), "no registry endpoint") {
			t.Errorf("%s %s: %d %s", rt.Method, rt.Path, r.Status, r.Body)
		}
	}
}
