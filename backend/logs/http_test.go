package logs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/logs"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

func TestGetLog(t *testing.T) {
	const text = "0123456789"
	type want struct {
		status       int
		body         string // for errors: the envelope's code
		contentRange string
	}
	cases := []struct {
		name  string
		job   string // "log" (holds text), "empty", "other" (not authorized) or a raw path segment
		query string
		rng   string
		want  want
	}{
		{"whole", "log", "", "", want{200, text, ""}},
		{"a range", "log", "", "bytes=0-4", want{206, "01234", "bytes 0-4/10"}},
		{"an open range", "log", "", "bytes=7-", want{206, "789", "bytes 7-9/10"}},
		{"a suffix", "log", "", "bytes=-3", want{206, "789", "bytes 7-9/10"}},
		{"a suffix longer than the log", "log", "", "bytes=-30", want{206, text, "bytes 0-9/10"}},
		{"a range past the end is clamped", "log", "", "bytes=5-100", want{206, "56789", "bytes 5-9/10"}},
		{"a range that starts at the end", "log", "", "bytes=10-", want{416, fault.CodeBadRequest, "bytes */10"}},
		{"an empty suffix", "log", "", "bytes=-0", want{416, fault.CodeBadRequest, "bytes */10"}},
		{"any range of an empty log", "empty", "", "bytes=0-", want{416, fault.CodeBadRequest, "bytes */0"}},
		{"several ranges are ignored", "log", "", "bytes=0-1,3-4", want{200, text, ""}},
		{"another unit is ignored", "log", "", "items=0-1", want{200, text, ""}},
		{"a reversed range is ignored", "log", "", "bytes=5-2", want{200, text, ""}},
		{"garbage is ignored", "log", "", "bytes=abc", want{200, text, ""}},
		{"from an offset", "log", "?offset=4", "", want{200, "456789", ""}},
		{"from the end", "log", "?offset=10", "", want{200, "", ""}},
		{"from past the end", "log", "?offset=11", "", want{416, fault.CodeBadRequest, "bytes */10"}},
		{"a negative offset", "log", "?offset=-1", "", want{400, fault.CodeBadRequest, ""}},
		{"offset and range", "log", "?offset=1", "bytes=0-1", want{400, fault.CodeBadRequest, ""}},
		{"an empty log", "empty", "", "", want{200, "", ""}},
		{"a job the caller may not see", "other", "", "", want{404, fault.CodeNotFound, ""}},
		{"not a job id", "abc", "", "", want{404, fault.CodeNotFound, ""}},
	}
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		svc := newService(db, newRedis(t), logs.Config{ChunkSize: 3})
		ids := map[string]int64{"log": newJob(t, db), "empty": newJob(t, db), "other": newJob(t, db)}
		if _, err := svc.Append(ctx, ids["log"], 0, []byte(text)); err != nil {
			t.Fatal(err)
		}
		srv, _ := server(t, svc, logs.HandlerConfig{}, ids["other"])
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				job := tc.job
				if id, ok := ids[job]; ok {
					job = fmt.Sprint(id)
				}
				resp, body := get(t, srv.URL+"/api/v1/jobs/"+job+"/log"+tc.query, "Range", tc.rng)
				got := want{resp.StatusCode, string(body), resp.Header.Get("Content-Range")}
				if resp.StatusCode >= 400 {
					var env api.Envelope
					if err := json.Unmarshal(body, &env); err != nil || env.Error == nil {
						t.Fatalf("error body %q is not the envelope", body)
					}
					got.body = env.Error.Code
				} else {
					size := map[string]string{"log": "10", "empty": "0"}[tc.job]
					if resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" ||
						resp.Header.Get("X-Content-Type-Options") != "nosniff" ||
						resp.Header.Get("X-Log-Size") != size || resp.Header.Get("X-Log-Complete") != "false" {
						t.Errorf("headers = %v", resp.Header)
					}
				}
				if got != tc.want {
					t.Fatalf("got %+v, want %+v", got, tc.want)
				}
			})
		}
	})
}

// TestGetBigLog serves a log of several read pieces, whole and in a range across them.
func TestGetBigLog(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		svc := newService(db, newRedis(t), logs.Config{ChunkSize: 100 << 10})
		job := newJob(t, db)
		text := logText(3<<20+12345, 2)
		for off := 0; off < len(text); off += 700 << 10 {
			if _, err := svc.Append(ctx, job, int64(off), text[off:min(len(text), off+700<<10)]); err != nil {
				t.Fatal(err)
			}
		}
		if err := svc.Complete(ctx, job); err != nil {
			t.Fatal(err)
		}
		srv, _ := server(t, svc, logs.HandlerConfig{})
		for _, tc := range []struct {
			rng        string
			start, end int
		}{{"", 0, len(text)}, {"bytes=1000000-2500000", 1000000, 2500001}} {
			resp, body := get(t, fmt.Sprintf("%s/api/v1/jobs/%d/log", srv.URL, job), "Range", tc.rng)
			if string(body) != string(text[tc.start:tc.end]) || resp.Header.Get("X-Log-Complete") != "true" {
				t.Fatalf("%q: %d bytes, want %d; first difference at %d", tc.rng, len(body),
					tc.end-tc.start, firstDiff(string(body), string(text[tc.start:tc.end])))
			}
		}
	})
}
