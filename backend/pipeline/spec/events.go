package spec

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Event names of the reference's catalogue, plus Part A's schedule list form.
const (
	EventPush       = "push"
	EventCommitAdd  = "commit.add"
	EventBranchNew  = "branch.create"
	EventBranchDel  = "branch.delete"
	EventTagPush    = "tag_push"
	EventAutoTag    = "auto_tag"
	EventVSCode     = "vscode"
	EventSchedule   = "schedule" // Part A: the brief's list form; CNB_EVENT=schedule
	EventCrontab    = "crontab"  // CNB_EVENT of a "crontab: …" key
	EventWebTrigger = "web_trigger"
	EventAPITrigger = "api_trigger"
	crontabPrefix   = "crontab:"
	tagDeployPrefix = "tag_deploy."
)

// catalogue lists the fixed event names; prefixed families are matched by eventFamily.
func catalogue() []string {
	return []string{
		EventPush, EventCommitAdd, EventBranchNew, EventBranchDel,
		"pull_request", "pull_request.update", "pull_request.target", "pull_request.mergeable",
		"pull_request.merged", "pull_request.approved", "pull_request.changes_requested", "pull_request.comment",
		EventTagPush, EventAutoTag, "issue.open", "issue.close", "issue.reopen",
		EventAPITrigger, EventWebTrigger, EventVSCode, EventSchedule,
	}
}

// DefaultFiredEvents are the events this installation fires (Part A.6): pipelines under any
// other event of the catalogue parse and validate but lint reports them as not supported.
// Entries ending in "*" are prefixes.
func DefaultFiredEvents() []string {
	return []string{
		EventPush, EventCommitAdd, EventBranchNew, EventBranchDel, EventTagPush,
		EventVSCode, EventSchedule, EventCrontab, EventWebTrigger, "web_trigger_*", EventAPITrigger, "api_trigger_*",
		// backend/pull fires these (.mergeable when a request to a protected branch passes its
		// merge gate, .comment for a person's comment).
		"pull_request", "pull_request.update", "pull_request.target", "pull_request.merged",
		"pull_request.approved", "pull_request.changes_requested", "pull_request.mergeable",
		"pull_request.comment",
		// A tag's Deploy buttons (.cnb/tag_deploy.yml, backend/build/deploy.go).
		"tag_deploy.*",
		// The tags page's button (backend/build/autotag.go).
		EventAutoTag,
	}
}

// eventFamily returns the family of an event key: the key itself for catalogue names, or
// "web_trigger_*", "api_trigger_*", "tag_deploy.*", "crontab"; "" when it is unknown.
func eventFamily(name string) string {
	switch {
	case strings.HasPrefix(name, crontabPrefix):
		return EventCrontab
	case strings.HasPrefix(name, "web_trigger_") && len(name) > len("web_trigger_"):
		return "web_trigger_*"
	case strings.HasPrefix(name, "api_trigger_") && len(name) > len("api_trigger_"):
		return "api_trigger_*"
	case strings.HasPrefix(name, tagDeployPrefix) && len(name) > len(tagDeployPrefix):
		return "tag_deploy.*"
	}
	for _, e := range catalogue() {
		if e == name {
			return name
		}
	}
	return ""
}

// cnbEvent is the CNB_EVENT value of an event key.
func cnbEvent(key string) string {
	if strings.HasPrefix(key, crontabPrefix) {
		return EventCrontab
	}
	return key
}

// isTagEvent reports whether branch keys are matched against a tag name for the event.
func isTagEvent(event string) bool {
	return event == EventTagPush || strings.HasPrefix(event, tagDeployPrefix)
}

// hasDiff reports whether an event can carry a changed-file list for ifModify; every other event
// ignores ifModify (the check is skipped and the job runs).
func hasDiff(event string) bool {
	switch {
	case event == EventPush, event == EventCommitAdd, strings.HasPrefix(event, "pull_request"):
		return true
	case event == EventAPITrigger, strings.HasPrefix(event, "api_trigger_"):
		return true // started by cnb:apply from a push or PR build, which passes the diff on
	}
	return false
}

// fired reports whether the installation fires the event.
func fired(event string, firedList []string) bool {
	fam := eventFamily(event)
	for _, f := range firedList {
		if f == event || f == fam {
			return true
		}
	}
	return false
}

// cronSpec is a parsed 5-field cron expression.
type cronSpec struct {
	expr  string // normalised: fields separated by one space
	sched cron.Schedule
}

// minCronInterval is the tightest schedule Part A allows.
const minCronInterval = 5 * time.Minute

// parseCron parses a standard 5-field expression and rejects one that ever fires twice within
// minCronInterval. The interval is checked by computing successive fire times, since a string
// test cannot see through lists, ranges and steps ("0,3 * * * *", "58-59 * * * *").
func parseCron(expr string, loc *time.Location) (*cronSpec, error) {
	fields := strings.Fields(expr)
	if len(fields) != 5 {
		return nil, &hintError{
			msg:  fmt.Sprintf("cron expression %q must have 5 fields (minute hour day-of-month month day-of-week)", expr),
			hint: `for example "0 2 * * *" for 02:00 every day`,
		}
	}
	norm := strings.Join(fields, " ")
	// The parser would read a TZ= prefix or a descriptor; neither is standard cron.
	if strings.ContainsAny(norm, "=@") {
		return nil, fmt.Errorf("cron expression %q: descriptors and time-zone prefixes are not supported", expr)
	}
	sched, err := cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow).Parse(norm)
	if err != nil {
		return nil, fmt.Errorf("cron expression %q: %w", expr, err)
	}
	if err := checkInterval(sched, loc); err != nil {
		return nil, fmt.Errorf("cron expression %q: %w", expr, err)
	}
	return &cronSpec{expr: norm, sched: sched}, nil
}

// checkInterval walks fire times from a fixed instant over a window long enough to meet every
// day-of-month/month/weekday combination (leap days included) and fails on a gap under
// minCronInterval. Cron fields are a cross product, so the tightest gap shows up early; the
// fire-count bound keeps the check cheap for frequent schedules.
func checkInterval(sched cron.Schedule, loc *time.Location) error {
	if loc == nil {
		loc = time.UTC
	}
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, loc)
	end := start.AddDate(8, 0, 0)
	prev := sched.Next(start.Add(-time.Minute))
	if prev.IsZero() {
		return fmt.Errorf("it never fires")
	}
	for i := 0; i < 3000 && prev.Before(end); i++ {
		next := sched.Next(prev)
		if next.IsZero() {
			return nil
		}
		if gap := next.Sub(prev); gap < minCronInterval {
			return &hintError{
				msg:  fmt.Sprintf("it fires at %s and again at %s, more often than every 5 minutes", prev.Format("15:04"), next.Format("15:04")),
				hint: "the shortest interval is 5 minutes, for example */5 in the minute field",
			}
		}
		prev = next
	}
	return nil
}
