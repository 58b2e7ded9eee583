package workspace

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// The server ends a WebSocket whose client stopped answering (a page frozen in the browser's
// back-forward cache, a sleeping laptop) within two ping intervals, and keeps one that answers.
func TestKeepAliveEndsASilentClient(t *testing.T) {
	const every = 150 * time.Millisecond
	ended := make(chan time.Duration, 1)
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		var wmu sync.Mutex
		stop := make(chan struct{})
		defer close(stop)
		keepAlive(ws, &wmu, every, stop)
		begin := time.Now()
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				ended <- time.Since(begin)
				return
			}
		}
	}))
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http")

	// A client that answers pings (gorilla's default handler) while it reads stays connected.
	alive, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	go drain(alive)
	select {
	case d := <-ended:
		t.Fatalf("a client that answers pings was dropped after %v", d)
	case <-time.After(6 * every):
	}
	alive.Close()
	<-ended

	// A client that never answers (no pong, nothing sent) is dropped after 2×interval+1 s.
	silent, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	silent.SetPingHandler(func(string) error { return nil })
	go drain(silent)
	select {
	case d := <-ended:
		if d < 2*every {
			t.Fatalf("the silent client was dropped after %v, before two intervals", d)
		}
	case <-time.After(2*every + 5*time.Second):
		t.Fatal("a client that answers nothing is still connected")
	}
}

// drain reads c until it fails; reading is what runs its ping handler.
func drain(c *websocket.Conn) {
	for {
		if _, _, err := c.ReadMessage(); err != nil {
			return
		}
	}
}
