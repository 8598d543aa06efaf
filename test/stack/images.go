package stack

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// ImageServer serves a fake ISO of Size bytes at every path but /missing.iso (404), in 64 KiB
// chunks, and counts what it sent. Delay (nanoseconds) slows each chunk, so that an import
// can be watched in progress or cut off by a crash.
type ImageServer struct {
	*httptest.Server
	Size  int
	Sent  atomic.Int64
	Delay atomic.Int64
}

// NewImageServer starts an ImageServer on 127.0.0.1 that stops when the test ends.
func NewImageServer(t testing.TB, size int) *ImageServer {
	s := &ImageServer{Size: size}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing.iso" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(s.Size))
		if r.Method == http.MethodHead {
			return
		}
		chunk := make([]byte, 64<<10)
		for left := s.Size; left > 0; left -= len(chunk) {
			if left < len(chunk) {
				chunk = chunk[:left]
			}
			if d := time.Duration(s.Delay.Load()); d > 0 {
				select {
				case <-time.After(d):
				case <-r.Context().Done():
					return // the importer gave up
				}
			}
			n, err := w.Write(chunk)
			s.Sent.Add(int64(n))
			if err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(s.Close)
	return s
}
