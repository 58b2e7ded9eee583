package apiclient

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/nimbus-build/nimbus/backend/server"
)

// calls is every response type of this package with the operation and status it is read
// from: what contract_test checks against openapi.yaml.
var calls = []struct {
	method, path, status string
	typ                  any
}{
	{"POST", "/auth/signup", "201", Session{}},
	{"POST", "/user/tokens", "201", Token{}},
	{"POST", "/repos/{org}/{repo}/deploy-tokens", "201", Token{}},
	{"POST", "/orgs", "201", Org{}},
	{"POST", "/orgs/{org}/repos", "201", Repo{}},
	{"GET", "/repos/{org}/{repo}/builds/{number}", "200", Build{}},
	{"GET", "/repos/{org}/{repo}/builds", "200", BuildList{}},
	{"GET", "/repos/{org}/{repo}/builds/{number}/pipelines", "200", PipelineList{}},
	{"GET", "/repos/{org}/{repo}/pipelines/{id}/record", "200", Record{}},
	{"GET", "/repos/{org}/{repo}/records/compare", "200", RecordDiff{}},
	{"GET", "/orgs/{org}/agents", "200", AgentList{}},
	{"GET", "/admin/agents", "200", AgentList{}},
	{"POST", "/orgs/{org}/agents/{id}/pause", "200", Agent{}},
	{"POST", "/orgs/{org}/agents/{id}/resume", "200", Agent{}},
	{"POST", "/orgs/{org}/runner-tokens", "201", RunnerToken{}},
	{"GET", "/orgs/{org}/billing/usage", "200", UsageList{}},
	{"GET", "/repos/{org}/{repo}/metrics", "200", MetricSeries{}},
	{"GET", "/repos/{org}/{repo}/schedules", "200", ScheduleList{}},
	{"POST", "/repos/{org}/{repo}/builds/{number}/rerun-exact", "201", Build{}},
	{"GET", "/repos/{org}/{repo}/releases/{tag}", "200", Release{}},
	{"GET", "/repos/{org}/{repo}/pipelines/{id}/artifacts", "200", ArtifactUses{}},
	{"PUT", "/repos/{org}/{repo}/webhooks/publish", "200", PublishWebhook{}},
	{"GET", "/repos/{org}/{repo}/secret-files/{path}", "200", SecretFile{}},
	{"GET", "/orgs/{org}/billing", "200", Billing{}},
	{"GET", "/orgs/{org}/billing/ledger", "200", LedgerPage{}},
	{"POST", "/admin/orgs/{org}/credits", "201", LedgerEntry{}},
	{"POST", "/admin/orgs/{org}/credits", "200", LedgerEntry{}},
	{"GET", "/orgs/{org}/workspaces", "200", WorkspaceList{}},
	{"GET", "/workspaces/{id}", "200", Workspace{}},
	{"POST", "/workspaces/{id}/restore", "200", Restored{}},
	{"POST", "/workspaces/{id}/preview/{port}/token", "200", PreviewToken{}},
	{"POST", "/repos/{org}/{repo}/workspaces", "201", Build{}},
	{"GET", "/repos/{org}/{repo}/artifacts/{package}", "200", ArtifactVersionList{}},
	{"GET", "/repos/{org}/{repo}/artifacts/{package}/{version}", "200", ArtifactVersion{}},
	{"PUT", "/repos/{org}/{repo}/artifacts/{package}/{version}/{file}", "201", Published{}},
	{"PUT", "/repos/{org}/{repo}/artifacts/{package}/{version}/{file}", "200", Published{}},
	{"GET", "/workspaces/{id}", "404", envelope{}},
	{"POST", "/repos/{org}/{repo}/pulls", "201", PullRequest{}},
	{"GET", "/repos/{org}/{repo}/pulls", "200", PullList{}},
	{"GET", "/repos/{org}/{repo}/pulls/{number}", "200", PullRequest{}},
	{"POST", "/repos/{org}/{repo}/pulls/{number}/merge", "200", PullRequest{}},
	{"POST", "/repos/{org}/{repo}/pulls/{number}/reviews", "201", PullReview{}},
}

// envelope is how errorOf reads an error answer.
type envelope struct {
	Error struct {
		Code    string         `json:"code"`
		Message string         `json:"message"`
		Details map[string]any `json:"details"`
	} `json:"error"`
}

