package server

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"k8s.io/apimachinery/pkg/api/resource"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/config"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// mediaID is the one virtual drive of every system.
const mediaID = "Cd"

func mediaCollURI(id string) string    { return systemURI(id) + "/VirtualMedia" }
func mediaURI(id string) string        { return mediaCollURI(id) + "/" + mediaID }
func insertInfoURI(id string) string   { return mediaURI(id) + "/InsertMediaActionInfo" }
func taskURI(taskID string) string     { return redfish.TasksURI + "/" + taskID }
func mediaTaskID(ns, dv string) string { return ns + "." + dv }

// virtualMediaResource renders the virtual CD of a machine.
func virtualMediaResource(m kubevirt.Machine) redfish.VirtualMedia {
	id := m.ID()
	md := kubevirt.MediaOf(m)
	vm := redfish.VirtualMedia{
		ODataID:        mediaURI(id),
		ODataType:      redfish.TypeVirtualMedia,
		Id:             mediaID,
		Name:           "Virtual CD",
		MediaTypes:     []string{"CD", "DVD"},
		Inserted:       md.Inserted,
		WriteProtected: true,
		ConnectedVia:   "NotConnected",
		Status:         redfish.Status{State: "Enabled", Health: "OK"},
		Actions: redfish.VirtualMediaActions{
			Insert: redfish.InsertMediaAction{Target: mediaURI(id) + "/Actions/VirtualMedia.InsertMedia",
				ActionInfo: insertInfoURI(id), ProtocolAllowed: []string{"HTTP", "HTTPS"}},
			Eject: redfish.ActionTarget{Target: mediaURI(id) + "/Actions/VirtualMedia.EjectMedia"},
		},
	}
	if md.Inserted {
		proto := "HTTP"
		if strings.HasPrefix(md.Image, "https:") {
			proto = "HTTPS"
		}
		// CDI copies the whole image into a volume before the VM starts: an upload, not a stream.
		method := "Upload"
		vm.Image, vm.ImageName, vm.TransferProtocolType, vm.TransferMethod = &md.Image, &md.ImageName, &proto, &method
		vm.ConnectedVia = "URI"
		if md.PendingRestart {
			vm.Description = "The media is attached at the next power on of the virtual machine."
			vm.Status.State = "StandbyOffline"
		}
	}
	return vm
}

func (s *Server) mediaCollection(w http.ResponseWriter, r *http.Request) {
	m, ok := s.machine(w, r, "VirtualMediaCollection")
	if !ok {
		return
	}
	// The Manager's collection lists the same member as the System's: Ironic 21 looks only
	// under Managers, newer Ironic under the System.
	uri := mediaCollURI(m.ID())
	if strings.HasPrefix(r.URL.Path, redfish.ManagersURI) {
		uri = managerURI(m.ID()) + "/VirtualMedia"
	}
	writeJSON(w, http.StatusOK, redfish.NewCollection(uri, redfish.TypeVirtualMediaColl, "Virtual Media Collection", []string{mediaURI(m.ID())}))
}

func (s *Server) media(w http.ResponseWriter, r *http.Request) {
	m, ok := s.machine(w, r, "VirtualMedia")
	if !ok {
		return
	}
	if chi.URLParam(r, "media") != mediaID {
		writeError(w, redfish.ResourceNotFound("VirtualMedia", chi.URLParam(r, "media")))
		return
	}
	writeJSON(w, http.StatusOK, virtualMediaResource(m))
}

// insertMediaInfo is the ActionInfo of InsertMedia: the parameters decodeInsertMedia accepts.
func (s *Server) insertMediaInfo(w http.ResponseWriter, r *http.Request) {
	m, ok := s.machine(w, r, "ActionInfo")
	if !ok {
		return
	}
	if chi.URLParam(r, "media") != mediaID {
		writeError(w, redfish.ResourceNotFound("VirtualMedia", chi.URLParam(r, "media")))
		return
	}
	writeJSON(w, http.StatusOK, insertMediaActionInfo(m.ID()))
}

func insertMediaActionInfo(id string) redfish.ActionInfo {
	return redfish.ActionInfo{
		ODataID: insertInfoURI(id), ODataType: redfish.TypeActionInfo, Id: "InsertMediaActionInfo",
		Name: "InsertMedia Action Info",
		Parameters: []redfish.ActionParameter{
			{Name: "Image", Required: true, DataType: "String"},
			// The image is always attached (at the next start) and read-only: false is not offered.
			{Name: "Inserted", DataType: "Boolean", AllowableValues: []string{"true"}},
			{Name: "WriteProtected", DataType: "Boolean", AllowableValues: []string{"true"}},
			{Name: "TransferProtocolType", DataType: "String", AllowableValues: []string{"HTTP", "HTTPS"}},
			{Name: "TransferMethod", DataType: "String", AllowableValues: []string{"Stream", "Upload"}},
			{Name: "UserName", DataType: "String"},
			{Name: "Password", DataType: "String"},
		},
	}
}

