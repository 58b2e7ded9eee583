package runner

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/agent/client"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// clientCalls classifies every call of the agent's client by what it sends back: a report
// masked with maskReport (the value it masks), or why it is not. A call added to the client (a
// pull-request comment, say) fails TestClientCallsAreClassified until it is put here, and a
// report type put here is walked by TestMaskReportWalksEveryField.
var clientCalls = map[string]struct {
	masked any    // the report maskReport masks on its way out
	why    string // why the call is not masked that way
}{
	"Event":        {masked: protocol.Event{}},
	"Finish":       {masked: protocol.FinishRequest{}},
	"PutRelease":   {masked: protocol.ReleaseRequest{}},
	"MergePull":    {masked: protocol.MergeRequest{}}, // the merge message lands in history
	"SetReviewers": {masked: protocol.ReviewersRequest{}},
	"StartBuild":   {masked: protocol.StartBuildRequest{}}, // all but the token
	"Resolve":      {masked: protocol.KeyRequest{}},
	"Await":        {masked: protocol.KeyRequest{}},
	"Lock":         {masked: protocol.LockRequest{}},
	"Unlock":       {masked: protocol.LockRequest{}},

	"AppendLog":      {why: "log bytes are masked as they stream (jobLog)"},
	"PutReleaseFile": {why: "a file name holding a secret is refused (release.go); the bytes are an artifact"},
	"Import":         {why: "the URL names the file the server reads for the job"},
	"ChildBuild":     {why: "names a build by the slug and number the server answered"},
	"Register":       {why: "the agent's own facts"},
	"Facts":          {why: "the agent's own facts, restated at its start"},
	"Poll":           {why: "the agent's own capacity"},
	"Control":        {why: "lease ids"},
	"Renew":          {why: "a lease id"},
	"Deregister":     {why: "nothing"},
	"WithToken":      {why: "sends nothing"},
}

func TestClientCallsAreClassified(t *testing.T) {
	typ := reflect.TypeFor[*client.Client]()
	var have []string
	for i := range typ.NumMethod() {
		name := typ.Method(i).Name
		have = append(have, name)
		if _, ok := clientCalls[name]; !ok {
			t.Errorf("client.%s is new: say in clientCalls whether what it sends is a report masked with maskReport, or why not", name)
		}
	}
	for name := range clientCalls {
		if !slices.Contains(have, name) {
			t.Errorf("clientCalls names client.%s, which is gone", name)
		}
	}
}

// A report's fields used to be masked one by one where someone had remembered to (exports and
// the finish reason); metric names were not. maskReport walks every string of a report: here a
// secret is planted in every string field, map key and value, element and nested value of each
// report type, and none may survive, while the original keeps them all.
func TestMaskReportWalksEveryField(t *testing.T) {
	const secret = "s3cr3t-Vq7"
	for name, c := range clientCalls {
		if c.masked == nil {
			continue
		}
		t.Run(name, func(t *testing.T) {
			v := reflect.New(reflect.TypeOf(c.masked)).Elem()
			planted := plant(v, secret)
			if planted == 0 {
				t.Fatalf("%T has no string to plant a secret in", c.masked)
			}
			orig := v.Interface()
			before, _ := json.Marshal(orig)
			masked := reflect.ValueOf(maskReport(orig, []string{secret})).Interface()
			raw, err := json.Marshal(masked)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(raw), secret) {
				t.Errorf("a secret survived: %s", raw)
			}
			if got := strings.Count(string(raw), Mask); got < planted {
				t.Errorf("%d masks for %d planted secrets: %s", got, planted, raw)
			}
			if after, _ := json.Marshal(orig); string(after) != string(before) || !strings.Contains(string(after), secret) {
				t.Errorf("the original changed: %s", after)
			}
		})
	}
}

// plant sets every string reachable from v (settable) to s, filling maps, slices, pointers and
// interfaces with one planted entry each, and says how many strings it set.
func plant(v reflect.Value, s string) int {
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
		return 1
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(1, 0)))
			return 0
		}
		n := 0
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				n += plant(v.Field(i), s)
			}
		}
		return n
	case reflect.Map:
		k := reflect.New(v.Type().Key()).Elem()
		e := reflect.New(v.Type().Elem()).Elem()
		n := plant(k, s) + plant(e, s)
		if e.Kind() == reflect.Float64 {
			e.SetFloat(1)
		}
		m := reflect.MakeMap(v.Type())
		m.SetMapIndex(k, e)
		v.Set(m)
		return n
	case reflect.Slice:
		e := reflect.New(v.Type().Elem()).Elem()
		n := plant(e, s)
		v.Set(reflect.Append(reflect.MakeSlice(v.Type(), 0, 1), e))
		return n
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		n := plant(p.Elem(), s)
		v.Set(p)
		return n
	case reflect.Interface:
		// Settings and resolved data: nested maps and lists of strings.
		nested := map[string]any{s: []any{s, map[string]any{"k": s}}}
		v.Set(reflect.ValueOf(nested))
		return 3
	}
	return 0
}
