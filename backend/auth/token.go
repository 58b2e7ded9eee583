package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strings"
)

// Token prefixes make a leaked token recognisable (secret scanners, log masking) and say what it
// is for at a glance.
const (
	PrefixPersonal = "nbp_"
	PrefixDeploy   = "nbd_"
	PrefixJob      = "nbj_"
	PrefixAgent    = "nba_"
	PrefixRunner   = "nbr_" // a team's runner registration token
	PrefixRegister = "nbg_" // a platform registration token (the admin Agents page)
)

// Scopes a personal access token may carry. A browser session has all of them.
const (
	ScopeRepoRead      = "repo:read"      // read orgs, members, repos, builds and logs; clone
	ScopeRepoWrite     = "repo:write"     // create and change repos, push, trigger and cancel builds
	ScopeRepoStatus    = "repo:status"    // set commit statuses (CNB's repo-commit-status)
	ScopeRepoNotes     = "repo:notes"     // comment on pull requests (CNB's repo-notes)
	ScopeOrgWrite      = "org:write"      // create, rename, delete orgs; members and invitations
	ScopeRegistryRead  = "registry:read"  // pull images and artifacts
	ScopeRegistryWrite = "registry:write" // push images and artifacts
	ScopeBillingRead   = "billing:read"   // see balances, usage and the ledger
	ScopeBillingWrite  = "billing:write"  // top up, set caps and alerts
	ScopeAdmin         = "admin"          // platform-admin operations (only for platform admins)
)

// AllScopes lists every scope.
var AllScopes = []string{ScopeRepoRead, ScopeRepoWrite, ScopeRepoStatus, ScopeRepoNotes, ScopeOrgWrite, ScopeRegistryRead,
	ScopeRegistryWrite, ScopeBillingRead, ScopeBillingWrite, ScopeAdmin}

// impliedBy: a write scope also grants the matching read, and repo:write the two narrow repo
// scopes that a pull_request pipeline's job token holds without it (JobScopes).
var impliedBy = map[string]string{
	ScopeRepoStatus:   ScopeRepoWrite,
	ScopeRepoNotes:    ScopeRepoWrite,
	ScopeRepoRead:     ScopeRepoWrite,
	ScopeRegistryRead: ScopeRegistryWrite,
	ScopeBillingRead:  ScopeBillingWrite,
}

// Scopes is a set of scopes.
type Scopes []string

// ParseScopes validates a list of scope names and returns it sorted and de-duplicated.
func ParseScopes(in []string) (Scopes, error) {
	var out Scopes
	for _, s := range in {
		s = strings.TrimSpace(s)
		if !slices.Contains(AllScopes, s) {
			return nil, fmt.Errorf("unknown scope %q (known: %s)", s, strings.Join(AllScopes, ", "))
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Has reports whether the set grants scope, directly or through its write scope.
func (s Scopes) Has(scope string) bool {
	return slices.Contains(s, scope) || (impliedBy[scope] != "" && slices.Contains(s, impliedBy[scope]))
}

// String is the space-separated form stored in the database.
func (s Scopes) String() string { return strings.Join(s, " ") }

func splitScopes(stored string) Scopes { return strings.Fields(stored) }

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// NewToken returns prefix + 40 random base62 characters (about 238 bits).
func NewToken(prefix string) (string, error) {
	b := make([]byte, 40)
	max := big.NewInt(int64(len(base62)))
	for i := range b {
		n, err := rand.Int(rand.Reader, max)
		if err != nil {
			return "", fmt.Errorf("auth: token: %w", err)
		}
		b[i] = base62[n.Int64()]
	}
	return prefix + string(b), nil
}

// HashToken is how tokens and session ids are stored and looked up.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
