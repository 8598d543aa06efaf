package server

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// etagOf is a strong ETag over the representation.
func etagOf(body []byte) string {
	sum := sha256.Sum256(body)
	return `"` + hex.EncodeToString(sum[:12]) + `"`
}

func setCommonHeaders(h http.Header) {
	h["Odata-Version"] = odataVersion
	h["Cache-Control"] = noCache
}

// The values of the headers every response carries, under their canonical keys: set as shared
// slices, they cost a GET no canonicalisation and no allocation. They are never changed in
// place: Header.Add appends, and appending to a full slice copies it.
var (
	odataVersion = []string{"4.0"}
	noCache      = []string{"no-cache"}
	jsonType     = []string{"application/json; charset=utf-8"}
)

// writeJSON writes a resource with its ETag. The body is encoded into a pooled buffer: a
// GET allocates no body of its own.
func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := jsonBuffers.Get().(*bytes.Buffer)
	defer putJSONBuffer(buf)
	buf.Reset()
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		writeError(w, redfish.InternalError())
		return
	}
	// Encode is json.Marshal followed by a newline: the body, and so the ETag, are Marshal's.
	writeBody(w, status, bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

var jsonBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// putJSONBuffer returns a buffer to the pool unless it grew beyond the body of a collection
// of ~20,000 members (the pool drops what the collector finds unused anyway).
func putJSONBuffer(b *bytes.Buffer) {
	if b.Cap() <= 1<<20 {
		jsonBuffers.Put(b)
	}
}

// writeBody writes a marshalled resource with its ETag.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	writePrepared(w, status, body, etagOf(body), linkOf(body))
}

// writePrepared writes a marshalled resource whose ETag and Link header (empty for none) are
// known.
func writePrepared(w http.ResponseWriter, status int, body []byte, etag, link string) {
	h := w.Header()
	setCommonHeaders(h)
	h["Content-Type"] = jsonType
	h["Etag"] = []string{etag}
	if link != "" {
		h["Link"] = []string{link}
	}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// linkOf is describedBy(body) without decoding body: the Link header of a 10,000-member
// collection costs what a system's does. It finds the top-level "@odata.type", which
// encoding/json writes among the first members (after @odata.id or @odata.context), and
// remembers the link of each type. Bodies here come from json.Marshal: valid JSON without
// whitespace, every key spelled once.
func linkOf(body []byte) string {
	typ, ok := leadingType(body)
	if !ok {
		if typ, ok = topLevelType(body); !ok {
			return ""
		}
	}
	if l, ok := links.Load(string(typ)); ok {
		return l.(string)
	}
	l := describedBy(append(append([]byte(`{"@odata.type":`), typ...), '}'))
	if linkCount.Add(1) <= maxLinks {
		links.Store(string(typ), l)
	}
	return l
}

// links caches linkOf per raw @odata.type value; the types are the few the server renders.
var (
	links     sync.Map
	linkCount atomic.Int32
)

const maxLinks = 256

// leadingType returns the raw JSON string of the top-level "@odata.type" when it is one of
// the first members and only string members come before it (the shape of every resource).
func leadingType(body []byte) ([]byte, bool) {
	if len(body) == 0 || body[0] != '{' {
		return nil, false
	}
	i := 1
	for range 4 {
		key, next, ok := jsonString(body, i)
		if !ok || next >= len(body) || body[next] != ':' {
			return nil, false
		}
		val, after, ok := jsonString(body, next+1)
		if !ok {
			return nil, false
		}
		if string(key) == `"@odata.type"` {
			return val, true
		}
		if after >= len(body) || body[after] != ',' {
			return nil, false
		}
		i = after + 1
	}
	return nil, false
}

// jsonString returns the JSON string starting at body[i], quotes included, and the index
// after it.
func jsonString(body []byte, i int) ([]byte, int, bool) {
	if i >= len(body) || body[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(body); j++ {
		switch body[j] {
		case '\\':
			j++
		case '"':
			return body[i : j+1], j + 1, true
		}
	}
	return nil, 0, false
}

// topLevelType walks the top-level members with a decoder, skipping values, up to
// "@odata.type", and returns its raw value.
func topLevelType(body []byte) (json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, false
		}
		var val json.RawMessage
		if dec.Decode(&val) != nil {
			return nil, false
		}
		if key == "@odata.type" {
			return val, true
		}
	}
	return nil, false
}

