package registry_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/nimbus-build/nimbus/backend/app"
	"github.com/nimbus-build/nimbus/backend/app/apptest"
	"github.com/nimbus-build/nimbus/backend/artifacts/storage"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/registry"
)

// world is a whole Nimbus app (SQLite, embedded Redis, local storage) behind a real HTTP
// server: team acme (owner alice, developer dave, reporter rita) with the private repo app, the
// public repo pub and the archived repo old; team other (owner bob) with the private repo
// secret. creds holds one credential per kind of caller, as the password of HTTP Basic.
type world struct {
	t     *testing.T
	app   *app.App
	srv   *httptest.Server
	clock *clock.Fake
	creds map[string]string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, clock: clock.NewFake(time.Now()), creds: map[string]string{}}
	s := apptest.Start(t, nil, app.Options{Clock: w.clock})
	w.app, w.srv = s.App, s.HTTP
	w.creds = s.Cast(t, "app", 1, "").Creds
	return w
}

type resp struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r resp) code() string {
	var b struct {
		Errors []struct{ Code string } `json:"errors"`
	}
	json.Unmarshal(r.Body, &b)
	if len(b.Errors) == 0 {
		return ""
	}
	return b.Errors[0].Code
}

// do sends a request; who is a key of creds (sent as HTTP Basic), "" for anonymous, or
// "Bearer …" for a registry token.
func (w *world) do(who, method, path string, body []byte, header ...string) resp {
	w.t.Helper()
	req, err := http.NewRequest(method, w.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		w.t.Fatal(err)
	}
	if body == nil {
		req.Body, req.ContentLength = nil, 0
	}
	switch {
	case strings.HasPrefix(who, "Bearer "):
		req.Header.Set("Authorization", who)
	case who != "":
		req.SetBasicAuth(who, w.creds[who])
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := w.srv.Client().Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{Status: res.StatusCode, Header: res.Header, Body: b}
}

func randomBlob() ([]byte, digest.Digest) {
	b := make([]byte, 1000)
	rand.Read(b)
	return b, digest.SHA256.FromBytes(b)
}

// push uploads a blob monolithically and returns the status.
func (w *world) push(who, name string, data []byte) int {
	return w.do(who, "POST", "/v2/"+name+"/blobs/uploads/?digest="+string(digest.SHA256.FromBytes(data)), data).Status
}

// counts is how many blobs the store and the database hold: refused writes change neither.
func (w *world) counts() string {
	n := 0
	w.app.Storage.Walk(context.Background(), func(storage.Info) error { n++; return nil })
	var links, mans, tags int64
	w.app.DB.Model(&registry.Blob{}).Count(&links)
	w.app.DB.Model(&registry.Manifest{}).Count(&mans)
	w.app.DB.Model(&registry.Tag{}).Count(&tags)
	return fmt.Sprintf("stored %d, linked %d, manifests %d, tags %d", n, links, mans, tags)
}

func TestAuthorizationMatrix(t *testing.T) {
	w := newWorld(t)
	blob, d := randomBlob()
	if s := w.push("alice", "acme/app", blob); s != 201 {
		t.Fatalf("setup push: %d", s)
	}
	if s := w.push("bob", "other/secret", blob); s != 201 {
		t.Fatalf("setup push: %d", s)
	}
	cols := []string{"", "alice", "dave", "rita", "bob", "readonly", "reposcope", "deploy", "job"}
	rows := []struct {
		what, method, path string
		want               string // one status per column
	}{
		{"pull a private repo", "GET", "/v2/acme/app/blobs/" + string(d), "401 200 200 200 404 200 403 200 200"},
		{"pull an image below it", "GET", "/v2/acme/app/img/tags/list", "401 200 200 200 404 200 403 200 200"},
		{"pull a public repo", "GET", "/v2/acme/pub/tags/list", "200 200 200 200 200 200 403 200 200"},
		{"pull another team's private repo", "GET", "/v2/other/secret/blobs/" + string(d), "401 404 404 404 200 404 404 404 404"},
		{"pull a repo that does not exist", "GET", "/v2/acme/nope/tags/list", "401 404 404 404 404 404 404 404 404"},
		{"pull a name of the wrong shape", "GET", "/v2/acme/app/a/b/tags/list", "401 404 404 404 404 404 404 404 404"},
		{"push to a private repo", "PUSH", "acme/app/img", "401 201 201 403 404 403 403 403 201"},
		{"push to a public repo", "PUSH", "acme/pub", "401 201 201 403 403 403 403 403 403"},
		{"push to another team's repo", "PUSH", "other/secret", "401 404 404 404 201 404 404 404 404"},
		{"push to an archived repo", "PUSH", "acme/old", "401 403 403 403 404 403 403 404 404"},
		{"delete a blob", "DELETE", "/v2/acme/app/blobs/sha256:" + strings.Repeat("0", 64), "401 404 403 403 404 403 403 403 403"},
	}
	for _, row := range rows {
		want := strings.Fields(row.want)
		for i, who := range cols {
			before := w.counts()
			var got resp
			if row.method == "PUSH" {
				b, _ := randomBlob()
				got = w.do(who, "POST", "/v2/"+row.path+"/blobs/uploads/?digest="+string(digest.SHA256.FromBytes(b)), b)
			} else {
				got = w.do(who, row.method, row.path, nil)
			}
			if fmt.Sprint(got.Status) != want[i] {
				t.Errorf("%s as %q: %d %s, want %s", row.what, who, got.Status, got.Body, want[i])
				continue
			}
			switch got.Status {
			case 401:
				if c := got.Header.Get("WWW-Authenticate"); !strings.HasPrefix(c, `Bearer realm="`+w.srv.URL+`/v2/token",service="`) {
					t.Errorf("%s as %q: challenge %q", row.what, who, c)
				}
			case 404:
				if row.method != "DELETE" && got.code() != registry.CodeNameUnknown {
					t.Errorf("%s as %q: 404 %s, want NAME_UNKNOWN", row.what, who, got.Body)
				}
			case 403:
				if got.code() != registry.CodeDenied {
					t.Errorf("%s as %q: 403 %s", row.what, who, got.Body)
				}
			}
			if got.Status >= 400 && w.counts() != before {
				t.Errorf("%s as %q: a refused request changed %s into %s", row.what, who, before, w.counts())
			}
		}
	}
}

// token asks the token endpoint for a scope with HTTP Basic user:pass (none when user is "").
func (w *world) token(user, pass, scope string) (int, string) {
	w.t.Helper()
	req, _ := http.NewRequest("GET", w.srv.URL+"/v2/token?service=x&scope="+url.QueryEscape(scope), nil)
	if user != "" || pass != "" {
		req.SetBasicAuth(user, pass)
	}
	res, err := w.srv.Client().Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer res.Body.Close()
	var tr struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
	}
	json.NewDecoder(res.Body).Decode(&tr)
	if res.StatusCode == 200 && (tr.Token == "" || tr.Token != tr.AccessToken || tr.ExpiresIn != 300) {
		w.t.Fatalf("token response: %+v", tr)
	}
	return res.StatusCode, "Bearer " + tr.Token
}

