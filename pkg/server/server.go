// Package server is the HTTP side of kubevirt-redfish: routing, authentication, Redfish
// protocol rules (status codes, error envelopes, ETags, Allow) and the handlers that render
// machines as Redfish resources.
package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	virtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/config"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/metrics"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// Backend is what the server needs from the cluster: cached reads and the power and boot
// capabilities of a BMC.
type Backend interface {
	Get(ns, name string) (kubevirt.Machine, bool)
	List(keep func(*virtv1.VirtualMachine) bool) []kubevirt.Machine
	Reset(ctx context.Context, ns, name string, rt redfish.ResetType) error
	SetBoot(ctx context.Context, ns, name string, req kubevirt.BootRequest) error
	Ping(ctx context.Context) error
	InsertMedia(ctx context.Context, ns, name string, req kubevirt.MediaRequest) error
	EjectMedia(ctx context.Context, ns, name string) error
	DataVolume(ns, name string) (*cdiv1.DataVolume, bool)
	MediaDataVolumes() []*cdiv1.DataVolume
	Synced() bool
}

// maxBody bounds request bodies; Redfish bodies are a few hundred bytes.
const maxBody = 1 << 20

// Server serves the Redfish API.
type Server struct {
	backend Backend
	log     *zap.Logger
	cfg     atomic.Pointer[config.Config]
	basic   *basicAuth
	router  chi.Router
	metrics *metrics.Metrics
	ping    pinger
}

// Option adjusts a Server.
type Option func(*Server)

// WithMetrics records into m (by default the server keeps its own registry).
func WithMetrics(m *metrics.Metrics) Option { return func(s *Server) { s.metrics = m } }

// New builds a server for cfg over backend.
func New(cfg *config.Config, backend Backend, log *zap.Logger, opts ...Option) *Server {
	s := &Server{backend: backend, log: log, metrics: metrics.New()}
	for _, o := range opts {
		o(s)
	}
	s.cfg.Store(cfg)
	s.basic = newBasicAuth(func() map[string]*config.User { return s.cfg.Load().Users })
	s.router = s.routes()
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// route is one resource: its methods, and whether it is readable without credentials.
type route struct {
	pattern string
	public  bool
	methods map[string]http.HandlerFunc
}

func (s *Server) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(middleware.RequestID, s.observe, s.recoverer, middleware.StripSlashes)
	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Handle("/metrics", s.metricsHandler())
	table := []route{
		{pattern: "/redfish", public: true, methods: get(s.versions)},
		{pattern: "/redfish/v1", public: true, methods: get(s.serviceRoot)},
		{pattern: "/redfish/v1/odata", public: true, methods: get(s.odataService)},
		{pattern: "/redfish/v1/$metadata", public: true, methods: get(s.metadata)},
		{pattern: "/redfish/v1/Systems", methods: get(s.systems)},
		{pattern: "/redfish/v1/Systems/{id}", methods: map[string]http.HandlerFunc{
			http.MethodGet: s.system, http.MethodPatch: s.patchSystem}},
		{pattern: "/redfish/v1/Systems/{id}/Actions/ComputerSystem.Reset", methods: post(s.reset)},
		{pattern: "/redfish/v1/Systems/{id}/VirtualMedia", methods: get(s.mediaCollection)},
		{pattern: "/redfish/v1/Systems/{id}/VirtualMedia/{media}", methods: get(s.media)},
		{pattern: "/redfish/v1/Systems/{id}/VirtualMedia/{media}/Actions/VirtualMedia.InsertMedia", methods: post(s.insertMedia)},
		{pattern: "/redfish/v1/Systems/{id}/VirtualMedia/{media}/Actions/VirtualMedia.EjectMedia", methods: post(s.ejectMedia)},
		{pattern: "/redfish/v1/Managers", methods: get(s.managers)},
		{pattern: "/redfish/v1/Managers/{id}", methods: get(s.manager)},
		{pattern: "/redfish/v1/Managers/{id}/VirtualMedia", methods: get(s.mediaCollection)},
		{pattern: "/redfish/v1/Chassis", methods: get(s.chassisCollection)},
		{pattern: "/redfish/v1/Chassis/{id}", methods: get(s.chassis)},
		{pattern: "/redfish/v1/SessionService", methods: get(s.sessionService)},
		{pattern: "/redfish/v1/SessionService/Sessions", methods: get(s.sessions)},
		{pattern: "/redfish/v1/TaskService", methods: get(s.taskService)},
		{pattern: "/redfish/v1/TaskService/Tasks", methods: get(s.tasks)},
		{pattern: "/redfish/v1/TaskService/Tasks/{id}", methods: get(s.task)},
	}
	for _, rt := range table {
		r.Handle(rt.pattern, s.dispatch(rt))
	}
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, redfish.ResourceNotFound("Resource", r.URL.Path))
	})
	return r
}

