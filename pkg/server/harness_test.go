package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"golang.org/x/crypto/bcrypt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/config"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim"
)

// Test accounts: admin sees everything, alice (Operator) only tenant-a, viewer (ReadOnly)
// everything.
var passwords = map[string]string{"admin": "admin-pw", "alice": "alice-pw", "viewer": "viewer-pw"}

const (
	isoVM   = "tenant-a.iso-0" // extra VM with a CD-ROM, added to the demo cluster
	cpA0    = "tenant-a.cp-0"
	cpB0    = "tenant-b.cp-0"
	pollFor = 10 * time.Second
)

func testConfig(t testing.TB) *config.Config {
	t.Helper()
	hash := func(p string) string {
		h, err := bcrypt.GenerateFromPassword([]byte(p), bcrypt.MinCost)
		require.NoError(t, err)
		return string(h)
	}
	f := config.File{
		Allowlist: []config.EntryFile{{Namespace: "tenant-a"}, {Namespace: "tenant-b"}},
		Users: []config.UserFile{
			{Username: "admin", Role: config.RoleAdministrator, PasswordHash: hash(passwords["admin"]), Allow: []string{"*"}},
			{Username: "alice", Role: config.RoleOperator, PasswordHash: hash(passwords["alice"]), Allow: []string{"tenant-a"}},
			{Username: "viewer", Role: config.RoleReadOnly, PasswordHash: hash(passwords["viewer"]), Allow: []string{"*"}},
		},
	}
	cfg, err := f.Compile()
	require.NoError(t, err)
	return cfg
}

// isoMachine is a control-plane VM with a root disk booting first and an installer CD-ROM.
func isoMachine() *virtv1.VirtualMachine {
	vm := sim.ControlPlaneVM("tenant-a", "iso-0", 5)
	d := &vm.Spec.Template.Spec.Domain.Devices
	one := uint(1)
	d.Disks[0].BootOrder = &one
	d.Disks = append(d.Disks, virtv1.Disk{Name: "installer", DiskDevice: virtv1.DiskDevice{CDRom: &virtv1.CDRomTarget{Bus: virtv1.DiskBusSATA}}})
	vm.Spec.Template.Spec.Volumes = append(vm.Spec.Template.Spec.Volumes, virtv1.Volume{Name: "installer",
		VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "quay.io/example/installer:latest"}}})
	return vm
}

type harness struct {
	t      *testing.T
	dyn    dynamic.Interface
	client *kubevirt.Client
	sim    *sim.Simulator // nil when the harness runs without simulator
	server *Server
	http   *httptest.Server
}

// newHarness serves the demo cluster (plus isoVM) through a real kubevirt.Client; withSim
// starts the virt-controller simulator with short delays.
func newHarness(t *testing.T, withSim bool) *harness {
	t.Helper()
	dyn, err := sim.NewDemoCluster()
	require.NoError(t, err)
	u, err := sim.ToUnstructured(isoMachine())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	_, err = dyn.Resource(kubevirt.VMResource).Namespace("tenant-a").Create(ctx, u, metav1.CreateOptions{})
	require.NoError(t, err)

	cfg := testConfig(t)
	h := &harness{t: t, dyn: dyn}
	if withSim {
		h.sim = sim.New(dyn, sim.Options{BootDelay: 50 * time.Millisecond, ShutdownDelay: 50 * time.Millisecond})
		require.NoError(t, h.sim.Run(ctx))
	}
	h.client = kubevirt.NewClient(dyn, cfg.Namespaces(), zap.NewNop())
	require.NoError(t, h.client.Start(ctx))
	go h.client.RunBackground(ctx)
	h.server = New(cfg, h.client, zap.NewNop())
	h.http = httptest.NewServer(h.server)
	t.Cleanup(h.http.Close)
	return h
}

