package artifacts_test

import (
	"net/http"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/nimbus-build/nimbus/backend/artifacts"
)

// registryPush uploads a blob to the OCI registry in one request, as who.
func (w *world) registryPush(who, name string, data []byte) resp {
	w.t.Helper()
	d := digest.SHA256.FromBytes(data)
	return w.do(who, "POST", "/v2/"+name+"/blobs/uploads/?digest="+string(d), data)
}

func (w *world) usage(who string) artifacts.Usage {
	w.t.Helper()
	var u artifacts.Usage
	r := w.do(who, "GET", "/api/v1/orgs/acme/storage", nil)
	if r.Status != http.StatusOK {
		w.t.Fatalf("storage usage: %d %s", r.Status, r.Body)
	}
	r.decode(w.t, &u)
	return u
}

// A team's quota counts registry blobs and files, each distinct blob once, and stops uploads
// of both past it with a 413 that keeps nothing; other teams have their own.
func TestQuotaCountsRegistryAndFilesOnce(t *testing.T) {
	w := newWorld(t, false, map[string]string{"NIMBUS_STORAGE_QUOTA": "2000"})
	model := randomBytes(1200)
	if r := w.put("dave", apiBase+"/m/v1/w.bin", model, true); r.Status != http.StatusCreated {
		t.Fatalf("first file: %d %s", r.Status, r.Body)
	}
	if r := w.put("dave", apiBase+"/m/v2/w.bin", randomBytes(1200), true); r.Status != http.StatusRequestEntityTooLarge || r.code() != "payload_too_large" {
		t.Fatalf("past the quota: %d %s", r.Status, r.Body)
	}
	// The team holds these bytes: another name for them costs nothing, when the client says
	// which bytes they are (without the checksum the upload is capped at the room left).
	if r := w.put("dave", apiBase+"/m/v3/w.bin", model, true); r.Status != http.StatusCreated {
		t.Fatalf("the same bytes again: %d %s", r.Status, r.Body)
	}
	if r := w.put("dave", apiBase+"/m/v4/w.bin", model, false); r.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("the same bytes without their checksum: %d %s", r.Status, r.Body)
	}
	if u := w.usage("rita"); u.Used != 1200 || u.Files != 1200 || u.Registry != 0 || u.Quota != 2000 {
		t.Fatalf("usage %+v", u)
	}

	// The registry shares the quota: a push past the room left is a 413 DENIED.
	if r := w.registryPush("dave", "acme/models/img", randomBytes(1000)); r.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("registry push past the quota: %d %s", r.Status, r.Body)
	}
	if r := w.registryPush("dave", "acme/models/img", randomBytes(500)); r.Status != http.StatusCreated {
		t.Fatalf("registry push: %d %s", r.Status, r.Body)
	}
	if r := w.registryPush("dave", "acme/models/img", model); r.Status != http.StatusCreated {
		t.Fatalf("registry push of bytes the team holds as a file: %d %s", r.Status, r.Body)
	}
	if u := w.usage("rita"); u.Used != 1700 || u.Registry != 1700 || u.Files != 1200 {
		t.Fatalf("usage after the registry pushes %+v", u)
	}
	// A chunked upload: each chunk must fit in what is left beside the session's bytes.
	r := w.do("dave", "POST", "/v2/acme/models/img/blobs/uploads/", nil)
	if r.Status != http.StatusAccepted {
		t.Fatalf("start upload: %d %s", r.Status, r.Body)
	}
	loc := r.Header.Get("Location")
	if r := w.do("dave", "PATCH", loc, randomBytes(200), "Content-Range", "0-199"); r.Status != http.StatusAccepted {
		t.Fatalf("first chunk: %d %s", r.Status, r.Body)
	}
	if r := w.do("dave", "PATCH", loc, randomBytes(200), "Content-Range", "200-399"); r.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a chunk past the quota: %d %s", r.Status, r.Body)
	}
	if info := w.do("dave", "GET", loc, nil); info.Header.Get("Range") != "0-199" {
		t.Fatalf("the refused chunk was kept: Range %q", info.Header.Get("Range"))
	}
	// Another team's quota is its own.
	if r := w.registryPush("bob", "other/secret", randomBytes(1900)); r.Status != http.StatusCreated {
		t.Fatalf("another team: %d %s", r.Status, r.Body)
	}
}
