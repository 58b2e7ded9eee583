package logs_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/clock"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/logs"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
)

type appendStep struct {
	offset int64
	data   string
	ack    int64
}

// The truncation lines of a 10-byte cap, after a complete line and in the middle of one.
const (
	cut10    = "[nimbus] log truncated at 10 bytes; the rest of this job's output was dropped\n"
	cut10Mid = "\n" + cut10
)

func TestAppend(t *testing.T) {
	cases := []struct {
		name      string
		cfg       logs.Config
		steps     []appendStep
		want      string
		truncated bool
	}{
		{name: "in order",
			steps: []appendStep{{0, "hello ", 6}, {6, "world\n", 12}},
			want:  "hello world\n"},
		{name: "a retry of a stored append stores nothing",
			steps: []appendStep{{0, "abc", 3}, {0, "abc", 3}, {1, "bc", 3}},
			want:  "abc"},
		{name: "a retry with a new tail stores only the tail",
			steps: []appendStep{{0, "abc", 3}, {1, "bcdef", 6}},
			want:  "abcdef"},
		{name: "a gap is refused with the stored size",
			steps: []appendStep{{0, "abc", 3}, {5, "xyz", 3}, {3, "de", 5}, {5, "xyz", 8}},
			want:  "abcdexyz"},
		{name: "a gap on an empty log",
			steps: []appendStep{{2, "xx", 0}, {0, "ab", 2}},
			want:  "ab"},
		{name: "empty appends report the size",
			steps: []appendStep{{0, "", 0}, {0, "ab", 2}, {2, "", 2}, {0, "", 2}},
			want:  "ab"},
		{name: "bytes are kept as they are",
			steps: []appendStep{{0, "\x1b[31mred\x1b[0m\r\n\x00\xff", 16}},
			want:  "\x1b[31mred\x1b[0m\r\n\x00\xff"},
		{name: "big appends are split into chunks and read back whole",
			cfg:   logs.Config{ChunkSize: 4},
			steps: []appendStep{{0, "0123456789", 10}, {10, "abcdefghij", 20}, {15, "fghijKLM", 23}},
			want:  "0123456789abcdefghijKLM"},
		{name: "cap: the append that crosses it keeps what fits and one line",
			cfg:       logs.Config{MaxSize: 10},
			steps:     []appendStep{{0, "12345678", 8}, {8, "9abcdef\n", 16}},
			want:      "123456789a" + cut10Mid,
			truncated: true},
		{name: "cap: no extra newline after a complete line",
			cfg:       logs.Config{MaxSize: 10},
			steps:     []appendStep{{0, "123456789\n", 10}, {10, "x", 11}},
			want:      "123456789\n" + cut10,
			truncated: true},
		{name: "cap: the last stored byte decides the newline",
			cfg:       logs.Config{MaxSize: 10, ChunkSize: 3},
			steps:     []appendStep{{0, "abcdefghij", 10}, {10, "k", 11}},
			want:      "abcdefghij" + cut10Mid,
			truncated: true},
		{name: "cap: one big append",
			cfg:       logs.Config{MaxSize: 10},
			steps:     []appendStep{{0, "0123456789abcdefghij", 20}},
			want:      "0123456789" + cut10Mid,
			truncated: true},
		{name: "cap: later appends and retries are acknowledged and dropped",
			cfg: logs.Config{MaxSize: 10},
			steps: []appendStep{{0, "12345678", 8}, {8, "9abcdef\n", 16}, {8, "9abcdef\n", 16},
				{16, "more\n", 21}, {100, "gap", 103}, {0, "", 0}},
			want:      "123456789a" + cut10Mid,
			truncated: true},
		{name: "cap: exactly full is not truncated",
			cfg:   logs.Config{MaxSize: 10},
			steps: []appendStep{{0, "0123456789", 10}, {0, "0123456789", 10}},
			want:  "0123456789"},
		{name: "cap: the default is 100 MiB",
			steps: []appendStep{{0, "x", 1}},
			want:  "x"},
	}
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		rdb := newRedis(t)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				svc := newService(db, rdb, tc.cfg)
				job := newJob(t, db)
				for i, s := range tc.steps {
					ack, err := svc.Append(ctx, job, s.offset, []byte(s.data))
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					if ack != s.ack {
						t.Fatalf("step %d: Append(%d, %q) = %d, want %d", i, s.offset, s.data, ack, s.ack)
					}
				}
				if got := readAll(t, svc, job); got != tc.want {
					t.Fatalf("log = %q, want %q", got, tc.want)
				}
				st, err := svc.State(ctx, job)
				if err != nil {
					t.Fatal(err)
				}
				if st.Size != int64(len(tc.want)) || st.Truncated != tc.truncated || st.Complete {
					t.Fatalf("state = %+v, want size %d truncated %v", st, len(tc.want), tc.truncated)
				}
			})
		}
	})
}

