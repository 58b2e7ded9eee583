// Package webhook is what every outgoing webhook of Nimbus shares (billing's alerts, model
// publish notifications): an HTTP client that only dials public addresses unless told
// otherwise, checked on the address actually dialled so DNS cannot get around it; the check of
// a URL a team sets; and the HMAC signature receivers verify.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// MaxURL bounds a webhook URL.
const MaxURL = 2048

// Client is the HTTP client of webhooks: timeout per request, no proxy from the environment (it
// would be dialled instead of the target), no redirects (a webhook answers, it does not send us
// elsewhere) and, unless allowPrivate, no address but public unicast ones: a team cannot make
// the server POST into the operator's own network.
func Client(allowPrivate bool, timeout time.Duration) *http.Client {
	dialer := &net.Dialer{Timeout: timeout}
	if !allowPrivate {
		dialer.Control = publicOnly
	}
	return &http.Client{
		Timeout:       timeout,
		Transport:     &http.Transport{DialContext: dialer.DialContext, TLSHandshakeTimeout: timeout, MaxIdleConnsPerHost: 2},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// publicOnly refuses to connect anywhere but a public unicast address.
func publicOnly(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("webhook: unexpected address %q", address)
	}
	if !IsPublicAddr(ap.Addr()) {
		return fmt.Errorf("webhook: %s is not a public address", ap.Addr())
	}
	return nil
}

// cgnat is the shared address space of carrier-grade NAT (RFC 6598): private in practice.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// IsPublicAddr reports whether ip is a public unicast address.
func IsPublicAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsGlobalUnicast() && !ip.IsPrivate() && !cgnat.Contains(ip)
}

// CheckURL says what is wrong with a webhook URL a team sets, "" when nothing: an http(s) URL
// of at most MaxURL characters and, unless allowPrivate, not naming a private host outright
// (the dial-time check catches the names that resolve to one).
func CheckURL(raw string, allowPrivate bool) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || len(raw) > MaxURL ||
		strings.ContainsAny(raw, "\r\n\t ") {
		return fmt.Sprintf("must be an http:// or https:// URL of at most %d characters", MaxURL)
	}
	if !allowPrivate {
		host := u.Hostname()
		ip, err := netip.ParseAddr(host)
		if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") || (err == nil && !IsPublicAddr(ip)) {
			return "must reach a public address, not " + host
		}
	}
	return ""
}

// Sign is the signature header value of body under secret: "sha256=" and the hex HMAC-SHA256.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify says whether signature is body's under secret, in constant time.
func Verify(secret, body []byte, signature string) bool {
	return hmac.Equal([]byte(Sign(secret, body)), []byte(signature))
}

// Redact drops a URL's path and query, which often hold the webhook's secret.
func Redact(target string) string {
	u, err := url.Parse(target)
	if err != nil {
		return "the webhook"
	}
	return u.Scheme + "://" + u.Host
}
