package artifacts_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/app"
	"github.com/nimbus-build/nimbus/backend/app/apptest"
	"github.com/nimbus-build/nimbus/backend/artifacts"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/webhook"
)

// receiver is a test webhook endpoint: it keeps what it got and answers with the codes given,
// then 200.
type receiver struct {
	mu    sync.Mutex
	got   []http.Header
	body  [][]byte
	codes []int
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got, r.body = append(r.got, req.Header.Clone()), append(r.body, b)
	code := 200
	if len(r.codes) > 0 {
		code, r.codes = r.codes[0], r.codes[1:]
	}
	w.WriteHeader(code)
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// A pipeline publishes a version of two files: the repo's publish webhook hears of it once the
// version settled, signed with its secret, after a retry of a 500; a build's hand-off version
// and a version of another repo are never announced; without the private-address allowance the
// guard refuses the receiver on loopback.
func TestPublishWebhook(t *testing.T) {
	rcv := &receiver{codes: []int{500}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	clk := clock.NewFake(time.Now().UTC())
	s := apptest.Start(t, map[string]string{"NIMBUS_PUBLISH_WEBHOOK_PRIVATE": "true", "NIMBUS_PUBLISH_WEBHOOK_SETTLE": "10s"}, app.Options{Clock: clk})
	w := &world{t: t, app: s.App, srv: s.HTTP, buildNumber: 7, commit: "0123456789abcdef0123456789abcdef01234567"}
	cast := s.Cast(t, "models", w.buildNumber, w.commit)
	w.creds = cast.Creds
	ctx := context.Background()
	const hook = "/api/v1/repos/acme/models/webhooks/publish"

	if r := w.do("reposcope", "GET", hook, nil); r.Status != 404 {
		t.Fatalf("no hook yet: %d %s", r.Status, r.Body)
	}
	if r := w.do("reposcope", "PUT", hook, []byte(`{"url":"ftp://x"}`), "Content-Type", "application/json"); r.Status != 422 {
		t.Fatalf("a bad URL: %d %s", r.Status, r.Body)
	}
	var set artifacts.PublishHookJSON
	r := w.do("reposcope", "PUT", hook, []byte(`{"url":"`+srv.URL+`/deploy"}`), "Content-Type", "application/json")
	if r.Status != 200 {
		t.Fatalf("set the hook: %d %s", r.Status, r.Body)
	}
	r.decode(t, &set)
	if len(set.Secret) != 64 || set.URL != srv.URL+"/deploy" {
		t.Fatalf("the hook %+v", set)
	}
	if r := w.do("reposcope", "GET", hook, nil); r.Status != 200 || strings.Contains(string(r.Body), set.Secret) {
		t.Fatalf("the hook shows its secret again: %d %s", r.Status, r.Body)
	}

	a, b := []byte("weights"), []byte(`{"hidden": 8}`)
	for name, data := range map[string][]byte{"model.bin": a, "config.json": b} {
		if r := w.put("job", apiBase+"/bert/v2/"+name, data, true); r.Status != 201 {
			t.Fatalf("push %s: %d %s", name, r.Status, r.Body)
		}
	}
	if r := w.put("job", apiBase+"/data/nimbus-999999/x.bin", a, true); r.Status == 201 {
		t.Fatalf("another build's hand-off version took a file")
	}

	// Not settled yet: nothing is sent.
	if n, err := s.App.Outbox.Deliver(ctx, artifacts.KindPublish); err != nil || n != 0 || rcv.count() != 0 {
		t.Fatalf("before it settled: %d %v, %d sent", n, err, rcv.count())
	}
	clk.Advance(11 * time.Second)
	if n, err := s.App.Outbox.Deliver(ctx, artifacts.KindPublish); err != nil || n != 0 || rcv.count() != 1 {
		t.Fatalf("the first try (500): %d %v, %d sent", n, err, rcv.count())
	}
	var ds struct {
		Items []artifacts.PublishDeliveryJSON
	}
	w.do("reposcope", "GET", hook+"/deliveries", nil).decode(t, &ds)
	if len(ds.Items) != 1 || ds.Items[0].Status != artifacts.DeliveryPending || ds.Items[0].Attempts != 1 || ds.Items[0].ResponseCode != 500 ||
		ds.Items[0].NextAttempt == nil || !strings.Contains(ds.Items[0].Error, "500") {
		t.Fatalf("after a 500: %+v", ds.Items)
	}
	if n, _ := s.App.Outbox.Deliver(ctx, artifacts.KindPublish); n != 0 || rcv.count() != 1 {
		t.Fatalf("retried before its backoff: %d sent", rcv.count())
	}
	clk.Advance(31 * time.Second)
	if n, err := s.App.Outbox.Deliver(ctx, artifacts.KindPublish); err != nil || n != 1 || rcv.count() != 2 {
		t.Fatalf("the retry: %d %v, %d sent", n, err, rcv.count())
	}
	clk.Advance(time.Hour)
	if n, _ := s.App.Outbox.Deliver(ctx, artifacts.KindPublish); n != 0 || rcv.count() != 2 {
		t.Fatalf("delivered twice: %d sent", rcv.count())
	}

	h, body := rcv.got[1], rcv.body[1]
	if !webhook.Verify([]byte(set.Secret), body, h.Get("X-Nimbus-Signature")) || h.Get("X-Nimbus-Event") != "model.published" || h.Get("X-Nimbus-Delivery") != "1" && h.Get("X-Nimbus-Delivery") == "" {
		t.Errorf("headers %v", h)
	}
	if webhook.Verify([]byte("another secret"), body, h.Get("X-Nimbus-Signature")) {
		t.Errorf("the signature verifies under any secret")
	}
	var got artifacts.PublishJSON
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Event != "model.published" || got.Repo != "acme/models" || got.Package != "bert" || got.Version != "v2" || got.Commit != w.commit ||
		got.Build == nil || *got.Build != 7 || len(got.Files) != 2 || got.Files[0].Name != "config.json" || got.Files[1].SHA256 != "sha256:"+sha256Hex(a) ||
		got.Provenance == nil || !strings.HasSuffix(*got.Provenance, "/record") {
		t.Errorf("body %s", body)
	}
	w.do("reposcope", "GET", hook+"/deliveries", nil).decode(t, &ds)
	if len(ds.Items) != 1 || ds.Items[0].Status != artifacts.DeliveryDelivered || ds.Items[0].Attempts != 2 || ds.Items[0].DeliveredAt == nil {
		t.Fatalf("delivered: %+v", ds.Items)
	}
	if r := w.do("reposcope", "DELETE", hook, nil); r.Status != 204 {
		t.Fatalf("delete: %d", r.Status)
	}
}

// The dial-time guard: with private addresses not allowed, a receiver on loopback is never
// reached, whatever the URL says.
func TestPublishWebhookRefusesPrivateAddresses(t *testing.T) {
	rcv := &receiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	c := webhook.Client(false, 2*time.Second)
	if _, err := c.Post(srv.URL, "application/json", strings.NewReader("{}")); err == nil || !strings.Contains(err.Error(), "not a public address") {
		t.Fatalf("posted to loopback: %v", err)
	}
	if rcv.count() != 0 {
		t.Fatal("the receiver was reached")
	}
	if bad := webhook.CheckURL(srv.URL, false); !strings.Contains(bad, "public address") {
		t.Errorf("CheckURL(%s) = %q", srv.URL, bad)
	}
	if bad := webhook.CheckURL("https://hooks.example.com/x", false); bad != "" {
		t.Errorf("a public URL: %q", bad)
	}
}