func TestAppendErrors(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		svc := newService(db, newRedis(t), logs.Config{})
		job := newJob(t, db)
		cases := []struct {
			name   string
			call   func() error
			status int
		}{
			{"negative offset", func() error { _, err := svc.Append(ctx, job, -1, []byte("x")); return err }, http.StatusBadRequest},
			{"append to a job that does not exist", func() error { _, err := svc.Append(ctx, job+1000, 0, []byte("x")); return err }, http.StatusNotFound},
			{"complete a job that does not exist", func() error { return svc.Complete(ctx, job+1000) }, http.StatusNotFound},
			{"read with a negative offset", func() error { _, err := svc.Read(ctx, job, -1, 1); return err }, http.StatusBadRequest},
			{"read with no limit", func() error { _, err := svc.Read(ctx, job, 0, 0); return err }, http.StatusBadRequest},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				var ae *fault.Error
				if err := tc.call(); !errors.As(err, &ae) || api.Status(ae.Kind) != tc.status {
					t.Fatalf("err = %v, want a fault with status %d", err, tc.status)
				}
			})
		}
	})
}

// TestConcurrentAppenders runs several agents' worth of appends of the same output against one
// job at once — as retries of timed-out requests race their originals — each following the acks
// it gets, with random chunk sizes and random resends of bytes already sent. The log must be the
// output exactly: nothing lost, nothing doubled, and at the cap one truncation line.
func TestConcurrentAppenders(t *testing.T) {
	src := logText(96<<10, 1)
	cases := []struct {
		name string
		cfg  logs.Config
		want string
	}{
		{"under the cap", logs.Config{ChunkSize: 1 << 10}, string(src)},
		{"across the cap", logs.Config{MaxSize: 40000, ChunkSize: 1 << 10}, capped(src, 40000)},
	}
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		rdb := newRedis(t)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				svc := newService(db, rdb, tc.cfg)
				job := newJob(t, db)
				var wg sync.WaitGroup
				errs := make(chan error, 6)
				for agent := range 6 {
					wg.Go(func() {
						r := rand.New(rand.NewPCG(uint64(agent), 7))
						var pos int64
						for pos < int64(len(src)) {
							from := pos
							if r.IntN(4) == 0 {
								from = max(0, pos-int64(r.IntN(3000))) // a resend of bytes already acknowledged
							}
							to := min(int64(len(src)), from+1+int64(r.IntN(6000)))
							ack, err := svc.Append(context.Background(), job, from, src[from:to])
							if err != nil {
								errs <- err
								return
							}
							pos = ack
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatal(err)
				}
				if got := readAll(t, svc, job); got != tc.want {
					t.Fatalf("log differs from the output: %d bytes, want %d; first difference at %d",
						len(got), len(tc.want), firstDiff(got, tc.want))
				}
			})
		}
	})
}

// capped is what a log of output looks like when capped at n bytes.
func capped(output []byte, n int) string {
	s := string(output[:n])
	if s[n-1] != '\n' {
		s += "\n"
	}
	return s + "[nimbus] log truncated at " + strconv.Itoa(n) + " bytes; the rest of this job's output was dropped\n"
}

func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestRead(t *testing.T) {
	const text = "0123456789abcdef"
	cases := []struct {
		offset, limit int64
		want          string
	}{
		{0, 16, text},
		{0, 100, text},
		{3, 5, "34567"},
		{4, 4, "4567"},
		{5, 1, "5"},
		{15, 10, "f"},
		{16, 5, ""},
		{40, 1, ""},
	}
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		svc := newService(db, newRedis(t), logs.Config{ChunkSize: 4})
		job := newJob(t, db)
		// Chunks of 3, 4, 4, 4 and 1 bytes: appends do not line up with ChunkSize.
		for _, part := range []string{"012", "3456789abc", "def"} {
			size, _ := svc.Size(ctx, job)
			if _, err := svc.Append(ctx, job, size, []byte(part)); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range cases {
			got, err := svc.Read(ctx, job, tc.offset, tc.limit)
			if err != nil || string(got) != tc.want {
				t.Errorf("Read(%d, %d) = %q, %v; want %q", tc.offset, tc.limit, got, err, tc.want)
			}
		}
		empty := newJob(t, db)
		if got, err := svc.Read(ctx, empty, 0, 10); err != nil || len(got) != 0 {
			t.Errorf("Read of an empty log = %q, %v", got, err)
		}
	})
}