// do sends a request; user "" sends no credentials.
func (h *harness) do(method, path, user string, body string, hdr map[string]string) (*http.Response, []byte) {
	h.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, h.http.URL+path, rd)
	require.NoError(h.t, err)
	if user != "" {
		pw, ok := passwords[user]
		if !ok {
			pw = "whatever"
		}
		req.SetBasicAuth(user, pw)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := h.http.Client().Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	return resp, b
}

func (h *harness) getJSON(path, user string) map[string]any {
	h.t.Helper()
	resp, body := h.do(http.MethodGet, path, user, "", nil)
	require.Equal(h.t, http.StatusOK, resp.StatusCode, "GET %s: %s", path, body)
	var m map[string]any
	require.NoError(h.t, json.Unmarshal(body, &m), "GET %s", path)
	return m
}

func (h *harness) system(id string) redfish.ComputerSystem {
	h.t.Helper()
	resp, body := h.do(http.MethodGet, "/redfish/v1/Systems/"+id, "admin", "", nil)
	require.Equal(h.t, http.StatusOK, resp.StatusCode, "%s", body)
	var cs redfish.ComputerSystem
	require.NoError(h.t, json.Unmarshal(body, &cs))
	return cs
}

func (h *harness) reset(id string, rt redfish.ResetType) {
	h.t.Helper()
	resp, body := h.do(http.MethodPost, "/redfish/v1/Systems/"+id+"/Actions/ComputerSystem.Reset", "admin",
		`{"ResetType":"`+string(rt)+`"}`, nil)
	require.Equal(h.t, http.StatusNoContent, resp.StatusCode, "%s: %s", rt, body)
	require.Empty(h.t, body)
}

func (h *harness) patchBoot(id, boot string) redfish.ComputerSystem {
	h.t.Helper()
	resp, body := h.do(http.MethodPatch, "/redfish/v1/Systems/"+id, "admin", `{"Boot":`+boot+`}`, nil)
	require.Equal(h.t, http.StatusOK, resp.StatusCode, "%s", body)
	var cs redfish.ComputerSystem
	require.NoError(h.t, json.Unmarshal(body, &cs))
	return cs
}

// powerStates polls a system until until() is true or the deadline passes, returning every
// distinct state seen in order.
func (h *harness) powerStates(id string, until func(redfish.ComputerSystem) bool) ([]redfish.PowerState, redfish.ComputerSystem) {
	h.t.Helper()
	var seen []redfish.PowerState
	deadline := time.Now().Add(pollFor)
	for {
		cs := h.system(id)
		if len(seen) == 0 || seen[len(seen)-1] != cs.PowerState {
			seen = append(seen, cs.PowerState)
		}
		if until(cs) {
			return seen, cs
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: condition not reached within %v; states seen %v, last %+v", id, pollFor, seen, cs)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// vm reads a VM straight from the cluster.
func (h *harness) vm(ns, name string) *virtv1.VirtualMachine {
	h.t.Helper()
	u, err := h.dyn.Resource(kubevirt.VMResource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(h.t, err)
	b, err := u.MarshalJSON()
	require.NoError(h.t, err)
	var vm virtv1.VirtualMachine
	require.NoError(h.t, json.Unmarshal(b, &vm))
	return &vm
}

// vmi reads a VMI straight from the cluster (nil when none exists).
func (h *harness) vmi(ns, name string) *virtv1.VirtualMachineInstance {
	h.t.Helper()
	u, err := h.dyn.Resource(kubevirt.VMIResource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	b, err := u.MarshalJSON()
	require.NoError(h.t, err)
	var vmi virtv1.VirtualMachineInstance
	require.NoError(h.t, json.Unmarshal(b, &vmi))
	return &vmi
}

// envelope decodes a Redfish error body.
func envelope(t *testing.T, body []byte) redfish.Envelope {
	t.Helper()
	var env redfish.Envelope
	require.NoError(t, json.Unmarshal(body, &env), "%s", body)
	require.NotEmpty(t, env.Error.Code, "%s", body)
	require.NotEmpty(t, env.Error.ExtendedInfo, "%s", body)
	return env
}
