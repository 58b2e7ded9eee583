package workspace

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/clock"
)

func TestPreviewHosts(t *testing.T) {
	l := Links{PublicURL: "https://nimbus.example:8443"}
	if got := l.Preview(42, 8686); got != "https://8686-42.preview.localhost:8443/" {
		t.Errorf("Preview = %q", got)
	}
	if got := l.PreviewTemplate(42); got != "https://{{port}}-42.preview.localhost:8443/" {
		t.Errorf("PreviewTemplate = %q", got)
	}
	c := Links{PublicURL: "http://nimbus.example", Domain: "Preview.Example.COM."}
	for _, tc := range []struct {
		host     string
		id       int64
		port     int
		ok       bool
		explains string
	}{
		{"8686-42.preview.example.com", 42, 8686, true, "plain"},
		{"8686-42.preview.example.com:80", 42, 8686, true, "with a port"},
		{"8686-42.PREVIEW.example.com", 42, 8686, true, "any case"},
		{"nimbus.example", 0, 0, false, "the dashboard"},
		{"preview.example.com", 0, 0, false, "the domain itself"},
		{"a.8686-42.preview.example.com", 0, 0, false, "a deeper label"},
		{"8686-42.preview.example.com.evil.test", 0, 0, false, "another domain"},
		{"0-42.preview.example.com", 0, 0, false, "port 0"},
		{"70000-42.preview.example.com", 0, 0, false, "port too big"},
		{"8686-0.preview.example.com", 0, 0, false, "id 0"},
		{"8686-x.preview.example.com", 0, 0, false, "id not a number"},
		{"868642.preview.example.com", 0, 0, false, "no dash"},
	} {
		id, port, ok := c.ParseHost(tc.host)
		if ok != tc.ok || id != tc.id || port != tc.port {
			t.Errorf("%s: ParseHost(%q) = %d %d %v", tc.explains, tc.host, id, port, ok)
		}
	}
	if env := c.Env("ml", "trainer", 7); env["CNB_VSCODE_WEB_URL"] != "http://nimbus.example/ml/trainer/workspaces/7" ||
		env["CNB_VSCODE_PROXY_URI"] != "http://{{port}}-7.preview.example.com/" {
		t.Errorf("Env = %v", env)
	}
}

func TestPreviewCredentials(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	s := New(Config{Secret: []byte("k1"), Clock: clk})
	other := New(Config{Secret: []byte("k2"), Clock: clk})
	tok := s.sign(claims{Kind: "preview", Workspace: 42, User: 7, Expires: clk.Now().Add(time.Hour).Unix()})
	if c, err := s.verify(tok, "preview", 42); err != nil || c.User != 7 {
		t.Fatalf("verify: %+v %v", c, err)
	}
	for name, check := range map[string]func() error{
		"another workspace": func() error { _, err := s.verify(tok, "preview", 43); return err },
		"another kind":      func() error { _, err := s.verify(tok, "login", 42); return err },
		"another key":       func() error { _, err := other.verify(tok, "preview", 42); return err },
		"tampered":          func() error { _, err := s.verify(strings.Replace(tok, ".", "x.", 1), "preview", 42); return err },
		"garbage":           func() error { _, err := s.verify("nope", "preview", 42); return err },
		"expired": func() error {
			clk.Advance(2 * time.Hour)
			defer clk.Advance(-2 * time.Hour)
			_, err := s.verify(tok, "preview", 42)
			return err
		},
	} {
		if check() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	login := claims{Kind: "login", Workspace: 42, User: 7, Nonce: "n1", Expires: clk.Now().Add(time.Minute).Unix()}
	if !s.spend(login) || s.spend(login) {
		t.Error("a login is spent exactly once")
	}
}

func TestStripCredentials(t *testing.T) {
	r, _ := http.NewRequest("GET", "http://8686-1.preview.localhost/", nil)
	r.Header.Set(PreviewHeader, "secret")
	r.AddCookie(&http.Cookie{Name: PreviewCookie, Value: "p"})
	r.AddCookie(&http.Cookie{Name: auth.CookieName, Value: "s"})
	r.AddCookie(&http.Cookie{Name: "app", Value: "1"})
	stripCredentials(r)
	if r.Header.Get(PreviewHeader) != "" || r.Header.Get("Cookie") != "app=1" {
		t.Errorf("left %v", r.Header)
	}
}
