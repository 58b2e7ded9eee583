package auth

import (
	"strings"
	"testing"

	"github.com/nimbus-build/nimbus/backend/fault"
)

// A refused scope says what to do: a token can be given the scope; a deploy token cannot, and
// its refusal says it is read-only instead of naming a scope it will never have.
func TestNeedSaysWhatToDo(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    *Principal
		want string
	}{
		{"a token without the scope", &Principal{Kind: KindToken, Scopes: Scopes{ScopeRepoRead}}, "the token lacks the repo:write scope"},
		{"a deploy token", &Principal{Kind: KindDeploy, Scopes: Scopes{ScopeRepoRead, ScopeRegistryRead}},
			"a deploy token is read-only: it clones and pulls, never pushes or changes the repository; use a personal access token with repo:write"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Need(ScopeRepoWrite)
			if fault.KindOf(err) != fault.KindForbidden || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a 403 saying %q", err, tc.want)
			}
		})
	}
	if err := (&Principal{Kind: KindDeploy, Scopes: Scopes{ScopeRepoRead}}).Need(ScopeRepoRead); err != nil {
		t.Fatalf("a deploy token reads: %v", err)
	}
}
