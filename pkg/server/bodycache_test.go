package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
)

// cpMachine is a running control-plane machine on node-0 at the given resourceVersions, whose
// neighbours on that node are peers.
func cpMachine(vmRV, vmiRV string, peers ...*virtv1.VirtualMachineInstance) kubevirt.Machine {
	vm, vmi := benchMachine(0)
	vm.ResourceVersion, vmi.ResourceVersion = vmRV, vmiRV
	vmi.Labels = map[string]string{kubevirt.ControlPlaneLabel: kubevirt.ControlPlaneRole}
	vmi.Status.NodeName = "node-0"
	return kubevirt.Machine{VM: vm, VMI: vmi, Peers: func(string) []*virtv1.VirtualMachineInstance { return peers }}
}

// peer is another control-plane VMI of the namespace, on the same node.
func peer(name, rv string) *virtv1.VirtualMachineInstance {
	_, vmi := benchMachine(0)
	vmi.Name, vmi.UID, vmi.ResourceVersion = name, types.UID("uid-"+name), rv
	vmi.Labels = map[string]string{kubevirt.ControlPlaneLabel: kubevirt.ControlPlaneRole}
	return vmi
}

type written struct {
	body []byte
	hdr  http.Header
}

func writeSystem(t *testing.T, c *bodyCache, m kubevirt.Machine) written {
	t.Helper()
	w := httptest.NewRecorder()
	c.writeSystem(w, m)
	require.Equal(t, http.StatusOK, w.Code)
	return written{w.Body.Bytes(), w.Header()}
}

// setSerial changes what the body shows as SerialNumber, without a new resourceVersion (never
// the case in a cluster): this is how the tests tell a cached body from a rendered one.
func setSerial(m kubevirt.Machine, serial string) {
	m.VM.Spec.Template.Spec.Domain.Firmware.Serial = serial
}

func renderedSerial(t *testing.T, b []byte) string {
	t.Helper()
	var cs struct{ SerialNumber string }
	require.NoError(t, json.Unmarshal(b, &cs))
	return cs.SerialNumber
}

func TestBodyCacheServesWhatRenderingWould(t *testing.T) {
	c := newBodyCache()
	m := cpMachine("10", "20")
	first := writeSystem(t, c, m)
	assert.JSONEq(t, string(mustMarshal(systemResource(m))), string(first.body))
	assert.Equal(t, etagOf(first.body), first.hdr.Get("ETag"))
	assert.Equal(t, linkOf(first.body), first.hdr.Get("Link"))
	assert.NotEmpty(t, first.hdr.Get("Link"))

	setSerial(m, "unseen")
	assert.Equal(t, first, writeSystem(t, c, m), "unchanged versions: the cached body")

	m.VM.ResourceVersion = "11"
	assert.Equal(t, "unseen", renderedSerial(t, writeSystem(t, c, m).body), "a new VM version renders anew")
	setSerial(m, "again")
	m.VMI.ResourceVersion = "21"
	assert.Equal(t, "again", renderedSerial(t, writeSystem(t, c, m).body), "a new VMI version renders anew")
	setSerial(m, "vmi-gone")
	m.VMI = nil
	assert.Equal(t, "vmi-gone", renderedSerial(t, writeSystem(t, c, m).body), "the VMI's going renders anew")
}

func TestBodyCacheFollowsTheNeighbours(t *testing.T) {
	c := newBodyCache()
	a, b := peer("cp-a", "5"), peer("cp-b", "6")
	// Each step changes the serial number unseen, and shows whether the body was rendered anew.
	step := func(serial string, peers ...*virtv1.VirtualMachineInstance) written {
		m := cpMachine("1", "1", peers...)
		setSerial(m, serial)
		return writeSystem(t, c, m)
	}
	alone := step("alone")
	assert.NotContains(t, string(alone.body), "Placement violation")

	shared := step("shared", a, b)
	assert.Equal(t, "shared", renderedSerial(t, shared.body), "neighbours arriving render anew")
	assert.Contains(t, string(shared.body), "Placement violation")
	assert.NotEqual(t, alone.hdr.Get("ETag"), shared.hdr.Get("ETag"))
	assert.Equal(t, shared, step("reordered", b, a), "the neighbours' order does not matter")

	b.Labels, b.ResourceVersion = nil, "7"
	relabelled := step("relabelled", a, b)
	assert.Equal(t, "relabelled", renderedSerial(t, relabelled.body), "a neighbour's new version renders anew")
	assert.NotContains(t, string(relabelled.body), "cp-b")
	assert.Equal(t, "left", renderedSerial(t, step("left", a).body), "a neighbour leaving renders anew")
	assert.Equal(t, "gone", renderedSerial(t, step("gone").body), "the last neighbour leaving renders anew")
}

func TestBodyCacheNeedsResourceVersions(t *testing.T) {
	c := newBodyCache()
	for _, m := range []kubevirt.Machine{cpMachine("", "2"), cpMachine("1", ""), cpMachine("1", "2", peer("cp-a", ""))} {
		writeSystem(t, c, m)
		setSerial(m, "changed")
		assert.Equal(t, "changed", renderedSerial(t, writeSystem(t, c, m).body), "without a version, every GET renders")
	}
}
