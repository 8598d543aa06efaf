// Package server is the HTTP side of kubevirt-redfish: routing, authentication, Redfish
// protocol rules (status codes, error envelopes, ETags, Allow) and the handlers that render
// machines as Redfish resources.
package server

import (
	"context"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
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
	Ping(ctx context.Context) error
	InsertMedia(ctx context.Context, ns, name string, req kubevirt.MediaRequest) error
	EjectMedia(ctx context.Context, ns, name string) error
	DataVolume(ns, name string) (*cdiv1.DataVolume, bool)
	SetSettings(ctx context.Context, ns, name string, s kubevirt.Settings) error
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
	sec     *security
	// systemBodies keeps rendered ComputerSystems (bodycache.go).
	systemBodies *bodyCache
}

// Option adjusts a Server.
type Option func(*Server)

// WithMetrics records into m (by default the server keeps its own registry).
func WithMetrics(m *metrics.Metrics) Option { return func(s *Server) { s.metrics = m } }

// New builds a server for cfg over backend.
func New(cfg *config.Config, backend Backend, log *zap.Logger, opts ...Option) *Server {
	s := &Server{backend: backend, log: log, metrics: metrics.New(), sec: newSecurity(), systemBodies: newBodyCache()}
	for _, o := range opts {
		o(s)
	}
	s.cfg.Store(cfg)
	s.basic = newBasicAuth(func() map[string]*config.User { return s.cfg.Load().Users })
	s.router = s.routes()
	return s
}

// ServeHTTP implements http.Handler. It gives the request its requestInfo and chi's routing
// context in one step: each context value set through Request.WithContext costs a copy of the
// whole Request, and chi, finding a routing context already there (as for a sub-router), adds
// none of its own.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rctx := routeContexts.Get().(*chi.Context)
	rctx.Reset()
	rctx.Routes = s.router
	ctx := context.WithValue(context.WithValue(r.Context(), chi.RouteCtxKey, rctx), infoKey, &requestInfo{id: newRequestID(r)})
	s.router.ServeHTTP(w, r.WithContext(ctx))
	routeContexts.Put(rctx)
}

var routeContexts = sync.Pool{New: func() any { return chi.NewRouteContext() }}

// route is one resource: its methods, and whether it is readable without credentials.
type route struct {
	pattern string
	public  bool
	methods map[string]http.HandlerFunc
	// open is a method served without credentials (session login).
	open string
	// refusal explains, in the 405 of any other method, why the resource cannot be changed.
	refusal string
}

func (s *Server) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(s.observe, s.audit, s.recoverer, middleware.StripSlashes, s.protocol, requireJSON, unknownMethods)
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
			http.MethodGet: s.system, http.MethodPatch: s.patchComputerSystem}},
		{pattern: "/redfish/v1/Systems/{id}/Actions/ComputerSystem.Reset", methods: post(s.reset)},
		{pattern: "/redfish/v1/Systems/{id}/VirtualMedia", methods: get(s.mediaCollection)},
		{pattern: "/redfish/v1/Systems/{id}/VirtualMedia/{media}", methods: get(s.media)},
		{pattern: "/redfish/v1/Systems/{id}/VirtualMedia/{media}/InsertMediaActionInfo", methods: get(s.insertMediaInfo)},
		{pattern: "/redfish/v1/Systems/{id}/VirtualMedia/{media}/Actions/VirtualMedia.InsertMedia", methods: post(s.insertMedia)},
		{pattern: "/redfish/v1/Systems/{id}/VirtualMedia/{media}/Actions/VirtualMedia.EjectMedia", methods: post(s.ejectMedia)},
		{pattern: "/redfish/v1/Managers", methods: get(s.managers)},
		{pattern: "/redfish/v1/Managers/{id}", methods: get(s.manager)},
		{pattern: "/redfish/v1/Managers/{id}/VirtualMedia", methods: get(s.mediaCollection)},
		{pattern: "/redfish/v1/Chassis", methods: get(s.chassisCollection)},
		{pattern: "/redfish/v1/Chassis/{id}", methods: get(s.chassis)},
		{pattern: "/redfish/v1/SessionService", methods: get(s.sessionService), refusal: sessionServiceRefusal},
		{pattern: "/redfish/v1/SessionService/Sessions", methods: s.loginMethods(get(s.sessions)), open: http.MethodPost},
		{pattern: "/redfish/v1/SessionService/Sessions/Members", methods: s.loginMethods(nil), open: http.MethodPost},
		{pattern: "/redfish/v1/SessionService/Sessions/{sid}", methods: map[string]http.HandlerFunc{
			http.MethodGet: s.session, http.MethodDelete: s.logout}},
		{pattern: "/redfish/v1/AccountService", methods: get(s.accountService), refusal: accountsRefusal},
		{pattern: "/redfish/v1/AccountService/Accounts", methods: get(s.accounts), refusal: accountsRefusal},
		{pattern: "/redfish/v1/AccountService/Accounts/{account}", methods: get(s.account), refusal: accountsRefusal},
		{pattern: "/redfish/v1/AccountService/Roles", methods: get(s.roles), refusal: accountsRefusal},
		{pattern: "/redfish/v1/AccountService/Roles/{role}", methods: get(s.role), refusal: accountsRefusal},
		{pattern: "/redfish/v1/TaskService", methods: get(s.taskService)},
		{pattern: "/redfish/v1/TaskService/Tasks", methods: get(s.tasks)},
		{pattern: "/redfish/v1/TaskService/Tasks/{id}", methods: get(s.task)},
	}
	table = append(table, s.inventoryRoutes()...)
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
		if !rt.public && (rt.open != r.Method || rt.methods[r.Method] == nil) {
			u := s.authenticate(r)
			if u == nil {
				writeError(w, redfish.NoValidSession())
				return
			}
			setUser(r.Context(), u)
		}
		method := r.Method
		if method == http.MethodHead {
			method = http.MethodGet
			w = headWriter{w}
		}
		h := rt.methods[method]
		if h == nil {
			writeError(w, redfish.OperationNotAllowedBecause(rt.refusal))
			return
		}
		h(w, r)
	})
}

