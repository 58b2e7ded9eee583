package envflag

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
)

func TestExit(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		code int
		out  string
	}{
		{"success", nil, 0, ""},
		{"help is not a failure", fmt.Errorf("parse: %w", flag.ErrHelp), 0, ""},
		{"a failure names the binary", errors.New("listen: address in use"), 1, "nimbus-server: listen: address in use\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			if got := Exit("nimbus-server", tc.err, &out); got != tc.code || out.String() != tc.out {
				t.Fatalf("Exit = %d, %q; want %d, %q", got, out.String(), tc.code, tc.out)
			}
		})
	}
}
