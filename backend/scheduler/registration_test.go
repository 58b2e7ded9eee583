package scheduler

import (
	"context"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// A platform registration token registers platform agents (serving every team) until it is
// deleted; only its hash is kept, and the list says when it was last used.
func TestPlatformRegistrationTokens(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := newFixture(t, db, Config{PollTimeout: 50 * time.Millisecond})
		ctx := context.Background()
		if _, err := f.sched.CreateRegistrationToken(ctx, 1, "  "); fault.KindOf(err) != fault.KindInvalid {
			t.Fatalf("a blank name: %v", err)
		}
		tok, err := f.sched.CreateRegistrationToken(ctx, 1, "gpu hosts")
		if err != nil || !strings.HasPrefix(tok.Token, "nbg_") {
			t.Fatalf("create: %+v %v", tok, err)
		}
		var stored RegistrationToken
		if err := db.Take(&stored, tok.ID).Error; err != nil || strings.Contains(stored.TokenHash, tok.Token) || stored.TokenHash == "" {
			t.Fatalf("stored %+v (%v): want only a hash", stored, err)
		}
		req := protocol.RegisterRequest{Name: "gpu-1", Tags: []string{"cnb:arch:amd64:gpu"}, CPUs: 16, Concurrency: 1,
			GPUs: []protocol.GPU{{Index: 0, Name: "L40"}}}
		resp, err := f.sched.Register(ctx, tok.Token, req)
		if err != nil {
			t.Fatalf("register with the token: %v", err)
		}
		a, err := f.sched.AgentByToken(ctx, resp.Token)
		if err != nil || a.OrgID != nil {
			t.Fatalf("a platform agent, not a team runner: %+v %v", a, err)
		}
		list, err := f.sched.RegistrationTokens(ctx)
		if err != nil || len(list) != 1 || list[0].LastUsedAt == nil || list[0].Token != "" {
			t.Fatalf("list after use: %+v %v", list, err)
		}
		if err := f.sched.DeleteRegistrationToken(ctx, tok.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := f.sched.Register(ctx, tok.Token, req); fault.KindOf(err) != fault.KindUnauthenticated {
			t.Fatalf("a deleted token registered an agent: %v", err)
		}
		if err := f.sched.DeleteRegistrationToken(ctx, tok.ID); fault.KindOf(err) != fault.KindNotFound {
			t.Fatalf("deleting it twice: %v", err)
		}
		// The agent it registered keeps its own token.
		if _, err := f.sched.AgentByToken(ctx, resp.Token); err != nil {
			t.Fatalf("the registered agent lost its token: %v", err)
		}
	})
}
