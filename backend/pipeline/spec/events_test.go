package spec

import (
	"reflect"
	"testing"
)

func TestEventsFor(t *testing.T) {
	src := []byte(`
main:
  push: [ { name: build, stages: [ { name: a, script: x } ] } ]
  web_trigger_train:
    - name: train
      stages: [ { name: a, script: x } ]
    - name: eval
      stages: [ { name: a, script: x } ]
"release/*":
  tag_push: [ { stages: [ { name: a, script: x } ] } ]
  web_trigger_deploy: [ { name: deploy, stages: [ { name: a, script: x } ] } ]
$:
  push: [ { name: fallback-push, stages: [ { name: a, script: x } ] } ]
  api_trigger: [ { name: any-api, stages: [ { name: a, script: x } ] } ]
`)
	cfg, ds := Parse(src, Options{File: ".cnb.yml"})
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	ev := func(bs []BranchEvent) map[string][]string {
		out := map[string][]string{}
		for _, b := range bs {
			if b.Pipelines != len(b.Names) {
				t.Errorf("%s: %d pipelines, %d names", b.Event, b.Pipelines, len(b.Names))
			}
			out[b.Event] = b.Names
		}
		return out
	}
	// main's own push wins over $'s; $'s api_trigger fills in.
	if got, want := ev(cfg.EventsFor("main")), map[string][]string{"push": {"build"}, "web_trigger_train": {"train", "eval"}, "api_trigger": {"any-api"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("main: %v, want %v", got, want)
	}
	if got, want := ev(cfg.EventsFor("release/1.0")), map[string][]string{"tag_push": {""}, "web_trigger_deploy": {"deploy"}, "push": {"fallback-push"}, "api_trigger": {"any-api"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("release/1.0: %v, want %v", got, want)
	}
	if got := cfg.EventsFor("feature")[0].Event; got != "push" {
		t.Errorf("feature: first event %q", got)
	}
}
