// Package mail sends the few emails Nimbus writes (password resets, invitations). With SMTP
// configured it delivers through that server; without it the message goes to the server log, so
// an all-in-one install still lets people reset passwords.
package mail

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/smtp"
	"strings"
	"time"
)

// Message is one plain-text email.
type Message struct {
	To      string
	Subject string
	Body    string
}

// Sender delivers messages.
type Sender interface {
	Send(ctx context.Context, m Message) error
}

// Log writes messages to the log instead of sending them.
type Log struct{ Logger *slog.Logger }

// Unsent is what a Sender that delivers nothing says (Log): the caller then shows people what
// the email would have carried (an invitation's link).
type Unsent interface{ Unsent() bool }

// Unsent implements Unsent: the log delivers no email.
func (Log) Unsent() bool { return true }

// Delivers says whether s sends emails to their recipients.
func Delivers(s Sender) bool {
	u, ok := s.(Unsent)
	return !ok || !u.Unsent()
}

// Send implements Sender.
func (l Log) Send(ctx context.Context, m Message) error {
	l.Logger.WarnContext(ctx, "email not sent (no SMTP configured); its content follows",
		"to", m.To, "subject", m.Subject, "body", m.Body)
	return nil
}

// SMTP delivers through an SMTP server with STARTTLS when offered and PLAIN auth when a username
// is set.
type SMTP struct {
	Addr     string // host:port
	Username string
	Password string
	From     string
}

// Send implements Sender.
func (s SMTP) Send(ctx context.Context, m Message) error {
	if strings.ContainsAny(m.To+m.Subject, "\r\n") {
		return fmt.Errorf("mail: header injection attempt in recipient or subject")
	}
	host, _, err := net.SplitHostPort(s.Addr)
	if err != nil {
		return fmt.Errorf("mail: bad SMTP address %q: %w", s.Addr, err)
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("mail: dial: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	} else {
		conn.SetDeadline(time.Now().Add(30 * time.Second))
	}
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return fmt.Errorf("mail: %w", err)
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok {
		if err := c.StartTLS(nil); err != nil {
			return fmt.Errorf("mail: starttls: %w", err)
		}
	}
	if s.Username != "" {
		if err := c.Auth(smtp.PlainAuth("", s.Username, s.Password, host)); err != nil {
			return fmt.Errorf("mail: auth: %w", err)
		}
	}
	if err := c.Mail(s.From); err != nil {
		return fmt.Errorf("mail: from: %w", err)
	}
	if err := c.Rcpt(m.To); err != nil {
		return fmt.Errorf("mail: rcpt: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("mail: data: %w", err)
	}
	msg := "From: " + s.From + "\r\nTo: " + m.To + "\r\nSubject: " + m.Subject +
		"\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" +
		strings.ReplaceAll(m.Body, "\n", "\r\n")
	if _, err := w.Write([]byte(msg)); err != nil {
		return fmt.Errorf("mail: write: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("mail: send: %w", err)
	}
	return c.Quit()
}