// headWriter drops the body of a HEAD response.
type headWriter struct{ http.ResponseWriter }

func (h headWriter) Write(b []byte) (int, error) { return len(b), nil }

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

// requireJSON answers 415 to a request whose body is declared as anything but JSON: Redfish
// bodies are JSON (DSP0266), and a form-encoded (curl -d) or XML body must not be read as one.
// A request without a body needs no Content-Type (sushy POSTs EjectMedia with neither), and a
// body without a Content-Type is read as JSON.
func requireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		body := r.ContentLength != 0 && (r.Method == http.MethodPost || r.Method == http.MethodPatch || r.Method == http.MethodPut)
		if ct != "" && body && strings.HasPrefix(r.URL.Path, "/redfish") {
			if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
				writeError(w, unsupportedMediaType(ct))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// unknownMethods routes a method chi has no table for (PROPFIND, BREW) as TRACE, which no
// resource serves: the client gets the Redfish 404, or the 405 with Allow, of any other method
// a resource does not have, instead of chi's bare 405 without Allow. Handlers still see the
// request's own method.
func unknownMethods(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
			http.MethodOptions, http.MethodConnect, http.MethodTrace:
		default:
			if rctx := chi.RouteContext(r.Context()); rctx != nil && rctx.RouteMethod == "" {
				rctx.RouteMethod = http.MethodTrace
			}
		}
		next.ServeHTTP(w, r)
	})
}

// unsupportedMediaType is the 415 of a body that is not JSON (Base HeaderInvalid).
func unsupportedMediaType(ct string) *redfish.Error {
	e := redfish.MalformedJSON()
	e.Status = http.StatusUnsupportedMediaType
	m := &e.Messages[0]
	m.MessageID = redfish.BaseRegistry + ".HeaderInvalid"
	m.MessageArgs = []string{"Content-Type: " + truncate(ct, 64)}
	m.Message = "Header '" + m.MessageArgs[0] + "' is invalid. Request bodies are JSON: send Content-Type: application/json."
	m.Severity, m.MessageSeverity = "Critical", "Critical"
	m.Resolution = "Resubmit the request with a valid request header."
	m.RelatedProperties = nil
	return e
}

// Limits bound what one client connection may hold: a slowloris client that trickles its
// headers or body, or never reads the response, is cut off, and an idle keep-alive
// connection is closed.
type Limits struct {
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and headers (431 past it).
	MaxHeaderBytes int
}

// DefaultLimits are the production limits. WriteTimeout leaves room for the longest action
// (writeTimeout) after a body read within ReadTimeout.
var DefaultLimits = Limits{
	ReadHeaderTimeout: 10 * time.Second,
	ReadTimeout:       30 * time.Second,
	WriteTimeout:      60 * time.Second,
	IdleTimeout:       120 * time.Second,
	MaxHeaderBytes:    64 << 10,
}

// HTTPServer returns an http.Server for h on addr under the limits l.
func HTTPServer(addr string, h http.Handler, l Limits) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
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
