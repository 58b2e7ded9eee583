package spec

import (
	"fmt"
	"strings"
)

// The pipelines of one event start together, each on a node of its own with a checkout of its
// own (the brief's train-cpu / train-gpu: package looked for a checkpoint the GPU pipeline had
// not made, on another machine). Beyond CNB, lint says so, as advice, when two pipelines with
// stages are not tied by a cnb:resolve / cnb:await key: nothing says one waits for the other, and
// nothing one writes reaches the other unless it goes through the artifact store. Pipelines that
// are meant to run side by side (lint, test, build) are fine; that is why this is only info.

// separateWorkspaces adds that advice, once per event whose pipelines fall into more than one
// group of key-linked pipelines.
func separateWorkspaces(branches []*branchDecl, d *diags) {
	for _, b := range branches {
		for _, e := range b.events {
			var staged []*pipelineDecl
			for _, p := range e.pipelines {
				if p.cron != nil {
					// The schedule list: each entry has its own time, so they do not start
					// together.
					staged = nil
					break
				}
				if len(p.stages) > 0 {
					staged = append(staged, p)
				}
			}
			if len(staged) < 2 {
				continue
			}
			groups := keyGroups(staged)
			if len(groups) < 2 {
				continue
			}
			// A generated file of hundreds of pipelines would make one advice of every name.
			const named = 10
			names := make([]string, min(len(groups), named))
			for i, g := range groups[:len(names)] {
				ns := make([]string, len(g))
				for j, p := range g {
					ns[j] = pipelineLabel(p, e)
				}
				names[i] = strings.Join(ns, " + ")
			}
			if more := len(groups) - len(names); more > 0 {
				names = append(names, fmt.Sprintf("%d more", more))
			}
			d.infoHint(staged[1].pos, "order them with a cnb:resolve in one and a cnb:await of the same key in the other, and hand files over with nimbus artifact push --build / pull --build",
				"the pipelines %s of %s run in parallel on different nodes, each with its own workspace: files one writes are not in the other's", joinAnd(names), e.key)
		}
	}
}

// keyGroups splits pipelines into groups that share await/resolve keys (transitively), in file
// order.
func keyGroups(ps []*pipelineDecl) [][]*pipelineDecl {
	parent := make([]int, len(ps))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if parent[i] != i {
			parent[i] = find(parent[i])
		}
		return parent[i]
	}
	owner := map[string]int{}
	for i, p := range ps {
		for _, k := range handoffKeys(p) {
			if j, ok := owner[k]; ok {
				parent[find(i)] = find(j)
			} else {
				owner[k] = i
			}
		}
	}
	var out [][]*pipelineDecl
	index := map[int]int{}
	for i, p := range ps {
		r := find(i)
		g, ok := index[r]
		if !ok {
			g = len(out)
			index[r] = g
			out = append(out, nil)
		}
		out[g] = append(out[g], p)
	}
	return out
}

// handoffKeys are the keys the pipeline's cnb:await and cnb:resolve jobs name, as written.
func handoffKeys(p *pipelineDecl) []string {
	var keys []string
	for _, group := range [][]*stageDecl{p.stages, p.failStages, p.endStages} {
		for _, st := range group {
			for _, j := range st.jobs {
				if j.typ != "cnb:await" && j.typ != "cnb:resolve" {
					continue
				}
				if k := j.options.get("key"); k != nil && k.kind == nScalar && k.value != "" {
					keys = append(keys, k.value)
				}
			}
		}
	}
	return keys
}

func pipelineLabel(p *pipelineDecl, e *eventDecl) string {
	switch {
	case p.name != nil && p.name.v != "":
		return p.name.v
	case p.objectKey != "":
		return p.objectKey
	}
	for i, q := range e.pipelines {
		if q == p {
			return fmt.Sprintf("#%d", i+1)
		}
	}
	return "?"
}

// joinAnd is "a, b and c".
func joinAnd(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}
