package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/nimbus-build/nimbus/backend/fault"
)

func ctxWith(method, target, body string) *gin.Context {
	gin.SetMode(gin.TestMode)
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	c.Request = httptest.NewRequest(method, target, strings.NewReader(body))
	return c
}

// TestBind: a JSON body binds only when it is exactly one JSON object with nothing after it but
// whitespace, and (for Bind) names no field the target lacks. Trailing data after the object
// used to be accepted when it began with '}' or ']' (json.Decoder.More reports false for those),
// so {"name":"x1"}} bound as {"name":"x1"}.
func TestBind(t *testing.T) {
	type req struct {
		Name  string `json:"name"`
		Count int    `json:"count"`
	}
	const ok = `{"name":"a","count":2}`
	tests := []struct {
		name   string
		body   string
		status int    // 0: binds to name a, count 2
		want   string // in the message
		field  string // details.field, when the error names one
	}{
		{"valid", ok, 0, "", ""},
		{"whitespace around", " \n\t" + ok + " \r\n\t ", 0, "", ""},
		{"empty", ``, 400, "JSON object", ""},
		{"only whitespace", " \n ", 400, "JSON object", ""},
		{"null", `null`, 400, "JSON object", ""},
		{"an array", `[{"name":"a"}]`, 400, "JSON object", ""},
		{"a string", `"a"`, 400, "JSON object", ""},
		{"a number", `2`, 400, "JSON object", ""},
		{"truncated", `{"name":`, 400, "invalid JSON", ""},
		{"malformed", `{"name" "a"}`, 400, "malformed JSON", ""},
		{"wrong type", `{"count":"x"}`, 400, `field "count" must be int`, "count"},
		{"trailing }", ok + `}`, 400, "one JSON object", ""},
		{"trailing ]", ok + `]`, 400, "one JSON object", ""},
		{"trailing } after whitespace", ok + " \n}", 400, "one JSON object", ""},
		{"trailing second object", ok + ` {"name":"b"}`, 400, "one JSON object", ""},
		{"trailing second object, no space", ok + `{"name":"b"}`, 400, "one JSON object", ""},
		{"trailing garbage", ok + ` garbage`, 400, "one JSON object", ""},
		{"trailing comma", ok + `,`, 400, "one JSON object", ""},
		{"trailing NUL", ok + "\x00", 400, "one JSON object", ""},
		{"a NUL in a string", `{"name":"a\u0000b"}`, 400, "NUL character", ""},
		{"a NUL in a key", `{"na\u0000me":"a"}`, 400, "NUL character", ""},
		{"an escaped quote does not end the string", `{"name":"\"\u0000"}`, 400, "NUL character", ""},
		{"unknown field", `{"nam":"a"}`, 400, `unknown field "nam"`, "nam"},
		{"unknown field beside known ones", `{"name":"a","count":2,"extra":true}`, 400, `unknown field "extra"`, "extra"},
		{"over the limit", `{"name":"` + strings.Repeat("x", MaxJSONBody) + `"}`, 413, "exceeds", ""},
		{"trailing whitespace over the limit", ok + strings.Repeat(" ", MaxJSONBody), 413, "exceeds", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v req
			err := Bind(ctxWith("POST", "/", tt.body), &v)
			checkBind(t, err, v.Name, v.Count, tt.status, tt.want, tt.field)
		})
	}
}

// A backslash that is itself escaped leaves "u0000" as text, which binds.
func TestBindEscapedBackslashBeforeU0000(t *testing.T) {
	var v struct {
		Name string `json:"name"`
	}
	if err := Bind(ctxWith("POST", "/", `{"name":"a\\u0000"}`), &v); err != nil || v.Name != `a\u0000` {
		t.Fatalf("err %v, name %q", err, v.Name)
	}
}

