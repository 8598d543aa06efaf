package server

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	virtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
)

// observe records every request: the metrics by route template, and one access log line
// with the request id and the user.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		info := &requestInfo{}
		next.ServeHTTP(ww, r.WithContext(context.WithValue(r.Context(), infoKey, info)))
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
			ce.Write(zap.String("request_id", middleware.GetReqID(r.Context())), zap.String("method", r.Method),
				zap.String("route", route), zap.String("path", r.URL.Path), zap.Int("status", status),
				zap.Duration("took", elapsed), zap.String("user", info.user), zap.String("remote", r.RemoteAddr))
		}
	})
}

// requestInfo carries what handlers learn (the user) back to the access log.
type requestInfo struct{ user string }

const infoKey ctxKey = 1

func noteUser(ctx context.Context, user string) {
	if info, ok := ctx.Value(infoKey).(*requestInfo); ok {
		info.user = user
	}
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