// mediaAction resolves the machine of a media action, checking the drive id and the role.
func (s *Server) mediaAction(w http.ResponseWriter, r *http.Request) (kubevirt.Machine, bool) {
	m, ok := s.machine(w, r, "VirtualMedia")
	if !ok {
		return m, false
	}
	if chi.URLParam(r, "media") != mediaID {
		writeError(w, redfish.ResourceNotFound("VirtualMedia", chi.URLParam(r, "media")))
		return m, false
	}
	return m, mayWrite(w, r)
}

func (s *Server) insertMedia(w http.ResponseWriter, r *http.Request) {
	m, ok := s.mediaAction(w, r)
	if !ok {
		return
	}
	body, rerr := readBody(w, r)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	req, rerr := decodeInsertMedia(body)
	if rerr == nil {
		rerr = checkImageHost(r.Context(), s.cfg.Load().Media, req.Image)
	}
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), writeTimeout)
	defer cancel()
	st := s.cfg.Load().Media.StorageFor(m.VM.Namespace)
	pin := st.InsecureTLS && strings.HasPrefix(strings.ToLower(req.Image), "https:")
	var probe imageProbe
	if st.Size == nil || pin {
		probe = probeImage(ctx, req, pin)
	}
	if pin {
		if len(probe.certs) == 0 {
			writeError(w, imageRefused(req.Image, "media.insecureTLS trusts the certificate the image server presents, and none could be read: "+noCertificateReason(probe.err)))
			return
		}
		req.PresentedCerts = probe.certs
	}
	req.Storage = storageFor(st, probe.length)
	err := s.backend.InsertMedia(ctx, m.VM.Namespace, m.VM.Name, req)
	s.countAction("InsertMedia", err)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	noContent(w)
}

func (s *Server) ejectMedia(w http.ResponseWriter, r *http.Request) {
	m, ok := s.mediaAction(w, r)
	if !ok {
		return
	}
	// sushy posts EjectMedia with no body at all; a body, when sent, must be an empty object.
	body, rerr := readBody(w, r)
	if rerr == nil && len(strings.TrimSpace(string(body))) > 0 {
		var obj map[string]any
		if obj, rerr = decodeObject(body); rerr == nil {
			for k := range obj {
				rerr = redfish.ActionParameterUnknown(ejectAction, k)
				break
			}
		}
	}
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), writeTimeout)
	defer cancel()
	err := s.backend.EjectMedia(ctx, m.VM.Namespace, m.VM.Name)
	s.countAction("EjectMedia", err)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	noContent(w)
}

func noContent(w http.ResponseWriter) {
	setCommonHeaders(w.Header())
	w.WriteHeader(http.StatusNoContent)
}

// checkImageHost refuses image URLs outside media.allowedHosts, so InsertMedia cannot be used
// to make the cluster fetch from internal services.
func checkImageHost(ctx context.Context, mc config.Media, image string) *redfish.Error {
	if len(mc.AllowedHosts) == 0 && len(mc.AllowedNets) == 0 {
		return nil
	}
	u, _ := url.Parse(image)
	host := strings.ToLower(u.Hostname())
	for _, h := range mc.AllowedHosts {
		if host == h || (strings.HasPrefix(h, "*.") && strings.HasSuffix(host, h[1:])) {
			return nil
		}
	}
	if len(mc.AllowedNets) > 0 {
		ips := []net.IP{net.ParseIP(host)}
		if ips[0] == nil {
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			addrs, err := net.DefaultResolver.LookupIPAddr(rctx, host)
			if err != nil || len(addrs) == 0 {
				return imageRefused(image, "its host does not resolve")
			}
			ips = ips[:0]
			for _, a := range addrs {
				ips = append(ips, a.IP)
			}
		}
		if allIn(ips, mc.AllowedNets) {
			return nil
		}
	}
	return imageRefused(image, "its host is not in media.allowedHosts")
}

func allIn(ips []net.IP, nets []*net.IPNet) bool {
	for _, ip := range ips {
		in := false
		for _, n := range nets {
			in = in || n.Contains(ip)
		}
		if !in {
			return false
		}
	}
	return true
}

func imageRefused(image, why string) *redfish.Error {
	e := redfish.ActionParameterValueNotInList(image, "Image", insertAction)
	e.Messages[0].Message += " The image URL is refused: " + why + "."
	return e
}

// defaultImageSize is used when the image server does not tell the size.
var defaultImageSize = resource.MustParse("10Gi")

