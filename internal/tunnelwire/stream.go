package tunnelwire

import (
	"net"
	"sync"
	"time"

	yamux "github.com/libp2p/go-yamux/v5"
)

// StreamCloseTimeout is how long a stream may stay half-closed after its Close before it is
// reset: the far end has had that long to finish its side.
const StreamCloseTimeout = time.Minute

// Stream is st as the tunnel hands streams out, on both ends: Close closes the writing half
// only (the far end reads EOF; reading goes on until the far end closes too), as CloseWrite
// does, and a stream whose far end has not closed its half StreamCloseTimeout after that is
// reset. (go-yamux's own Close would drop the reading half at once, and the bytes still coming
// with it: "write everything, close, read the answer" needs the half-close.)
func Stream(st *yamux.Stream) net.Conn { return &stream{Stream: st} }

type stream struct {
	*yamux.Stream
	once sync.Once
}

func (s *stream) Close() error {
	err := s.Stream.CloseWrite()
	// Reset is a no-op on a stream that both ends have closed by then.
	s.once.Do(func() { time.AfterFunc(StreamCloseTimeout, func() { s.Stream.Reset() }) })
	return err
}
