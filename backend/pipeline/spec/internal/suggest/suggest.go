// Package suggest finds the word a typo was meant to be, for the "did you mean" hints of
// pipeline diagnostics: unknown keys, runner tags, built-in tasks, services and YAML anchors.
package suggest

import (
	"fmt"
	"strings"
)

// Closest returns the known word closest to s, or "" when none is close enough to be a
// plausible typo. Case, "_" and "-" are ignored first, so allow_failure finds allowFailure.
func Closest(s string, known []string) string {
	norm := func(x string) string {
		return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(x))
	}
	if len(s) > 64 {
		return "" // not a typo of a short key; and keeps the distance computation cheap
	}
	ns := norm(s)
	best, bestDist := "", -1
	for _, k := range known {
		if k == s {
			continue
		}
		if norm(k) == ns {
			return k
		}
		dist := levenshtein(ns, norm(k))
		if bestDist < 0 || dist < bestDist {
			best, bestDist = k, dist
		}
	}
	limit := len(ns) / 3
	if limit < 2 {
		limit = 2
	}
	if bestDist < 0 || bestDist > limit {
		return ""
	}
	return best
}

// Hint is "did you mean …?" for the closest known word, or "".
func Hint(s string, known []string) string {
	if m := Closest(s, known); m != "" {
		return fmt.Sprintf("did you mean %q?", m)
	}
	return ""
}

// Suffix is Hint to append to a message: "; did you mean …?", or "".
func Suffix(s string, known []string) string {
	if m := Closest(s, known); m != "" {
		return fmt.Sprintf("; did you mean %q?", m)
	}
	return ""
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