// TestBindLenient: BindLenient ignores fields the target lacks (an agent newer than the server
// may send them) and is otherwise as strict as Bind.
func TestBindLenient(t *testing.T) {
	type req struct {
		Name  string `json:"name"`
		Count int    `json:"count"`
	}
	const ok = `{"name":"a","count":2}`
	tests := []struct {
		name   string
		body   string
		status int
		want   string
		field  string
	}{
		{"valid", ok, 0, "", ""},
		{"unknown field allowed", `{"name":"a","count":2,"newerField":{"x":[1]}}`, 0, "", ""},
		{"only unknown fields but the known ones", `{"extra":1,"name":"a","count":2}`, 0, "", ""},
		{"whitespace trailer", ok + " \n", 0, "", ""},
		{"trailing }", ok + `}`, 400, "one JSON object", ""},
		{"trailing second object", ok + ` {"name":"b"}`, 400, "one JSON object", ""},
		{"trailing garbage", ok + `x`, 400, "one JSON object", ""},
		{"empty", ``, 400, "JSON object", ""},
		{"null", `null`, 400, "JSON object", ""},
		{"an array", `[]`, 400, "JSON object", ""},
		{"wrong type", `{"name":"a","count":"2"}`, 400, `field "count" must be int`, "count"},
		{"over the limit", `{"x":"` + strings.Repeat("x", MaxJSONBody) + `"}`, 413, "exceeds", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v req
			err := BindLenient(ctxWith("POST", "/", tt.body), &v)
			checkBind(t, err, v.Name, v.Count, tt.status, tt.want, tt.field)
		})
	}
}

func checkBind(t *testing.T, err error, name string, count, status int, want, field string) {
	t.Helper()
	if status == 0 {
		if err != nil || name != "a" || count != 2 {
			t.Errorf("err = %v, bound name %q count %d; want a, 2", err, name, count)
		}
		return
	}
	var ae *fault.Error
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v (bound name %q), want a %d *fault.Error", err, name, status)
	}
	code := fault.CodeBadRequest
	if status == 413 {
		code = fault.CodeTooLarge
	}
	if Status(ae.Kind) != status || ae.Code != code || !strings.Contains(ae.Message, want) {
		t.Errorf("err = %d %v, want %d %s containing %q", Status(ae.Kind), ae, status, code, want)
	}
	if got, _ := ae.Details["field"].(string); got != field {
		t.Errorf("details.field = %q, want %q", got, field)
	}
}

func TestPagination(t *testing.T) {
	p, err := ParsePage(ctxWith("GET", "/?limit=2", ""))
	if err != nil || p.Limit != 2 || p.After != 0 {
		t.Fatalf("%+v %v", p, err)
	}
	l := NewList(p, []int64{10, 9, 8}, func(v int64) int64 { return v })
	if len(l.Items) != 2 || l.NextCursor == "" {
		t.Fatalf("first page %+v", l)
	}
	p2, err := ParsePage(ctxWith("GET", "/?limit=2&cursor="+l.NextCursor, ""))
	if err != nil || p2.After != 9 {
		t.Fatalf("cursor round trip: %+v %v", p2, err)
	}
	last := NewList(p2, []int64{8}, func(v int64) int64 { return v })
	if last.NextCursor != "" || len(last.Items) != 1 {
		t.Fatalf("last page %+v", last)
	}
	if empty := NewList(p2, []int64(nil), func(v int64) int64 { return v }); empty.Items == nil {
		t.Fatal("empty page must encode as [] not null")
	}
	for _, q := range []string{"limit=0", "limit=101", "limit=x", "cursor=!!", "cursor=" + Cursor(-1)} {
		if _, err := ParsePage(ctxWith("GET", "/?"+q, "")); err == nil {
			t.Errorf("%s accepted", q)
		}
	}
}

func TestPaginateInMemory(t *testing.T) {
	items := []int64{1, 2, 3, 4, 5}
	key := func(v int64) int64 { return v }
	l := Paginate(Page{Limit: 2}, items, key)
	if len(l.Items) != 2 || l.Items[1] != 2 || l.NextCursor != Cursor(2) {
		t.Fatalf("page 1 %+v", l)
	}
	l = Paginate(Page{Limit: 2, After: 4}, items, key)
	if len(l.Items) != 1 || l.Items[0] != 5 || l.NextCursor != "" {
		t.Fatalf("last page %+v", l)
	}
	if l := Paginate(Page{Limit: 2, After: 9}, items, key); len(l.Items) != 0 || l.Items == nil {
		t.Fatalf("past the end %+v", l)
	}
}