func loadDoc(t *testing.T) *openapi3.T {
	t.Helper()
	raw, err := server.OpenAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// responseSchema is the JSON schema of an operation's answer with a status.
func responseSchema(doc *openapi3.T, method, path, status string) (*openapi3.Schema, error) {
	item := doc.Paths.Find(path)
	if item == nil {
		return nil, fmt.Errorf("%s is not in openapi.yaml", path)
	}
	op := item.GetOperation(method)
	if op == nil {
		return nil, fmt.Errorf("%s %s is not in openapi.yaml", method, path)
	}
	r := op.Responses.Value(status)
	if r == nil || r.Value == nil {
		return nil, fmt.Errorf("%s %s declares no %s answer", method, path, status)
	}
	mt := r.Value.Content.Get("application/json")
	if mt == nil || mt.Schema == nil {
		return nil, fmt.Errorf("%s %s %s has no JSON body", method, path, status)
	}
	return mt.Schema.Value, nil
}

// mismatches walks a Go type beside the schema it decodes: every JSON field of a struct must be
// a property of the object (its allOf parts included), with a compatible type, at any depth.
func mismatches(t reflect.Type, s *openapi3.Schema, at string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s == nil {
		return []string{at + ": no schema"}
	}
	types := schemaTypes(s)
	want := func(names ...string) []string {
		if len(types) == 0 || slices.ContainsFunc(names, func(n string) bool { return slices.Contains(types, n) }) {
			return nil
		}
		return []string{fmt.Sprintf("%s: Go %s, but the document says %v", at, t, types)}
	}
	if t == reflect.TypeFor[time.Time]() {
		return want("string") // RFC 3339 text (format: date-time), which time.Time decodes
	}
	switch t.Kind() {
	case reflect.Struct:
		if out := want("object"); out != nil {
			return out
		}
		props := properties(s)
		var out []string
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			p, ok := props[name]
			if !ok {
				out = append(out, fmt.Sprintf("%s.%s: not a property in the document", at, name))
				continue
			}
			out = append(out, mismatches(f.Type, p, at+"."+name)...)
		}
		return out
	case reflect.Slice:
		if out := want("array"); out != nil {
			return out
		}
		if s.Items == nil {
			return nil
		}
		return mismatches(t.Elem(), s.Items.Value, at+"[]")
	case reflect.Map, reflect.Interface:
		return want("object")
	case reflect.String:
		return want("string")
	case reflect.Bool:
		return want("boolean")
	case reflect.Int, reflect.Int32, reflect.Int64:
		return want("integer")
	case reflect.Float64:
		return want("number", "integer")
	}
	return []string{fmt.Sprintf("%s: Go %s has no check here", at, t)}
}

// schemaTypes is the schema's types, those of its allOf, oneOf and anyOf parts included.
func schemaTypes(s *openapi3.Schema) []string {
	var out []string
	if s.Type != nil {
		out = append(out, (*s.Type)...)
	}
	for _, parts := range []openapi3.SchemaRefs{s.AllOf, s.OneOf, s.AnyOf} {
		for _, p := range parts {
			if p.Value != nil {
				out = append(out, schemaTypes(p.Value)...)
			}
		}
	}
	if len(out) == 0 && len(s.Properties) > 0 {
		out = append(out, "object")
	}
	return out
}

// properties is the object's properties, those of its allOf parts included.
func properties(s *openapi3.Schema) map[string]*openapi3.Schema {
	out := map[string]*openapi3.Schema{}
	for name, p := range s.Properties {
		out[name] = p.Value
	}
	for _, parts := range []openapi3.SchemaRefs{s.AllOf, s.OneOf, s.AnyOf} {
		for _, p := range parts {
			if p.Value != nil {
				for name, v := range properties(p.Value) {
					out[name] = v
				}
			}
		}
	}
	return out
}

// Every type the client decodes is what the document says the operation answers: a field the
// document does not declare (renamed, removed, misspelled) or a wrong type fails here.
func TestResponseTypesMatchTheDocument(t *testing.T) {
	doc := loadDoc(t)
	for _, c := range calls {
		s, err := responseSchema(doc, c.method, c.path, c.status)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, m := range mismatches(reflect.TypeOf(c.typ), s, c.method+" "+c.path+" "+c.status) {
			t.Error(m)
		}
	}
}

// The check fails on a type that drifted from the document: an undeclared field, a wrong type,
// nested or not.
func TestContractCheckCatchesDrift(t *testing.T) {
	doc := loadDoc(t)
	s, err := responseSchema(doc, "GET", "/repos/{org}/{repo}/artifacts/{package}/{version}", "200")
	if err != nil {
		t.Fatal(err)
	}
	type badFile struct {
		Name   string `json:"name"`
		Bytes  int64  `json:"bytes"` // the document says size
		Digest int64  `json:"digest"`
	}
	type badVersion struct {
		Version string    `json:"version"`
		Files   []badFile `json:"files"`
	}
	got := mismatches(reflect.TypeOf(badVersion{}), s, "v")
	want := []string{"v.files[].bytes: not a property in the document", "v.files[].digest: Go int64, but the document says [string]"}
	if !slices.Equal(got, want) {
		t.Fatalf("mismatches %q, want %q", got, want)
	}
	if got := mismatches(reflect.TypeOf(ArtifactVersion{}), s, "v"); len(got) != 0 {
		t.Fatalf("the right type: %q", got)
	}
}