// storageFor picks the import volume's storage: the configured size, else the image's
// Content-Length (from a HEAD request) rounded up to MiB. CDI adds its filesystem overhead to
// the PVC request itself (spec.storage), so the usable size is what we ask for.
func storageFor(st config.Storage, contentLength int64) kubevirt.Storage {
	out := kubevirt.Storage{StorageClass: st.StorageClass, AccessModes: st.AccessModes, VolumeMode: st.VolumeMode, CertConfigMap: st.CAConfigMap, Size: defaultImageSize}
	switch {
	case st.Size != nil:
		out.Size = *st.Size
	case contentLength > 0:
		mib := (contentLength + 1<<20 - 1) >> 20
		out.Size = *resource.NewQuantity(mib<<20, resource.BinarySI)
	}
	return out
}

// imageProbe is what a HEAD request to the image server told.
type imageProbe struct {
	length int64  // Content-Length of a 200, else 0
	certs  []byte // PEM of the certificates an HTTPS server presented, when asked for
	err    error
}

// probeImage sends the image server a HEAD request. With presented, it does not verify the
// server's certificate but returns it (media insecureTLS), whatever the response's status.
func probeImage(ctx context.Context, req kubevirt.MediaRequest, presented bool) imageProbe {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodHead, req.Image, nil)
	if err != nil {
		return imageProbe{err: err}
	}
	if req.UserName != "" {
		hr.SetBasicAuth(req.UserName, req.Password)
	}
	client := http.DefaultClient
	if presented {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		// Unverified on purpose: the certificate is read to become the one CDI trusts.
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
		defer tr.CloseIdleConnections()
		client = &http.Client{Transport: tr}
	}
	resp, err := client.Do(hr)
	if err != nil {
		return imageProbe{err: err}
	}
	resp.Body.Close()
	var p imageProbe
	if resp.StatusCode == http.StatusOK {
		p.length = resp.ContentLength
	}
	if presented && resp.TLS != nil {
		for _, c := range resp.TLS.PeerCertificates {
			p.certs = append(p.certs, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
		}
	}
	return p
}

// noCertificateReason says why a probe returned no certificate: its error, else plain HTTP.
func noCertificateReason(err error) string {
	if err == nil {
		return "the server did not use TLS"
	}
	return err.Error()
}

func (s *Server) taskService(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, redfish.TaskService{
		ODataID: redfish.TaskServiceURI, ODataType: redfish.TypeTaskService, Id: "TaskService", Name: "Task Service",
		ServiceEnabled: true, CompletedTaskOverWritePolicy: "Manual",
		Status: redfish.Status{State: "Enabled", Health: "OK"},
		Tasks:  redfish.Link{ODataID: redfish.TasksURI},
	})
}

// visibleTasks lists the media imports of systems the caller may see.
func (s *Server) visibleTasks(r *http.Request) []*cdiv1.DataVolume {
	u := userOf(r.Context())
	var out []*cdiv1.DataVolume
	for _, dv := range s.backend.MediaDataVolumes() {
		if m, ok := s.backend.Get(dv.Namespace, dv.Labels[kubevirt.VMLabel]); ok && u.MaySee(dv.Namespace, m.VM.Name, m.VM.Labels) {
			out = append(out, dv)
		}
	}
	return out
}

func (s *Server) tasks(w http.ResponseWriter, r *http.Request) {
	dvs := s.visibleTasks(r)
	uris := make([]string, len(dvs))
	for i, dv := range dvs {
		uris[i] = taskURI(mediaTaskID(dv.Namespace, dv.Name))
	}
	writeJSON(w, http.StatusOK, redfish.NewCollection(redfish.TasksURI, redfish.TypeTaskColl, "Task Collection", uris))
}

func (s *Server) task(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	for _, dv := range s.visibleTasks(r) {
		if mediaTaskID(dv.Namespace, dv.Name) == id {
			cache, _ := s.backend.DataVolume(dv.Namespace, kubevirt.CacheDataVolumeName(dv.Annotations[kubevirt.ImageAnnotation]))
			writeJSON(w, http.StatusOK, taskResource(id, dv, cache))
			return
		}
	}
	writeError(w, redfish.ResourceNotFound("Task", id))
}

func taskResource(id string, media, cache *cdiv1.DataVolume) redfish.Task {
	imp := kubevirt.ImportOf(media, cache)
	t := redfish.Task{
		ODataID: taskURI(id), ODataType: redfish.TypeTask, Id: id,
		Name:            "Import of " + media.Annotations[kubevirt.ImageAnnotation] + " for " + media.Labels[kubevirt.VMLabel],
		TaskState:       string(imp.State),
		TaskStatus:      "OK",
		PercentComplete: imp.Percent,
		Messages:        []redfish.Message{redfish.TaskMessage(string(imp.State), id, imp.Message)},
	}
	if imp.State == kubevirt.ImportException {
		t.TaskStatus = "Critical"
	}
	if !imp.Started.IsZero() {
		t.StartTime = imp.Started.UTC().Format(time.RFC3339)
	}
	if !imp.Ended.IsZero() {
		t.EndTime = imp.Ended.UTC().Format(time.RFC3339)
	}
	return t
}