// TestBindDuplicateKeys: a key that appears twice in one object, at any depth, is a 400 naming
// it. encoding/json keeps the last value without a word, so {"name":"t4","name":"t5"} bound
// (and POST /api/v1/orgs created) t5; "Name" after "name" did the same, since struct fields
// match without regard to case. Map keys, which are case-sensitive, are compared exactly.
func TestBindDuplicateKeys(t *testing.T) {
	type inner struct {
		A string `json:"a"`
		B int    `json:"b"`
	}
	type Embedded struct {
		Emb int `json:"emb"`
	}
	type req struct {
		Embedded
		Name  string            `json:"name"`
		Env   map[string]string `json:"env"`
		Items []inner           `json:"items"`
		Inner *inner            `json:"inner"`
		Any   any               `json:"any"`
		Raw   json.RawMessage   `json:"raw"`
		At    time.Time         `json:"at"`
	}
	tests := []struct {
		body  string
		field string // "": binds
		first string // the earlier key, when it is spelt otherwise
	}{
		{`{"name":"t4","name":"t5"}`, "name", ""},
		{`{"name":"t4","Name":"t5"}`, "Name", "name"},
		{`{"NAME":"t4","name":"t5"}`, "name", "NAME"},
		{`{"name":"t4","env":{"A":"1","A":"2"}}`, "env.A", ""},
		{`{"name":"t4","env":{"a":"1","A":"2"}}`, "", ""},
		{`{"items":[{"a":"x"},{"a":"x","b":1,"a":"y"}]}`, "items[1].a", ""},
		{`{"inner":{"b":1,"B":2}}`, "inner.B", "b"},
		{`{"any":{"k":1,"k":2}}`, "any.k", ""},
		{`{"any":{"k":1,"K":2}}`, "", ""},
		{`{"any":[1,{"x":{"y":1,"y":2}}]}`, "any[1].x.y", ""},
		{`{"raw":{"q":[1],"q":[1]}}`, "raw.q", ""},
		{`{"emb":1,"Emb":2}`, "Emb", "emb"},
		{`{"at":"2024-01-01T00:00:00Z","name":"x","inner":{"a":"x","b":2},"items":[{"a":"x"},{"a":"y"}],"env":{"k":"v"}}`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			var v req
			err := Bind(ctxWith("POST", "/", tt.body), &v)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("err = %v, want the body bound", err)
				}
				return
			}
			var ae *fault.Error
			if !errors.As(err, &ae) || Status(ae.Kind) != 400 || ae.Code != fault.CodeBadRequest {
				t.Fatalf("err = %v (bound %+v), want a 400 naming %q", err, v, tt.field)
			}
			want := fmt.Sprintf("duplicate key %q", tt.field)
			if tt.first != "" {
				want += fmt.Sprintf(" in the request body (the same field as %q)", tt.first)
			}
			if !strings.Contains(ae.Message, want) || ae.Details["field"] != tt.field {
				t.Errorf("err = %v (details %v), want %q and details.field %q", ae, ae.Details, want, tt.field)
			}
		})
	}
	// The agent protocol's lenient binding ignores unknown fields, but not a duplicate, even
	// inside a field it does not know.
	for _, body := range []string{`{"name":"a","count":2,"new":{"z":1,"z":2}}`, `{"x":1,"name":"a","x":2}`} {
		var v struct {
			Name  string `json:"name"`
			Count int    `json:"count"`
		}
		if err := BindLenient(ctxWith("POST", "/", body), &v); err == nil || !strings.Contains(err.Error(), "duplicate key") {
			t.Errorf("BindLenient(%s) = %v, want a duplicate key", body, err)
		}
	}
}

// TestBindInvalidUTF8: a body that is not UTF-8 is a 400 saying where. encoding/json used to
// put U+FFFD in place of each bad byte, so {"description":"caf\xe9"} stored "caf\uFFFD".
func TestBindInvalidUTF8(t *testing.T) {
	for _, body := range []string{"{\"name\":\"caf\xe9\"}", "{\"name\":\"a\",\"count\":2,\"x\xff\":1}"} {
		var v struct {
			Name  string `json:"name"`
			Count int    `json:"count"`
		}
		err := BindLenient(ctxWith("POST", "/", body), &v)
		var ae *fault.Error
		at := strings.IndexAny(body, "\xe9\xff")
		if !errors.As(err, &ae) || Status(ae.Kind) != 400 || !strings.Contains(ae.Message, fmt.Sprintf("not valid UTF-8 (at byte %d)", at)) {
			t.Errorf("BindLenient(%q) = %v (bound %+v), want a 400 saying byte %d is not UTF-8", body, err, v, at)
		}
	}
}