func get(h http.HandlerFunc) map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{http.MethodGet: h}
}

func post(h http.HandlerFunc) map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{http.MethodPost: h}
}

// dispatch authenticates, answers HEAD like GET without a body, and turns a method the
// resource does not have into 405 with Allow.
func (s *Server) dispatch(rt route) http.Handler {
	allowed := make([]string, 0, len(rt.methods)+1)
	for m := range rt.methods {
		allowed = append(allowed, m)
	}
	if rt.methods[http.MethodGet] != nil {
		allowed = append(allowed, http.MethodHead)
	}
	sort.Strings(allowed)
	allow := strings.Join(allowed, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		if !rt.public {
			u := s.authenticate(r)
			if u == nil {
				writeError(w, redfish.NoValidSession())
				return
			}
			r = r.WithContext(withUser(r.Context(), u))
			noteUser(r.Context(), u.Username)
		}
		method := r.Method
		if method == http.MethodHead {
			method = http.MethodGet
			w = headWriter{w}
		}
		h := rt.methods[method]
		if h == nil {
			writeError(w, redfish.OperationNotAllowed())
			return
		}
		h(w, r)
	})
}

// headWriter drops the body of a HEAD response.
type headWriter struct{ http.ResponseWriter }

func (h headWriter) Write(b []byte) (int, error) { return len(b), nil }

func (s *Server) authenticate(r *http.Request) *config.User {
	user, pass, ok := r.BasicAuth()
	if !ok {
		return nil
	}
	return s.basic.Check(user, pass)
}

// recoverer turns a panic into a 500 error envelope; it never reaches the client raw.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic serving request", zap.Any("panic", v), zap.String("path", r.URL.Path), zap.Stack("stack"))
				writeError(w, redfish.InternalError())
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// readBody reads a bounded request body.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, *redfish.Error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, &redfish.Error{Status: http.StatusRequestEntityTooLarge, Messages: redfish.MalformedJSON().Messages}
	}
	if err != nil {
		return nil, redfish.MalformedJSON()
	}
	return body, nil
}

// backendError maps a cluster error onto a Redfish error.
func backendError(err error) *redfish.Error {
	var netErr net.Error
	switch {
	case errors.Is(err, kubevirt.ErrNotFound):
		return redfish.ResourceNotFound("ComputerSystem", "")
	case errors.Is(err, kubevirt.ErrBusy), apierrors.IsConflict(err):
		return redfish.ResourceInUse("Other changes to the virtual machine kept winning; retry the request.")
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return redfish.RequestRejected("The cluster rejected the change: " + apiMessage(err))
	case apierrors.IsServiceUnavailable(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsTooManyRequests(err), errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr):
		return redfish.ServiceTemporarilyUnavailable(5, "The Kubernetes API server cannot be reached.")
	}
	return redfish.InternalError()
}

func apiMessage(err error) string {
	var s apierrors.APIStatus
	if errors.As(err, &s) {
		return s.Status().Message
	}
	return err.Error()
}

// writeTimeout bounds one action against the cluster.
const writeTimeout = 30 * time.Second
