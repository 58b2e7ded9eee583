package workspace

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Links builds the URLs of workspaces: the dashboard's, and each port's preview origin,
// {port}-{id}.{domain} on the public URL's scheme and port. A separate origin per workspace
// and port keeps the proxied application away from the dashboard's cookies and from other
// workspaces' credentials.
type Links struct {
	PublicURL string // the server's public URL, http(s)://host[:port]
	// Domain is the preview domain; empty means preview.localhost (browsers resolve every
	// *.localhost name to this machine, which is right for `make run`).
	Domain string
}

// DefaultPreviewDomain is the preview domain when none is configured.
const DefaultPreviewDomain = "preview.localhost"

func (l Links) domain() string {
	if l.Domain == "" {
		return DefaultPreviewDomain
	}
	return strings.ToLower(strings.Trim(l.Domain, "."))
}

// origin is the scheme and the ":port" suffix of the public URL.
func (l Links) origin() (scheme, port string) {
	u, err := url.Parse(l.PublicURL)
	if err != nil || u.Scheme == "" {
		return "http", ""
	}
	if p := u.Port(); p != "" {
		return u.Scheme, ":" + p
	}
	return u.Scheme, ""
}

// Preview is the URL of a workspace's port.
func (l Links) Preview(id int64, port int) string {
	scheme, p := l.origin()
	return fmt.Sprintf("%s://%d-%d.%s%s/", scheme, port, id, l.domain(), p)
}

// PreviewTemplate is the preview URL with {{port}} for the port (CNB_VSCODE_PROXY_URI).
func (l Links) PreviewTemplate(id int64) string {
	scheme, p := l.origin()
	return fmt.Sprintf("%s://{{port}}-%d.%s%s/", scheme, id, l.domain(), p)
}

// Web is the workspace's dashboard page (CNB_VSCODE_WEB_URL).
func (l Links) Web(org, repo string, id int64) string {
	return fmt.Sprintf("%s/%s/%s/workspaces/%d", strings.TrimRight(l.PublicURL, "/"), org, repo, id)
}

// ParseHost reads a preview host ({port}-{id}.{domain}, any port suffix) into its workspace
// and port; ok is false for every other host.
func (l Links) ParseHost(host string) (id int64, port int, ok bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(host)
	label, found := strings.CutSuffix(host, "."+l.domain())
	if !found || strings.Contains(label, ".") {
		return 0, 0, false
	}
	ps, is, found := strings.Cut(label, "-")
	if !found {
		return 0, 0, false
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 {
		return 0, 0, false
	}
	id, err = strconv.ParseInt(is, 10, 64)
	if err != nil || id <= 0 {
		return 0, 0, false
	}
	return id, port, true
}

// Env is what a workspace's jobs and environment see of its URLs, as on CNB.
func (l Links) Env(org, repo string, id int64) map[string]string {
	return map[string]string{
		"CNB_VSCODE_WEB_URL":   l.Web(org, repo, id),
		"CNB_VSCODE_PROXY_URI": l.PreviewTemplate(id),
	}
}
