package mail

import (
	"bufio"
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
)

// smtpSink is a minimal SMTP server on loopback that records one message, enough to prove the
// client speaks the protocol end to end.
func smtpSink(t *testing.T) (addr string, got chan string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got = make(chan string, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		w := func(s string) { conn.Write([]byte(s + "\r\n")) }
		w("220 sink ready")
		var data strings.Builder
		inData := false
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if inData {
				if line == ".\r\n" {
					inData = false
					got <- data.String()
					w("250 ok")
					continue
				}
				data.WriteString(line)
				continue
			}
			switch cmd := strings.ToUpper(strings.TrimSpace(line)); {
			case strings.HasPrefix(cmd, "EHLO"), strings.HasPrefix(cmd, "HELO"):
				w("250 sink")
			case cmd == "DATA":
				inData = true
				w("354 go ahead")
			case cmd == "QUIT":
				w("221 bye")
				return
			default:
				w("250 ok")
			}
		}
	}()
	return ln.Addr().String(), got
}

func TestSMTPDelivers(t *testing.T) {
	addr, got := smtpSink(t)
	s := SMTP{Addr: addr, From: "nimbus@example.test"}
	err := s.Send(context.Background(), Message{To: "alice@example.test", Subject: "Reset", Body: "line1\nhttp://x/reset?t=abc"})
	if err != nil {
		t.Fatal(err)
	}
	msg := <-got
	for _, want := range []string{"To: alice@example.test", "Subject: Reset", "http://x/reset?t=abc"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
}

func TestSMTPRejectsHeaderInjection(t *testing.T) {
	err := SMTP{Addr: "127.0.0.1:1", From: "a@b"}.Send(context.Background(), Message{To: "a@b\r\nBcc: evil@x", Subject: "s"})
	if err == nil || !strings.Contains(err.Error(), "injection") {
		t.Fatalf("err = %v", err)
	}
}

func TestLogSenderWritesTheBody(t *testing.T) {
	var buf bytes.Buffer
	Log{Logger: slog.New(slog.NewJSONHandler(&buf, nil))}.Send(context.Background(), Message{To: "a@b", Subject: "s", Body: "the-link"})
	if !strings.Contains(buf.String(), "the-link") {
		t.Fatalf("log: %s", buf.String())
	}
}
