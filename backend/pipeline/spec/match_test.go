package spec

import (
	"slices"
	"testing"
)

func TestBranchMatching(t *testing.T) {
	src := `main:
  push:
    - name: main-push
      stages: [make]
"**":
  push:
    - name: any-push
      stages: [make]
"dev/*":
  vscode:
    - name: dev-ide
      services: [vscode]
"(release|hotfix)/**":
  push:
    - name: release-push
      stages: [make]
"**/!(main|dev)":
  branch.create:
    - name: not-main-or-dev
      stages: [make]
$:
  push:
    - name: fallback-push
      stages: [make]
  vscode:
    - name: fallback-ide
      services: [vscode]
  tag_push:
    - name: any-tag
      stages: [make]
"v1.*":
  tag_push:
    - name: v1-tag
      stages: [make]
`
	cfg, ds := Parse([]byte(src), Options{})
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	tests := []struct {
		name string
		trig Trigger
		want []string
	}{
		{"exact and ** both apply, no priority", Trigger{Event: "push", Branch: "main"}, []string{"main-push", "any-push"}},
		{"** alone", Trigger{Event: "push", Branch: "feature/x"}, []string{"any-push"}},
		{"alternation with globstar", Trigger{Event: "push", Branch: "release/1.0"}, []string{"any-push", "release-push"}},
		{"$ supplies an event no matching glob declares", Trigger{Event: "vscode", Branch: "main"}, []string{"fallback-ide"}},
		{"glob for the event", Trigger{Event: "vscode", Branch: "dev/alice"}, []string{"dev-ide"}},
		{"extglob negation", Trigger{Event: "branch.create", Branch: "feature"}, []string{"not-main-or-dev"}},
		{"extglob negation excludes", Trigger{Event: "branch.create", Branch: "dev"}, nil},
		{"tags match tag names", Trigger{Event: "tag_push", Tag: "v1.2"}, []string{"v1-tag"}},
		{"$ supplies the tags no tag glob matched", Trigger{Event: "tag_push", Tag: "v2.0"}, []string{"any-tag"}},
		{"$ is skipped when a matching glob declares the event", Trigger{Event: "push", Branch: "x"}, []string{"any-push"}},
		{"no event", Trigger{Event: "web_trigger_x", Branch: "main"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, _, err := cfg.Plan(tt.trig)
			if err != nil {
				t.Fatal(err)
			}
			if got := pipelineNames(set); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}

	// With no "**", "$" catches what no glob matched.
	cfg, _ = Parse([]byte("main:\n  push:\n    - name: m\n      stages: [make]\n$:\n  push:\n    - name: f\n      stages: [make]\n  tag_push:\n    - name: t\n      stages: [make]\n\"v1.*\":\n  tag_push:\n    - name: v1\n      stages: [make]\n"), Options{})
	for _, tt := range []struct {
		trig Trigger
		want string
	}{
		{Trigger{Event: "push", Branch: "main"}, "m"},
		{Trigger{Event: "push", Branch: "other"}, "f"},
		{Trigger{Event: "tag_push", Tag: "v2.0"}, "t"},
		{Trigger{Event: "tag_push", Tag: "v1.0", Branch: "main"}, "v1"},
	} {
		set, _, _ := cfg.Plan(tt.trig)
		if got := pipelineNames(set); !slices.Equal(got, []string{tt.want}) {
			t.Errorf("%+v: got %v, want %s", tt.trig, got, tt.want)
		}
	}
}

func TestEventsAndSchedules(t *testing.T) {
	src := `main:
  "crontab: 0 2 * * *":
    - name: nightly
      stages: [make]
  "crontab:  30  5,17 * * *":
    - name: twice
      stages: [make]
  web_trigger_deploy:
    - name: deploy
      stages: [make]
  api_trigger_sync:
    - name: sync
      stages: [make]
"dev/*":
  schedule:
    - cron: "0 2 * * *"
      name: nightly-train
      stages: [make]
    - cron: "0 4 * * 6"
      name: weekly
      stages: [make]
`
	cfg, ds := Parse([]byte(src), Options{})
	if len(ds) != 0 {
		t.Fatal(ds)
	}
	tests := []struct {
		trig      Trigger
		want      []string
		event     string
		cronEvent string
	}{
		{Trigger{Event: "crontab: 0 2 * * *", Branch: "main"}, []string{"nightly"}, "crontab", "true"},
		{Trigger{Event: "crontab: 30 5,17 * * *", Branch: "main"}, []string{"twice"}, "crontab", "true"},
		{Trigger{Event: "crontab", Branch: "main"}, []string{"nightly", "twice"}, "crontab", "true"},
		{Trigger{Event: "crontab", Cron: "0  2 * * *", Branch: "main"}, []string{"nightly"}, "crontab", "true"},
		{Trigger{Event: "web_trigger_deploy", Branch: "main"}, []string{"deploy"}, "web_trigger_deploy", "false"},
		{Trigger{Event: "api_trigger_sync", Branch: "main"}, []string{"sync"}, "api_trigger_sync", "false"},
		{Trigger{Event: "schedule", Branch: "dev/x"}, []string{"nightly-train", "weekly"}, "schedule", "true"},
		{Trigger{Event: "schedule", Cron: "0 4 * * 6", Branch: "dev/x"}, []string{"weekly"}, "schedule", "true"},
		{Trigger{Event: "schedule", Branch: "main"}, nil, "", ""},
	}
	for _, tt := range tests {
		set, _, err := cfg.Plan(tt.trig)
		if err != nil {
			t.Fatal(err)
		}
		if got := pipelineNames(set); !slices.Equal(got, tt.want) {
			t.Errorf("%+v: got %v, want %v", tt.trig, got, tt.want)
			continue
		}
		for _, p := range set.Pipelines {
			if p.Event != tt.event || p.Builtins["CNB_EVENT"] != tt.event || p.Builtins["CNB_IS_CRONEVENT"] != tt.cronEvent {
				t.Errorf("%s: event %q CNB_EVENT %q CNB_IS_CRONEVENT %q", p.Name, p.Event, p.Builtins["CNB_EVENT"], p.Builtins["CNB_IS_CRONEVENT"])
			}
		}
	}

	wantSchedules := []Schedule{
		{BranchKey: "main", Event: "crontab: 0 2 * * *", Cron: "0 2 * * *"},
		{BranchKey: "main", Event: "crontab:  30  5,17 * * *", Cron: "30 5,17 * * *"},
		{BranchKey: "dev/*", Event: "schedule", Cron: "0 2 * * *"},
		{BranchKey: "dev/*", Event: "schedule", Cron: "0 4 * * 6"},
	}
	got := cfg.Schedules()
	if len(got) != len(wantSchedules) {
		t.Fatalf("schedules %+v", got)
	}
	for i, s := range got {
		w := wantSchedules[i]
		if s.BranchKey != w.BranchKey || s.Event != w.Event || s.Cron != w.Cron {
			t.Errorf("schedule %d = %+v, want %+v", i, s, w)
		}
	}
	// 02:00 in Asia/Shanghai is 18:00 UTC the day before.
	next := got[0].Next(mustTime(t, "2026-03-01T12:00:00Z"))
	if want := mustTime(t, "2026-03-01T18:00:00Z"); !next.Equal(want) {
		t.Errorf("next fire %s, want %s", next, want)
	}
}
