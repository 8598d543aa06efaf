package server

import (
	"context"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"go.uber.org/zap"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/metrics"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// serviceNamespace seeds the service root UUID, which must be the same on every replica.
var serviceNamespace = uuid.MustParse("0c4f5b4e-8a53-4b1c-9d7e-2f64f0a1d3c7")

func (s *Server) versions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"v1": "/redfish/v1/"})
}

func (s *Server) serviceRoot(w http.ResponseWriter, r *http.Request) {
	ns := strings.Join(s.cfg.Load().Namespaces(), ",")
	writeJSON(w, http.StatusOK, redfish.ServiceRoot{
		ODataID:        redfish.RootURI,
		ODataType:      redfish.TypeServiceRoot,
		Id:             "RootService",
		Name:           "kubevirt-redfish",
		RedfishVersion: "1.17.0",
		UUID:           uuid.NewSHA1(serviceNamespace, []byte(ns)).String(),
		Vendor:         manufacturer,
		Product:        "kubevirt-redfish",
		Systems:        redfish.Link{ODataID: redfish.SystemsURI},
		Managers:       redfish.Link{ODataID: redfish.ManagersURI},
		Chassis:        redfish.Link{ODataID: redfish.ChassisURI},
		SessionService: redfish.Link{ODataID: redfish.SessionServiceURI},
		AccountService: redfish.Link{ODataID: redfish.AccountServiceURI},
		Tasks:          redfish.Link{ODataID: redfish.TaskServiceURI},
		Links:          redfish.ServiceRootLinks{Sessions: redfish.Link{ODataID: redfish.SessionsURI}},

		ProtocolFeatures: redfish.SupportedProtocolFeatures, // see protocol.go
	})
}

// visible lists the machines the caller may see.
func (s *Server) visible(r *http.Request) []kubevirt.Machine {
	u := userOf(r.Context())
	return s.backend.List(func(vm *virtv1.VirtualMachine) bool { return u.MaySee(vm.Namespace, vm.Name, vm.Labels) })
}

// machine resolves {id} to a machine the caller may see. Unknown and forbidden systems get the
// same 404, so ids outside the caller's allowlist cannot be probed.
func (s *Server) machine(w http.ResponseWriter, r *http.Request, typ string) (kubevirt.Machine, bool) {
	id := chi.URLParam(r, "id")
	if ns, name, ok := kubevirt.ParseSystemID(id); ok {
		m, found := s.backend.Get(ns, name)
		if found && userOf(r.Context()).MaySee(ns, name, m.VM.Labels) {
			return m, true
		}
	}
	writeError(w, redfish.ResourceNotFound(typ, id))
	return kubevirt.Machine{}, false
}

func (s *Server) collection(w http.ResponseWriter, r *http.Request, uri, typ, name string, member func(string) string) {
	ms := s.visible(r)
	uris := make([]string, len(ms))
	for i, m := range ms {
		uris[i] = member(m.ID())
	}
	writeJSONFor(w, r, http.StatusOK, redfish.NewCollection(uri, typ, name, uris))
}

func (s *Server) systems(w http.ResponseWriter, r *http.Request) {
	s.collection(w, r, redfish.SystemsURI, redfish.TypeSystemColl, "Computer System Collection", systemURI)
}

func (s *Server) managers(w http.ResponseWriter, r *http.Request) {
	s.collection(w, r, redfish.ManagersURI, redfish.TypeManagerColl, "Manager Collection", managerURI)
}

func (s *Server) chassisCollection(w http.ResponseWriter, r *http.Request) {
	ms := s.visible(r)
	uris := make([]string, 0, len(ms))
	for _, m := range ms {
		uris = append(uris, chassisURI(m.ID()))
	}
	for _, node := range hostingNodes(ms) {
		uris = append(uris, chassisURI(nodeChassisID(node)))
	}
	writeJSON(w, http.StatusOK, redfish.NewCollection(redfish.ChassisURI, redfish.TypeChassisColl, "Chassis Collection", uris))
}

func (s *Server) system(w http.ResponseWriter, r *http.Request) {
	if m, ok := s.machine(w, r, "ComputerSystem"); ok {
		s.systemBodies.writeSystem(w, m)
	}
}

func (s *Server) manager(w http.ResponseWriter, r *http.Request) {
	if m, ok := s.machine(w, r, "Manager"); ok {
		writeJSON(w, http.StatusOK, managerResource(m))
	}
}

func (s *Server) chassis(w http.ResponseWriter, r *http.Request) {
	if node, ok := nodeOfChassisID(chi.URLParam(r, "id")); ok {
		s.nodeChassis(w, r, node)
		return
	}
	if m, ok := s.machine(w, r, "Chassis"); ok {
		writeJSON(w, http.StatusOK, chassisResource(m))
	}
}

// mayWrite answers 403 for roles that may only read.
func mayWrite(w http.ResponseWriter, r *http.Request) bool {
	if !userOf(r.Context()).MayWrite() {
		writeError(w, redfish.InsufficientPrivilege())
		return false
	}
	return true
}

// ifMatch honours If-Match against the current representation's strong ETag.
func ifMatch(r *http.Request, current any) bool {
	want := r.Header.Get("If-Match")
	if want == "" {
		return true
	}
	tag := etagOf(mustMarshal(current))
	for _, t := range strings.Split(want, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || t == tag {
			return true
		}
	}
	return false
}

// patchable resolves a PATCH before its body is decoded: the machine the caller may see, a
// role that may write, If-Match against the current representation, and the bounded body. On
// any failure it has answered the request and ok is false.
func (s *Server) patchable(w http.ResponseWriter, r *http.Request, typ string, current func(kubevirt.Machine) any) (m kubevirt.Machine, body []byte, ok bool) {
	m, ok = s.machine(w, r, typ)
	if !ok || !mayWrite(w, r) {
		return m, nil, false
	}
	if !ifMatch(r, current(m)) {
		writeError(w, redfish.PreconditionFailed())
		return m, nil, false
	}
	body, rerr := readBody(w, r)
	if rerr != nil {
		writeError(w, rerr)
		return m, nil, false
	}
	return m, body, true
}

func (s *Server) reset(w http.ResponseWriter, r *http.Request) {
	m, ok := s.machine(w, r, "ComputerSystem")
	if !ok || !mayWrite(w, r) {
		return
	}
	body, rerr := readBody(w, r)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	rt, rerr := decodeReset(body)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), writeTimeout)
	defer cancel()
	err := s.backend.Reset(ctx, m.VM.Namespace, m.VM.Name, rt)
	s.countAction("Reset."+string(rt), err)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	noContent(w)
}

// countAction records an action's outcome; the action names are a fixed set.
func (s *Server) countAction(action string, err error) {
	status := http.StatusOK
	if err != nil {
		status = backendError(err).Status
	}
	s.metrics.Actions.WithLabelValues(action, metrics.Result(status)).Inc()
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := backendError(err)
	if e.Status == http.StatusServiceUnavailable {
		// The cluster is unreachable (an apiserver outage or upgrade): one line per request,
		// without the stack trace of an error log.
		s.log.Warn("request failed: the Kubernetes API server cannot be reached", zap.String("method", r.Method),
			zap.String("path", r.URL.Path), zap.Error(err))
	} else {
		logError(s.log, r, e, err)
	}
	writeError(w, e)
}
