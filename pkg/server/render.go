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

	"go.uber.org/zap"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// etagOf is a strong ETag over the representation.
func etagOf(body []byte) string {
	sum := sha256.Sum256(body)
	return `"` + hex.EncodeToString(sum[:12]) + `"`
}

func setCommonHeaders(h http.Header) {
	h.Set("OData-Version", "4.0")
	h.Set("Cache-Control", "no-cache")
}

// writeJSON writes a resource with its ETag.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, redfish.InternalError())
		return
	}
	writeBody(w, status, body)
}

// writeBody writes a marshalled resource with its ETag.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	setCommonHeaders(h)
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("ETag", etagOf(body))
	if link := linkOf(body); link != "" {
		h.Set("Link", link)
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// linkOf is describedBy(body) without decoding all of body: it reads the top-level members
// only up to "@odata.type", which encoding/json writes first or second (after @odata.id or
// @odata.context), so the Link header of a 10,000-member collection costs what a system's
// does. Bodies here come from json.Marshal: valid JSON, every key spelled once.
func linkOf(body []byte) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return ""
		}
		if key == "@odata.type" {
			var typ json.RawMessage
			if dec.Decode(&typ) != nil {
				return ""
			}
			return describedBy(append(append([]byte(`{"@odata.type":`), typ...), '}'))
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return ""
		}
	}
	return ""
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
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, redfish.InternalError())
		return
	}
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
