package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	virtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/config"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
)

// observe records every request: the metrics by route template, and one access log line
// with the request id and the user (from the requestInfo ServeHTTP gave it).
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK
		}
		elapsed := time.Since(start)
		s.metrics.Requests.WithLabelValues(route, r.Method, strconv.Itoa(status)).Inc()
		s.metrics.RequestDuration.WithLabelValues(route, r.Method).Observe(elapsed.Seconds())
		if ce := s.log.Check(zap.DebugLevel, "request"); ce != nil {
			user := ""
			if u := userOf(r.Context()); u != nil {
				user = u.Username
			}
			ce.Write(zap.String("request_id", requestID(r.Context())), zap.String("method", r.Method),
				zap.String("route", route), zap.String("path", r.URL.Path), zap.Int("status", status),
				zap.Duration("took", elapsed), zap.String("user", user), zap.String("remote", r.RemoteAddr))
		}
	})
}

// requestInfo is what the server knows of a request beyond net/http: its id and, once
// authenticated, its user. One context value carries both, because each context value costs
// a copy of the whole http.Request.
type requestInfo struct {
	id   string
	user *config.User
}

const infoKey ctxKey = 1

func infoOf(ctx context.Context) *requestInfo {
	info, _ := ctx.Value(infoKey).(*requestInfo)
	return info
}

// requestID is the id the logs give the request ("" outside observe).
func requestID(ctx context.Context) string {
	if info := infoOf(ctx); info != nil {
		return info.id
	}
	return ""
}

// maxRequestIDLen bounds a client's X-Request-Id in the logs.
const maxRequestIDLen = 128

var (
	requestIDPrefix = randomRequestIDPrefix()
	requestCount    atomic.Uint64
)

// newRequestID is the client's X-Request-Id (so a client's logs and ours can be matched),
// else a per-process random prefix and a counter.
func newRequestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); id != "" {
		return truncate(id, maxRequestIDLen)
	}
	return requestIDPrefix + strconv.FormatUint(requestCount.Add(1), 10)
}

func randomRequestIDPrefix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b) + "-"
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte("ok\n"))
}

// readyz is ready when the caches have synced and the apiserver answered recently: a
// replica that cannot reach the cluster stops receiving traffic.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	if !s.backend.Synced() {
		http.Error(w, "informer caches not synced", http.StatusServiceUnavailable)
		return
	}
	if err := s.ping.check(r.Context(), s.backend.Ping); err != nil {
		http.Error(w, "apiserver unreachable: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// metricsHandler serves /metrics, first refreshing the gauges read off the caches.
func (s *Server) metricsHandler() http.Handler {
	h := promhttp.HandlerFor(s.metrics.Registry, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		synced := 0.0
		if s.backend.Synced() {
			synced = 1
		}
		s.metrics.InformersSynced.Set(synced)
		running := 0
		for _, dv := range s.backend.MediaDataVolumes() {
			if dv.Status.Phase != cdiv1.Succeeded {
				running++
			}
		}
		s.metrics.ImportsRunning.Set(float64(running))
		if s.sec.sessions != nil {
			s.metrics.ActiveSessions.Set(float64(s.sec.sessions.Live()))
		}
		s.metrics.SystemInfo.Reset()
		for _, m := range s.backend.List(func(*virtv1.VirtualMachine) bool { return true }) {
			f := kubevirt.FactsOf(m)
			s.metrics.SystemInfo.WithLabelValues(m.ID(), m.VM.Namespace, m.Node(), string(f.PowerState), f.Status.Health).Set(1)
		}
		h.ServeHTTP(w, r)
	})
}

// pinger rate-limits apiserver reachability checks: probes from several kubelets and load
// balancers cost at most one apiserver request per interval.
type pinger struct {
	mu      sync.Mutex
	at      time.Time
	lastErr error
}

const pingInterval = 5 * time.Second

func (p *pinger) check(ctx context.Context, ping func(context.Context) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.at) < pingInterval {
		return p.lastErr
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	p.lastErr, p.at = ping(ctx), time.Now()
	return p.lastErr
}
