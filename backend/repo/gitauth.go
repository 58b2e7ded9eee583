package repo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/nimbus-build/nimbus/backend/auth"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
)

// GitResolver returns the git handler's Resolve callback: HTTP Basic with a username and
// password or any token (the password field; the username is then ignored), anonymous reads of
// public repos, pushes for developers and above (and a pipeline's own job token).
//
// An anonymous request that cannot proceed is always answered 401, whether the repo is private
// or missing: that is what makes the git client ask for credentials, and it tells nothing about
// which private repos exist. Authenticated callers without access get 404.
func GitResolver(users *auth.Service, repos *Service) func(ctx context.Context, r *http.Request, org, name string, write bool) (git.Repo, error) {
	return func(ctx context.Context, r *http.Request, org, name string, write bool) (git.Repo, error) {
		p := &auth.Principal{Kind: auth.KindAnonymous}
		if user, pass, ok := r.BasicAuth(); ok {
			ip, _, _ := net.SplitHostPort(r.RemoteAddr)
			var err error
			if p, err = users.AuthenticateBasic(ctx, user, pass, ip); err != nil {
				return git.Repo{}, fmt.Errorf("%w: %v", git.ErrUnauthenticated, err)
			}
		}
		need := Read
		if write {
			need = Write
		}
		a, err := repos.Resolve(ctx, p, org, name, need)
		if err != nil {
			var ae *fault.Error
			if !errors.As(err, &ae) {
				return git.Repo{}, err
			}
			switch {
			case !p.Authenticated():
				return git.Repo{}, git.ErrUnauthenticated
			case ae.Code == fault.CodeForbidden:
				return git.Repo{}, fmt.Errorf("%w: %s", git.ErrForbidden, ae.Message)
			default:
				return git.Repo{}, git.ErrNotFound
			}
		}
		if a.Repo.Secret {
			return git.Repo{}, fmt.Errorf("%w: %s/%s is a secret repository: it cannot be cloned or pushed; edit its files in the dashboard or with the API",
				git.ErrForbidden, org, name)
		}
		if write && a.Repo.Archived {
			return git.Repo{}, fmt.Errorf("%w: the repo is archived", git.ErrForbidden)
		}
		g := git.Repo{ID: a.Repo.ID, Path: repos.Path(a.Repo)}
		if p.User != nil {
			g.UserID, g.User = p.User.ID, p.User.Username
		}
		return g, nil
	}
}
