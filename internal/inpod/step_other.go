//go:build !unix

package inpod

import (
	"errors"
	"fmt"
	"io"
)

// step runs only where pods do (Linux).
func step(_ io.Reader, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "nimbus pod step: only on Linux, inside a pipeline's pod")
	return 125
}

func kill(string) error { return errors.New("only on Linux, inside a pipeline's pod") }
