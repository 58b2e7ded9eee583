package pull_test

import (
	"context"
	"slices"
	"testing"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/git"
	"github.com/nimbus-build/nimbus/backend/pull"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

// Comments: on the whole request or on a line of a changed file; what is refused; a person's
// fires the event and a pipeline's does not; and across a push a line comment above the change
// moves with its line, one below moves down, and one on a changed line is outdated.
func TestComments(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newFixture(t, db)
		var fired []string
		f.pulls.OnEvent(func(_ context.Context, ev pull.Event) {
			if ev.What == pull.Commented {
				fired = append(fired, ev.Comment.Body)
			}
		})
		head := f.branch("a", map[string]string{"train.py": "lr = 0.1\nepochs = 10\nbatch = 32\nseed = 1\n"})
		pr, err := f.pulls.Open(ctx, f.repo, f.alice, pull.OpenInput{Source: "a", Target: "main", Title: "A"})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name  string
			in    pull.CommentInput
			field string
		}{
			{"no text", pull.CommentInput{Body: " \n"}, "body"},
			{"a line without a file", pull.CommentInput{Body: "x", Line: 2}, "path"},
			{"a file without a line", pull.CommentInput{Body: "x", Path: "train.py"}, "line"},
			{"a file the request does not change", pull.CommentInput{Body: "x", Path: "README.md", Line: 1}, "path"},
			{"past the end", pull.CommentInput{Body: "x", Path: "train.py", Line: 5}, "line"},
		} {
			_, err := f.pulls.Comment(ctx, f.repo, pr.Number, f.alice, c.in, 0)
			wantKind(t, c.name, err, fault.KindInvalid)
			if fe, ok := err.(*fault.Error); !ok || fe.Details["field"] != c.field {
				t.Errorf("%s: %v, want the field %s named", c.name, err, c.field)
			}
		}
		post := func(in pull.CommentInput, pipeline int64) *pull.Comment {
			t.Helper()
			c, err := f.pulls.Comment(ctx, f.repo, pr.Number, f.alice, in, pipeline)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		whole := post(pull.CommentInput{Body: "looks good overall"}, 0)
		lr := post(pull.CommentInput{Body: "why 0.1?", Path: "train.py", Line: 1}, 0)
		batch := post(pull.CommentInput{Body: "batch too small", Path: "train.py", Line: 3}, 0)
		seed := post(pull.CommentInput{Body: "fix the seed", Path: "train.py", Line: 4}, 0)
		report := post(pull.CommentInput{Body: "loss 0.31 → 0.27"}, 42)
		if report.PipelineID == nil || *report.PipelineID != 42 || lr.CommitSHA != head || whole.Path != "" {
			t.Fatalf("stored: %+v %+v %+v", report, lr, whole)
		}
		if !slices.Equal(fired, []string{"looks good overall", "why 0.1?", "batch too small", "fix the seed"}) {
			t.Fatalf("pull_request.comment fired for %q; a pipeline's comment fires nothing", fired)
		}
		// The push inserts a line after line 1 and changes line 3 (batch).
		f.git("checkout", "-q", "a")
		next := f.commit(map[string]string{"train.py": "lr = 0.1\nwarmup = 100\nepochs = 10\nbatch = 64\nseed = 1\n"}, "warmup, bigger batch")
		f.git("push", "-q", f.bare, "a")
		f.git("checkout", "-q", "main")
		f.pulls.OnPush(ctx, f.repo, f.alice, []git.RefUpdate{{Old: head, New: next, Ref: "refs/heads/a"}})
		p, _ := f.pulls.Get(ctx, f.repo, pr.Number)
		cs, err := f.pulls.Comments(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		byID := map[int64]pull.Comment{}
		for _, c := range cs {
			byID[c.ID] = c
		}
		if c := byID[lr.ID]; c.Line != 1 || c.Outdated || c.CommitSHA != next {
			t.Errorf("the comment above the change: %+v", c)
		}
		if c := byID[seed.ID]; c.Line != 5 || c.Outdated || c.CommitSHA != next {
			t.Errorf("the comment below the change: %+v, want line 5 at %s", c, next)
		}
		if c := byID[batch.ID]; !c.Outdated || c.Line != 3 || c.CommitSHA != head {
			t.Errorf("the comment on the changed line: %+v, want outdated where it was", c)
		}
		if c := byID[whole.ID]; c.Outdated || c.CommitSHA != "" {
			t.Errorf("the comment on the whole request: %+v", c)
		}
		// Closed: comments on the whole request still, not on lines.
		if _, err := f.pulls.Close(ctx, f.repo, pr.Number); err != nil {
			t.Fatal(err)
		}
		post(pull.CommentInput{Body: "closing: superseded"}, 0)
		_, err = f.pulls.Comment(ctx, f.repo, pr.Number, f.alice, pull.CommentInput{Body: "x", Path: "train.py", Line: 1}, 0)
		wantKind(t, "a line comment on a closed request", err, fault.KindConflict)
	})
}
