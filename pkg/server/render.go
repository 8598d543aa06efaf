package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"

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
	h := w.Header()
	setCommonHeaders(h)
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("ETag", etagOf(body))
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
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
