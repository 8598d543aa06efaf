package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The load generator speaks HTTP/1.1 over plain keep-alive TCP connections, like wrk: each
// connection writes one pre-built request and reads the whole response before the next. It
// parses only what it needs (status, Content-Length or chunked framing, a few headers) and
// throws the body away, so that its own CPU cost per request stays well below a net/http
// client's: on a 2-core machine the generator shares the CPUs with the server it measures.

// request is one HTTP request, ready to write.
type request []byte

// newRequest builds a request; headers are "Name: value" lines without CRLF.
func newRequest(method, path string, headers []string, body []byte) request {
	var b bytes.Buffer
	b.WriteString(method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: krf-bench\r\n")
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	if body != nil {
		b.WriteString("Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n")
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

// response is what the generator keeps of a response.
type response struct {
	status   int
	bodyLen  int
	encoding string // Content-Encoding
	token    string // X-Auth-Token
	close    bool   // the server closes the connection after it
}

// scenario is one measured load.
type scenario struct {
	addr     string
	conns    int
	duration time.Duration // measured phase ends after this long...
	max      int           // ...or after this many requests, whichever comes first
	warmup   time.Duration // unmeasured load first, on the same connections (0: none)
	expect   int           // the status every response must have
	// next returns the request worker w sends as its seq-th request, or nil when the worker
	// is done.
	next func(w, seq int) request
	// seen, when set, is called with every measured response (from the worker's goroutine).
	seen func(w int, r *response)
}

// loadResult is the outcome of a scenario's measured phase.
type loadResult struct {
	Requests  int           // completed and measured
	Total     int           // completed, warm-up and errors included
	Errors    int           // unexpected status or transport errors
	FirstErr  string        // the first of them
	Elapsed   time.Duration // wall time of the measured phase
	RPS       float64
	P50, P99  time.Duration
	Mean      time.Duration
	Max       time.Duration
	BodyBytes int64          // total body bytes received
	Encodings map[string]int // Content-Encoding of the responses ("" = identity)

	lats []time.Duration // of the measured requests
}

// run drives the scenario and returns the measured phase's figures.
func (sc scenario) run() (*loadResult, error) {
	type worker struct {
		lat       []time.Duration
		errs      int
		firstErr  string
		bytes     int64
		encodings map[string]int
	}
	workers := make([]worker, sc.conns)
	var issued, total atomic.Int64
	start := time.Now()
	measureStart := start.Add(sc.warmup)
	deadline := measureStart.Add(sc.duration)
	var wg sync.WaitGroup
	var dialErr atomic.Value
	for w := range sc.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := &workers[w]
			st.encodings = map[string]int{}
			var c *conn
			defer func() {
				if c != nil {
					c.Close()
				}
			}()
			for seq := 0; ; seq++ {
				now := time.Now()
				if now.After(deadline) {
					return
				}
				measured := !now.Before(measureStart)
				if measured && issued.Add(1) > int64(sc.max) {
					return
				}
				req := sc.next(w, seq)
				if req == nil {
					return // this worker has nothing left to send
				}
				if c == nil {
					var err error
					if c, err = dial(sc.addr); err != nil {
						dialErr.CompareAndSwap(nil, err)
						return
					}
				}
				t0 := time.Now()
				resp, err := c.do(req)
				lat := time.Since(t0)
				total.Add(1)
				if err != nil {
					c.Close()
					c = nil
				} else if resp.close {
					c.Close()
					c = nil
				}
				if !measured {
					continue
				}
				switch {
				case err != nil:
					st.errs++
					if st.firstErr == "" {
						st.firstErr = err.Error()
					}
				case resp.status != sc.expect:
					st.errs++
					if st.firstErr == "" {
						st.firstErr = fmt.Sprintf("status %d, want %d", resp.status, sc.expect)
					}
				default:
					st.lat = append(st.lat, lat)
					st.bytes += int64(resp.bodyLen)
					st.encodings[resp.encoding]++
					if sc.seen != nil {
						sc.seen(w, resp)
					}
				}
			}
		}()
	}
	wg.Wait()
	end := time.Now()
	if err, _ := dialErr.Load().(error); err != nil {
		return nil, err
	}
	res := &loadResult{Encodings: map[string]int{}, Total: int(total.Load())}
	for i := range workers {
		st := &workers[i]
		res.lats = append(res.lats, st.lat...)
		res.Errors += st.errs
		if res.FirstErr == "" {
			res.FirstErr = st.firstErr
		}
		res.BodyBytes += st.bytes
		for k, v := range st.encodings {
			res.Encodings[k] += v
		}
	}
	// The measured phase ends when its last request completes: before the deadline when the
	// request budget ran out first.
	res.Elapsed = max(end.Sub(measureStart), time.Nanosecond)
	res.finish()
	return res, nil
}

// add merges another slice of the same benchmark into r.
func (r *loadResult) add(o *loadResult) {
	r.lats = append(r.lats, o.lats...)
	r.Total += o.Total
	r.Errors += o.Errors
	if r.FirstErr == "" {
		r.FirstErr = o.FirstErr
	}
	r.Elapsed += o.Elapsed
	r.BodyBytes += o.BodyBytes
	for k, v := range o.Encodings {
		r.Encodings[k] += v
	}
	r.finish()
}

// finish computes the figures from the latencies.
func (r *loadResult) finish() {
	all := r.lats
	r.Requests = len(all)
	if len(all) == 0 {
		return
	}
	slices.Sort(all)
	var sum time.Duration
	for _, d := range all {
		sum += d
	}
	r.RPS = float64(len(all)) / r.Elapsed.Seconds()
	r.P50 = percentile(all, 0.50)
	r.P99 = percentile(all, 0.99)
	r.Mean = sum / time.Duration(len(all))
	r.Max = all[len(all)-1]
}

// percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(float64(len(sorted))*p+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// conn is one keep-alive HTTP/1.1 connection.
type conn struct {
	net.Conn
	r *bufio.Reader
}

func dial(addr string) (*conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &conn{Conn: c, r: bufio.NewReaderSize(c, 64<<10)}, nil
}

// do writes a request and reads its response, discarding the body.
func (c *conn) do(req request) (*response, error) {
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := c.Write(req); err != nil {
		return nil, err
	}
	line, err := c.line()
	if err != nil {
		return nil, err
	}
	// "HTTP/1.1 200 OK"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return nil, fmt.Errorf("bad status line %q", line)
	}
	resp := &response{}
	if resp.status, err = strconv.Atoi(string(line[9:12])); err != nil {
		return nil, fmt.Errorf("bad status line %q", line)
	}
	length, chunked := -1, false
	for {
		h, err := c.line()
		if err != nil {
			return nil, err
		}
		if len(h) == 0 {
			break
		}
		k, v, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			continue
		}
		v = bytes.TrimSpace(v)
		switch {
		case equalFold(k, "Content-Length"):
			if length, err = strconv.Atoi(string(v)); err != nil {
				return nil, fmt.Errorf("bad Content-Length %q", v)
			}
		case equalFold(k, "Transfer-Encoding"):
			chunked = bytes.EqualFold(v, []byte("chunked"))
		case equalFold(k, "Content-Encoding"):
			resp.encoding = string(v)
		case equalFold(k, "X-Auth-Token"):
			resp.token = string(v)
		case equalFold(k, "Connection"):
			resp.close = bytes.EqualFold(v, []byte("close"))
		}
	}
	noBody := resp.status == 204 || resp.status == 304 || (resp.status >= 100 && resp.status < 200) || bytes.HasPrefix(req, []byte("HEAD "))
	switch {
	case noBody:
	case chunked:
		n, err := c.discardChunked()
		if err != nil {
			return nil, err
		}
		resp.bodyLen = n
	case length >= 0:
		if _, err := c.r.Discard(length); err != nil {
			return nil, err
		}
		resp.bodyLen = length
	default:
		// Body delimited by the end of the connection.
		n, err := io.Copy(io.Discard, c.r)
		if err != nil {
			return nil, err
		}
		resp.bodyLen, resp.close = int(n), true
	}
	return resp, nil
}

func (c *conn) discardChunked() (int, error) {
	total := 0
	for {
		line, err := c.line()
		if err != nil {
			return 0, err
		}
		size, _, _ := bytes.Cut(line, []byte(";"))
		n, err := strconv.ParseInt(string(bytes.TrimSpace(size)), 16, 64)
		if err != nil {
			return 0, fmt.Errorf("bad chunk size %q", line)
		}
		if n == 0 {
			for { // trailers, then the empty line
				l, err := c.line()
				if err != nil {
					return 0, err
				}
				if len(l) == 0 {
					return total, nil
				}
			}
		}
		if _, err := c.r.Discard(int(n)); err != nil {
			return 0, err
		}
		total += int(n)
		if l, err := c.line(); err != nil || len(l) != 0 {
			return 0, errors.New("chunk not followed by CRLF")
		}
	}
}

// line reads one CRLF-terminated line without its terminator. The slice is valid until the
// next read.
func (c *conn) line() ([]byte, error) {
	l, err := c.r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	return bytes.TrimRight(l, "\r\n"), nil
}

func equalFold(b []byte, s string) bool { return bytes.EqualFold(b, []byte(s)) }