func TestComplete(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		svc := newService(db, newRedis(t), logs.Config{})
		cases := []struct {
			name  string
			steps func(job int64) error
			want  string
		}{
			{"a job that logged nothing", func(job int64) error { return svc.Complete(ctx, job) }, ""},
			{"twice", func(job int64) error {
				if _, err := svc.Append(ctx, job, 0, []byte("done\n")); err != nil {
					return err
				}
				if err := svc.Complete(ctx, job); err != nil {
					return err
				}
				return svc.Complete(ctx, job)
			}, "done\n"},
			{"bytes that arrive late are kept", func(job int64) error {
				if err := svc.Complete(ctx, job); err != nil {
					return err
				}
				_, err := svc.Append(ctx, job, 0, []byte("late\n"))
				return err
			}, "late\n"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				job := newJob(t, db)
				if st, err := svc.State(ctx, job); err != nil || st.Complete || st.Size != 0 {
					t.Fatalf("state before = %+v, %v", st, err)
				}
				if err := tc.steps(job); err != nil {
					t.Fatal(err)
				}
				st, err := svc.State(ctx, job)
				if err != nil || !st.Complete || st.Size != int64(len(tc.want)) {
					t.Fatalf("state = %+v, %v", st, err)
				}
				if got := readAll(t, svc, job); got != tc.want {
					t.Fatalf("log = %q, want %q", got, tc.want)
				}
			})
		}
	})
}

// TestDeletingTheJobDeletesItsLog: logs go with their jobs (a repo's deletion cascades to them).
func TestDeletingTheJobDeletesItsLog(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		svc := newService(db, newRedis(t), logs.Config{ChunkSize: 2})
		job, repo := newJobOf(t, db)
		if _, err := svc.Append(ctx, job, 0, []byte(strings.Repeat("x", 11))); err != nil {
			t.Fatal(err)
		}
		// The repo's deletion takes its builds, their jobs, and with them the logs.
		if err := db.Exec("DELETE FROM repos WHERE id = ?", repo).Error; err != nil {
			t.Fatal(err)
		}
		var n int64
		if err := db.Model(&logs.LogChunk{}).Where("job_id = ?", job).Count(&n).Error; err != nil || n != 0 {
			t.Fatalf("%d chunks left, err %v", n, err)
		}
		if st, err := svc.State(ctx, job); err != nil || st.Size != 0 {
			t.Fatalf("state = %+v, %v", st, err)
		}
	})
}

// Every stored piece keeps when it arrived; a line's time is its piece's.
func TestTimes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		clk := clock.NewFake(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
		svc := logs.NewService(db, newRedis(t), clk, discard, logs.Config{ChunkSize: 4})
		job := newJob(t, db)
		for _, part := range []string{"ab\n", "cdefgh\n"} {
			size, _ := svc.Size(ctx, job)
			if _, err := svc.Append(ctx, job, size, []byte(part)); err != nil {
				t.Fatal(err)
			}
			clk.Advance(1500 * time.Millisecond)
		}
		marks, err := svc.Times(ctx, job, -1)
		if err != nil {
			t.Fatal(err)
		}
		// "ab\n" is one piece; "cdefgh\n" two (ChunkSize 4), received at the same moment.
		t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
		want := []logs.Mark{{Offset: 0, ReceivedAt: t0}, {Offset: 3, ReceivedAt: t0.Add(1500 * time.Millisecond)}, {Offset: 7, ReceivedAt: t0.Add(1500 * time.Millisecond)}}
		if len(marks) != len(want) {
			t.Fatalf("marks %+v", marks)
		}
		for i := range want {
			if marks[i].Offset != want[i].Offset || !marks[i].ReceivedAt.Equal(want[i].ReceivedAt) {
				t.Errorf("mark %d = %+v, want %+v", i, marks[i], want[i])
			}
		}
		if rest, _ := svc.Times(ctx, job, 3); len(rest) != 1 || rest[0].Offset != 7 {
			t.Errorf("after 3: %+v", rest)
		}
	})
}
