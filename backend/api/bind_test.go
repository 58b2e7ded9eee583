package api

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

func ctxWith(method, target, body string) *gin.Context {
	gin.SetMode(gin.TestMode)
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	c.Request = httptest.NewRequest(method, target, strings.NewReader(body))
	return c
}

func TestBind(t *testing.T) {
	type req struct {
		Name  string `json:"name"`
		Count int    `json:"count"`
	}
	tests := []struct {
		body   string
		status int
		want   string
	}{
		{`{"name":"a","count":2}`, 0, ""},
		{``, 400, "JSON object"},
		{`{"name":`, 400, "invalid JSON"},
		{`{"nam":"a"}`, 400, "unknown field"},
		{`{"count":"x"}`, 400, `field "count" must be int`},
		{`{"name":"a"} {"name":"b"}`, 400, "one JSON object"},
		{`{"name":"` + strings.Repeat("x", MaxJSONBody) + `"}`, 413, "exceeds"},
	}
	for _, tt := range tests {
		var v req
		err := Bind(ctxWith("POST", "/", tt.body), &v)
		if tt.status == 0 {
			if err != nil || v.Name != "a" || v.Count != 2 {
				t.Errorf("%q: %v %+v", tt.body, err, v)
			}
			continue
		}
		var ae *Error
		if !errors.As(err, &ae) || ae.Status != tt.status || !strings.Contains(ae.Message, tt.want) {
			t.Errorf("%.40q: err = %v, want %d containing %q", tt.body, err, tt.status, tt.want)
		}
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
