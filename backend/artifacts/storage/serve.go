package storage

import (
	"io"
	"net/http"
	"time"
)

// ServeContent is http.ServeContent (Range, If-Range, conditional requests) for a blob from
// Open, made to reach the connection's own ReadFrom through the writers wrapped around it.
//
// Routers and middleware wrap the http.ResponseWriter (gin does), and a wrapper without
// ReadFrom turns every download into 32 KiB write calls through user space. With the
// connection's ReadFrom a blob on the local disk (an *os.File) goes out with sendfile(2). The
// status and headers still pass through the outer writer, so access logs and metrics see them;
// only the body bypasses it (its byte count is not seen there).
func ServeContent(w http.ResponseWriter, r *http.Request, modtime time.Time, content io.ReadSeeker) {
	http.ServeContent(sendfileWriter{w}, r, "", modtime, content)
}

// sendfileWriter adds ReadFrom to a writer, reaching the innermost writer that has one.
type sendfileWriter struct{ http.ResponseWriter }

// Unwrap lets http.ResponseController see through this writer too.
func (w sendfileWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ReadFrom commits the status and headers through the outer writer, then copies the body with
// the ReadFrom of the innermost writer that has one (net/http's, which uses sendfile for files).
func (w sendfileWriter) ReadFrom(src io.Reader) (int64, error) {
	if _, err := w.ResponseWriter.Write(nil); err != nil {
		return 0, err
	}
	var inner http.ResponseWriter = w.ResponseWriter
	for {
		if rf, ok := inner.(io.ReaderFrom); ok {
			return rf.ReadFrom(src)
		}
		u, ok := inner.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		inner = u.Unwrap()
	}
	return io.CopyBuffer(writerOnly{w.ResponseWriter}, src, make([]byte, 256<<10))
}

// writerOnly hides everything but Write, so io.Copy cannot loop back into ReadFrom.
type writerOnly struct{ io.Writer }