func TestTokenEndpoint(t *testing.T) {
	w := newWorld(t)
	blob, d := randomBlob()
	w.push("alice", "acme/app", blob)

	// docker login: the ping challenges, the password or a token buys a token.
	if r := w.do("", "GET", "/v2/", nil); r.Status != 401 || r.Header.Get("Docker-Distribution-API-Version") != "registry/2.0" {
		t.Fatalf("anonymous ping: %d %v", r.Status, r.Header)
	}
	if r := w.do("alice", "GET", "/v2/", nil); r.Status != 200 {
		t.Fatalf("ping with a token: %d", r.Status)
	}
	if s, _ := w.token("rita", "wrong password!", "repository:acme/app:pull"); s != 401 {
		t.Fatalf("bad password: %d", s)
	}
	// Passwords are rate-limited as logins are: past the limit even the right one is 429.
	for range 10 {
		w.token("dave", "wrong password!", "")
	}
	if s, _ := w.token("dave", "a long enough passphrase xxxx", ""); s != 429 {
		t.Fatalf("right password past the limit: %d", s)
	}
	_, ritaTok := w.token("rita", "a long enough passphrase xxxx", "repository:acme/app:pull,push")
	if r := w.do(ritaTok, "GET", "/v2/acme/app/blobs/"+string(d), nil); r.Status != 200 {
		t.Fatalf("reporter's token pull: %d %s", r.Status, r.Body)
	}
	// The reporter was granted pull only: a push is denied, not re-challenged.
	if r := w.do(ritaTok, "POST", "/v2/acme/app/blobs/uploads/", nil); r.Status != 403 {
		t.Fatalf("reporter's token push: %d %s", r.Status, r.Body)
	}
	// A token of an owner that asked for pull only is re-challenged for push.
	_, pullOnly := w.token("alice", w.creds["alice"], "repository:acme/app:pull")
	r := w.do(pullOnly, "POST", "/v2/acme/app/blobs/uploads/", nil)
	if r.Status != 401 || !strings.Contains(r.Header.Get("WWW-Authenticate"), `scope="repository:acme/app:pull,push"`) {
		t.Fatalf("pull-only token pushing: %d %v", r.Status, r.Header)
	}
	_, full := w.token("alice", w.creds["alice"], "repository:acme/app:pull,push,delete")
	if r := w.do(full, "POST", "/v2/acme/app/blobs/uploads/", nil); r.Status != 202 {
		t.Fatalf("full token push: %d %s", r.Status, r.Body)
	}
	// A token names one repository: another one is re-challenged (alice may) or refused.
	if r := w.do(full, "GET", "/v2/acme/pub/tags/list", nil); r.Status != 401 {
		t.Fatalf("token of another repo: %d", r.Status)
	}
	// Anonymous tokens: pull of public repos only.
	_, anon := w.token("", "", "repository:acme/pub:pull repository:acme/app:pull,push")
	if r := w.do(anon, "GET", "/v2/acme/pub/tags/list", nil); r.Status != 200 {
		t.Fatalf("anonymous token on a public repo: %d", r.Status)
	}
	if r := w.do(anon, "GET", "/v2/acme/app/tags/list", nil); r.Status != 401 {
		t.Fatalf("anonymous token on a private repo: %d", r.Status)
	}
	// Deploy tokens read; job tokens push to their own repo only.
	_, dep := w.token("x", w.creds["deploy"], "repository:acme/app:pull,push")
	if r := w.do(dep, "POST", "/v2/acme/app/blobs/uploads/", nil); r.Status != 403 {
		t.Fatalf("deploy token push: %d", r.Status)
	}
	_, job := w.token("x", w.creds["job"], "repository:acme/app/model:pull,push repository:acme/pub:push")
	b2, _ := randomBlob()
	if r := w.do(job, "POST", "/v2/acme/app/model/blobs/uploads/?digest="+string(digest.SHA256.FromBytes(b2)), b2); r.Status != 201 {
		t.Fatalf("job token push: %d %s", r.Status, r.Body)
	}
	if r := w.do(job, "POST", "/v2/acme/pub/blobs/uploads/", nil); r.Status != 403 {
		t.Fatalf("job token push to another repo: %d", r.Status)
	}
	// A Nimbus token as a bearer buys a registry token too; a registry token does not.
	req, _ := http.NewRequest("GET", w.srv.URL+"/v2/token?scope=repository:acme/app:pull", nil)
	req.Header.Set("Authorization", "Bearer "+w.creds["deploy"])
	if res, err := w.srv.Client().Do(req); err != nil || res.StatusCode != 200 {
		t.Fatalf("token for a bearer Nimbus token: %v %v", res, err)
	}
	req.Header.Set("Authorization", full)
	if res, err := w.srv.Client().Do(req); err != nil || res.StatusCode != 401 {
		t.Fatalf("token for a registry token: %v %v", res, err)
	}
	// Tampered and expired tokens are 401.
	if r := w.do(full[:len(full)-4]+"AAAA", "GET", "/v2/acme/app/tags/list", nil); r.Status != 401 {
		t.Fatalf("tampered token: %d", r.Status)
	}
	w.clock.Advance(6 * time.Minute)
	if r := w.do(full, "GET", "/v2/acme/app/tags/list", nil); r.Status != 401 {
		t.Fatalf("expired token: %d", r.Status)
	}
}
