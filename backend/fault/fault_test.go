package fault

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// Each constructor gives its kind and the stable code clients switch on, and only Invalid with a
// field carries details.
func TestConstructors(t *testing.T) {
	for _, tt := range []struct {
		err     *Error
		kind    Kind
		code    string
		msg     string
		details map[string]any
	}{
		{BadRequest("bad %s", "cursor"), KindBadRequest, "bad_request", "bad cursor", nil},
		{Invalid("name", "name %q is taken", "x"), KindInvalid, "validation_failed", `name "x" is taken`, map[string]any{"field": "name"}},
		{Invalid("", "no field"), KindInvalid, "validation_failed", "no field", nil},
		{Unauthenticated("log in"), KindUnauthenticated, "unauthenticated", "log in", nil},
		{Forbidden("no"), KindForbidden, "forbidden", "no", nil},
		{NotFound("repo %q not found", "a/b"), KindNotFound, "not_found", `repo "a/b" not found`, nil},
		{Conflict("taken"), KindConflict, "conflict", "taken", nil},
		{TooLarge("at most %d", 5), KindTooLarge, "payload_too_large", "at most 5", nil},
		{Unavailable("down"), KindUnavailable, "unavailable", "down", nil},
		{New(KindForbidden, "import_refused", "%s: %s", "a", "b"), KindForbidden, "import_refused", "a: b", nil},
	} {
		e := tt.err
		if e.Kind != tt.kind || e.Code != tt.code || e.Message != tt.msg || !reflect.DeepEqual(e.Details, tt.details) {
			t.Errorf("got %+v, want kind %v code %s message %q details %v", *e, tt.kind, tt.code, tt.msg, tt.details)
		}
		if want := tt.code + ": " + tt.msg; e.Error() != want {
			t.Errorf("Error() = %q, want %q", e.Error(), want)
		}
	}
}

// KindOf sees through wrapping, and anything that is no fault is internal.
func TestKindOf(t *testing.T) {
	if k := KindOf(fmt.Errorf("load: %w", NotFound("x"))); k != KindNotFound {
		t.Fatalf("wrapped NotFound: kind %v", k)
	}
	if k := KindOf(errors.New("pq: connection refused")); k != KindInternal {
		t.Fatalf("plain error: kind %v", k)
	}
	if k := KindOf(nil); k != KindInternal {
		t.Fatalf("nil: kind %v", k)
	}
}

// Every kind has a name of its own, so a test failure or log line says which it was.
func TestKindNames(t *testing.T) {
	seen := map[string]Kind{}
	for k := KindInternal; k <= KindUnavailable; k++ {
		name := k.String()
		if prev, dup := seen[name]; dup || name == fmt.Sprintf("kind(%d)", uint8(k)) {
			t.Fatalf("kind %d is named %q (also kind %d)", k, name, prev)
		}
		seen[name] = k
	}
	if s := (KindUnavailable + 1).String(); s != fmt.Sprintf("kind(%d)", uint8(KindUnavailable+1)) {
		t.Fatalf("an unknown kind is named %q", s)
	}
}
