package logs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/nimbus-build/nimbus/backend/api"
	"github.com/nimbus-build/nimbus/backend/fault"
	"github.com/nimbus-build/nimbus/backend/logs"
	"github.com/nimbus-build/nimbus/backend/store/storetest"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// BenchmarkAppend measures log ingest through HTTP into storage, the way an agent sends it: a
// POST of raw bytes at ?offset=, answered with a LogAck, over a real TCP connection, into
// PostgreSQL (and SQLite for comparison). The target is 50 MB/s on PostgreSQL.
//
//	go test -run '^$' -bench BenchmarkAppend ./backend/logs/
//
// "agents=4" runs four jobs at once, each with its own sequential sender, as four agents would.
// The log has no cap here: a capped log acknowledges without storing, which would measure
// nothing.
func BenchmarkAppend(b *testing.B) {
	for _, dialect := range []string{"postgres", "sqlite"} {
		for _, body := range []int{64 << 10, 256 << 10, 1 << 20} {
			for _, agents := range []int{1, 4} {
				b.Run(fmt.Sprintf("%s/body=%dKiB/agents=%d", dialect, body>>10, agents), func(b *testing.B) {
					db := storetest.SQLite(b)
					if dialect == "postgres" {
						db = storetest.Postgres(b)
					}
					benchIngest(b, db, body, agents)
				})
			}
		}
	}
}

func benchIngest(b *testing.B, db *gorm.DB, body, agents int) {
	svc := newService(db, newRedis(b), logs.Config{MaxSize: 1 << 50})
	srv := httptest.NewServer(ingestHandler(svc))
	b.Cleanup(srv.Close)
	jobs := make([]int64, agents)
	for i := range jobs {
		jobs[i] = newJob(b, db)
	}
	data := logText(body, 3)
	b.SetBytes(int64(body))
	b.ResetTimer()
	// Each agent sends its share of b.N appends, one after the other, following the acks.
	var wg sync.WaitGroup
	for i, job := range jobs {
		n := b.N / agents
		if i < b.N%agents {
			n++
		}
		wg.Go(func() {
			client := &http.Client{}
			var offset int64
			for range n {
				resp, err := client.Post(fmt.Sprintf("%s/log/%d?offset=%d", srv.URL, job, offset), "application/octet-stream", bytes.NewReader(data))
				if err != nil {
					b.Error(err)
					return
				}
				var ack protocol.LogAck
				err = json.NewDecoder(resp.Body).Decode(&ack)
				resp.Body.Close()
				if err != nil || ack.Offset != offset+int64(body) {
					b.Errorf("ack %+v (err %v) at offset %d", ack, err, offset)
					return
				}
				offset = ack.Offset
			}
		})
	}
	wg.Wait()
}

// ingestHandler is the storage half of the agent API's log call, as that handler does it after
// checking the lease: read the raw body, Append, answer the LogAck.
func ingestHandler(svc *logs.Service) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.POST("/log/:job", func(c *gin.Context) {
		job, _ := strconv.ParseInt(c.Param("job"), 10, 64)
		offset, _ := strconv.ParseInt(c.Query("offset"), 10, 64)
		data, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, 8<<20))
		if err != nil {
			api.Fail(c, discard, fault.BadRequest("body: %v", err))
			return
		}
		ack, err := svc.Append(context.WithoutCancel(c.Request.Context()), job, offset, data)
		if err != nil {
			api.Fail(c, discard, err)
			return
		}
		c.JSON(http.StatusOK, protocol.LogAck{Offset: ack})
	})
	return e
}
