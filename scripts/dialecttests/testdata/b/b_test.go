package b

import "testing"

// Same name as a's dual test: b must be in the second pass too.
func TestBoth(t *testing.T) { t.Run("sqlite", func(t *testing.T) {}) }

func TestMatrix(t *testing.T) { mxEachDialect(t, nil) }
