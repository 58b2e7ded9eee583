package spec

import "strings"

// selected is one pipeline a trigger runs, with the key and event it was declared under.
type selected struct {
	branch   *branchDecl
	event    *eventDecl
	pipeline *pipelineDecl
}

// refName is what branch keys are matched against: the tag for tag events (or when only a tag is
// given), the branch otherwise.
func (t Trigger) refName() string {
	if t.Tag != "" && (isTagEvent(t.Event) || t.Branch == "") {
		return t.Tag
	}
	return t.Branch
}

// selectPipelines returns the pipelines the trigger runs, in declaration order, by the two-phase
// rule: every glob key that matches the ref applies (an exact name has no priority over "**"),
// and "$" applies only when no matching glob declares the event.
//
// The fallback is decided per event. Read literally, the docs would skip "$" whenever any glob
// matched; but the most common CNB layout ("$: vscode" beside "main: push", or beside a "**"
// key for other events, as in the corpus) would then never open a workspace on a matched branch,
// which is not how CNB behaves.
func (c *Config) selectPipelines(t Trigger) []selected {
	ref := t.refName()
	var out []selected
	declared := false
	for _, b := range c.branches {
		if !b.fallback && b.glob.Match(ref) {
			out, declared = appendEvent(out, b, t, declared)
		}
	}
	// auto_tag runs only what the default branch's own key declares: CNB ignores "$" for it.
	if declared || t.Event == EventAutoTag {
		return out
	}
	for _, b := range c.branches {
		if b.fallback {
			out, _ = appendEvent(out, b, t, false)
		}
	}
	return out
}

// appendEvent adds the pipelines b declares for the trigger's event; declared becomes true when
// b has the event at all.
func appendEvent(out []selected, b *branchDecl, t Trigger, declared bool) ([]selected, bool) {
	for _, e := range b.events {
		if !eventMatches(e, t) {
			continue
		}
		declared = true
		for _, pl := range e.pipelines {
			if e.key == EventSchedule && t.Cron != "" && (pl.cron == nil || pl.cron.expr != normCron(t.Cron)) {
				continue
			}
			out = append(out, selected{branch: b, event: e, pipeline: pl})
		}
	}
	return out, declared
}

// eventMatches compares an event key with the trigger's event. Crontab keys compare their
// expressions field by field, so "crontab:  0 2 * * *" and "crontab: 0 2 * * *" are one event.
func eventMatches(e *eventDecl, t Trigger) bool {
	if !strings.HasPrefix(e.key, crontabPrefix) {
		return e.key == t.Event
	}
	expr := normCron(strings.TrimPrefix(e.key, crontabPrefix))
	switch {
	case t.Event == EventCrontab:
		return t.Cron == "" || normCron(t.Cron) == expr
	case strings.HasPrefix(t.Event, crontabPrefix):
		return normCron(strings.TrimPrefix(t.Event, crontabPrefix)) == expr
	}
	return false
}

func normCron(s string) string { return strings.Join(strings.Fields(s), " ") }

// BranchEvent is one event a branch's pipelines are declared for, as EventsFor lists them.
type BranchEvent struct {
	Event string
	// Pipelines counts the pipelines the event runs on the branch (every matching key).
	Pipelines int
	// Names are the pipelines' names as written (unsubstituted; "" for an unnamed one).
	Names []string
}

// EventsFor lists the events a build of branch could be fired with, and how many pipelines each
// runs, as planning selects them: the keys whose glob matches the branch, and for each event
// none of them declares, the "$" fallback's. Events are in file order.
func (c *Config) EventsFor(branch string) []BranchEvent {
	ref := Trigger{Branch: branch}.refName()
	var out []BranchEvent
	index := map[string]int{}
	add := func(e *eventDecl) {
		i, ok := index[e.key]
		if !ok {
			i = len(out)
			index[e.key] = i
			out = append(out, BranchEvent{Event: e.key})
		}
		out[i].Pipelines += len(e.pipelines)
		for _, pl := range e.pipelines {
			name := ""
			if pl.name != nil {
				name = pl.name.v
			}
			out[i].Names = append(out[i].Names, name)
		}
	}
	for _, b := range c.branches {
		if !b.fallback && b.glob.Match(ref) {
			for _, e := range b.events {
				add(e)
			}
		}
	}
	// The fallback's events, for those no matching key declares (selectPipelines' rule).
	matched := len(out)
	for _, b := range c.branches {
		if !b.fallback {
			continue
		}
		for _, e := range b.events {
			if i, ok := index[e.key]; !ok || i >= matched {
				add(e)
			}
		}
	}
	return out
}