// gzipMinBytes is the smallest body served gzip-compressed to clients that accept it. Below it
// compressing costs more CPU than the bytes it saves are worth (a ComputerSystem is ~3 KB);
// above it are the collections of hundreds of systems, which compress ~10:1.
const gzipMinBytes = 32 << 10

var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	return zw
}}

// writeJSONFor is writeJSON for a resource that can be large (a collection): a body of at
// least gzipMinBytes is gzip-compressed when the request accepts gzip. Its ETag is that of the
// identity body with "-gzip" appended, a different strong validator for a different
// representation. A response collected for $expand (bufferedResponse) stays identity: expand
// decodes it.
func writeJSONFor(w http.ResponseWriter, r *http.Request, status int, v any) {
	buf := jsonBuffers.Get().(*bytes.Buffer)
	defer putJSONBuffer(buf)
	buf.Reset()
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		writeError(w, redfish.InternalError())
		return
	}
	body := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(body) < gzipMinBytes {
		writeBody(w, status, body)
		return
	}
	h := w.Header()
	h.Add("Vary", "Accept-Encoding")
	if !acceptsGzip(r) || !direct(w) {
		writeBody(w, status, body)
		return
	}
	var zbuf bytes.Buffer
	zw := gzipWriters.Get().(*gzip.Writer)
	zw.Reset(&zbuf)
	_, _ = zw.Write(body)
	_ = zw.Close()
	zw.Reset(io.Discard) // do not keep zbuf alive in the pool
	gzipWriters.Put(zw)
	setCommonHeaders(h)
	h.Set("Content-Type", "application/json; charset=utf-8")
	etag := etagOf(body)
	h.Set("ETag", etag[:len(etag)-1]+`-gzip"`)
	if link := linkOf(body); link != "" {
		h.Set("Link", link)
	}
	h.Set("Content-Encoding", "gzip")
	h.Set("Content-Length", strconv.Itoa(zbuf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(zbuf.Bytes())
}

// acceptsGzip reports whether Accept-Encoding allows gzip (RFC 9110 12.5.3: listed, or "*",
// with a non-zero weight).
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for _, part := range strings.Split(v, ",") {
			coding, params, _ := strings.Cut(part, ";")
			coding = strings.ToLower(strings.TrimSpace(coding))
			if coding != "gzip" && coding != "x-gzip" && coding != "*" {
				continue
			}
			if q, ok := strings.CutPrefix(strings.ReplaceAll(strings.TrimSpace(params), " ", ""), "q="); ok {
				if f, err := strconv.ParseFloat(q, 64); err == nil && f == 0 {
					return false
				}
			}
			return true
		}
	}
	return false
}

// direct reports whether w leads to the client rather than into a bufferedResponse.
func direct(w http.ResponseWriter) bool {
	for {
		switch x := w.(type) {
		case *bufferedResponse:
			return false
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return true
		}
	}
}

// writeError writes a Redfish error envelope.
func writeError(w http.ResponseWriter, e *redfish.Error) {
	body, _ := json.Marshal(e.Envelope())
	h := w.Header()
	setCommonHeaders(h)
	h.Set("Content-Type", "application/json; charset=utf-8")
	if e.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Basic realm="kubevirt-redfish"`)
	}
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}

// logError records 5xx errors with their cause; client errors need no log line.
func logError(log *zap.Logger, r *http.Request, e *redfish.Error, cause error) {
	if e.Status >= 500 {
		log.Error("request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Int("status", e.Status), zap.Error(cause))
	}
}
