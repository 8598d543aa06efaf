package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// These tests drive the server against the virt-controller simulator (BootDelay and
// ShutdownDelay 50ms) and poll with a deadline; they never sleep a fixed time to wait for a
// state.

func isOn(cs redfish.ComputerSystem) bool  { return cs.PowerState == redfish.PowerOn }
func isOff(cs redfish.ComputerSystem) bool { return cs.PowerState == redfish.PowerOff }

// subsequence reports whether seen only moves forward through allowed (each state may repeat
// but never come back after a later one).
func monotonic(seen []redfish.PowerState, allowed ...redfish.PowerState) bool {
	pos := 0
	for _, s := range seen {
		for pos < len(allowed) && allowed[pos] != s {
			pos++
		}
		if pos == len(allowed) {
			return false
		}
	}
	return true
}

func bootOrders(vm *virtv1.VirtualMachine) map[string]*uint {
	out := map[string]*uint{}
	for _, d := range vm.Spec.Template.Spec.Domain.Devices.Disks {
		out["disk/"+d.Name] = d.BootOrder
	}
	for _, i := range vm.Spec.Template.Spec.Domain.Devices.Interfaces {
		out["iface/"+i.Name] = i.BootOrder
	}
	return out
}

func vmiOrders(vmi *virtv1.VirtualMachineInstance) map[string]*uint {
	out := map[string]*uint{}
	for _, d := range vmi.Spec.Domain.Devices.Disks {
		out["disk/"+d.Name] = d.BootOrder
	}
	for _, i := range vmi.Spec.Domain.Devices.Interfaces {
		out["iface/"+i.Name] = i.BootOrder
	}
	return out
}

func u(v uint) *uint { return &v }

// powerOn turns a system on and waits for On.
func (h *harness) powerOn(id string) redfish.ComputerSystem {
	h.t.Helper()
	h.reset(id, redfish.ResetOn)
	seen, cs := h.powerStates(id, isOn)
	assert.True(h.t, monotonic(seen, redfish.PowerOff, redfish.PowerPoweringOn, redfish.PowerOn), "power-on went %v", seen)
	return cs
}

func TestBootCdOnceThenPowerOn(t *testing.T) {
	h := newHarness(t, true)
	const ns, name = "tenant-a", "iso-0"
	original := bootOrders(h.vm(ns, name))
	require.Equal(t, map[string]*uint{"disk/rootdisk": u(1), "disk/installer": nil, "iface/default": nil}, original)
	require.Equal(t, redfish.PowerOff, h.system(isoVM).PowerState)

	cs := h.patchBoot(isoVM, `{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Once"}`)
	assert.Equal(t, redfish.BootCd, cs.Boot.BootSourceOverrideTarget)
	assert.Equal(t, redfish.BootOnce, cs.Boot.BootSourceOverrideEnabled)
	assert.Equal(t, map[string]*uint{"disk/installer": u(1), "disk/rootdisk": u(2), "iface/default": u(3)}, bootOrders(h.vm(ns, name)))

	h.reset(isoVM, redfish.ResetOn)
	seen, cs := h.powerStates(isoVM, func(cs redfish.ComputerSystem) bool {
		return isOn(cs) && cs.Boot.BootSourceOverrideTarget == redfish.BootNone
	})
	assert.True(t, monotonic(seen, redfish.PowerOff, redfish.PowerPoweringOn, redfish.PowerOn), "states %v", seen)
	assert.Equal(t, redfish.BootDisabled, cs.Boot.BootSourceOverrideEnabled, "the Once override is consumed")
	assert.Equal(t, "Enabled", cs.Status.State)

	// The VMI booted with the CD first; the VM template is back to its original orders.
	vmi := h.vmi(ns, name)
	require.NotNil(t, vmi)
	assert.Equal(t, map[string]*uint{"disk/installer": u(1), "disk/rootdisk": u(2), "iface/default": u(3)}, vmiOrders(vmi))
	assert.Equal(t, original, bootOrders(h.vm(ns, name)))
	assert.Equal(t, virtv1.RunStrategyOnce, *h.vm(ns, name).Spec.RunStrategy)
}

func TestBootOnceOverContinuousHddOverHTTP(t *testing.T) {
	h := newHarness(t, true)
	cs := h.patchBoot(isoVM, `{"BootSourceOverrideTarget":"Hdd","BootSourceOverrideEnabled":"Continuous"}`)
	require.Equal(t, redfish.BootContinuous, cs.Boot.BootSourceOverrideEnabled)
	hddOrders := bootOrders(h.vm("tenant-a", "iso-0"))
	assert.Equal(t, map[string]*uint{"disk/rootdisk": u(1), "disk/installer": u(2), "iface/default": u(3)}, hddOrders)

	// Target only: Enabled stays Continuous.
	cs = h.patchBoot(isoVM, `{"BootSourceOverrideTarget":"Cd"}`)
	assert.Equal(t, redfish.BootCd, cs.Boot.BootSourceOverrideTarget)
	assert.Equal(t, redfish.BootContinuous, cs.Boot.BootSourceOverrideEnabled)
	cs = h.patchBoot(isoVM, `{"BootSourceOverrideTarget":"Hdd"}`)
	require.Equal(t, redfish.BootHdd, cs.Boot.BootSourceOverrideTarget)

	cs = h.patchBoot(isoVM, `{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Once"}`)
	require.Equal(t, redfish.BootOnce, cs.Boot.BootSourceOverrideEnabled)
	h.reset(isoVM, redfish.ResetOn)
	_, cs = h.powerStates(isoVM, func(cs redfish.ComputerSystem) bool {
		return isOn(cs) && cs.Boot.BootSourceOverrideEnabled != redfish.BootOnce
	})
	assert.Equal(t, redfish.BootHdd, cs.Boot.BootSourceOverrideTarget, "back to the Continuous override")
	assert.Equal(t, redfish.BootContinuous, cs.Boot.BootSourceOverrideEnabled)
	assert.Equal(t, hddOrders, bootOrders(h.vm("tenant-a", "iso-0")))
}

func TestOnceSetWhileRunningIsConsumedByTheRestart(t *testing.T) {
	h := newHarness(t, true)
	h.powerOn(isoVM)
	first := h.vmi("tenant-a", "iso-0")
	require.NotNil(t, first)

	cs := h.patchBoot(isoVM, `{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Once"}`)
	require.Equal(t, redfish.BootOnce, cs.Boot.BootSourceOverrideEnabled)
	// The running VMI did not boot with it: the override stays armed. Give the worker every
	// chance to (wrongly) consume it by causing VMI events, then check.
	require.NoError(t, h.sim.GuestReboot(context.Background(), "tenant-a", "iso-0"))
	require.Eventually(t, func() bool {
		vmi := h.vmi("tenant-a", "iso-0")
		return vmi != nil && vmi.Annotations["sim.kubevirt-redfish.io/reboots"] == "1"
	}, pollFor, 5*time.Millisecond)
	assert.Equal(t, redfish.BootOnce, h.system(isoVM).Boot.BootSourceOverrideEnabled, "the same VMI does not consume the override")

	h.reset(isoVM, redfish.ResetForceRestart)
	_, cs = h.powerStates(isoVM, func(cs redfish.ComputerSystem) bool {
		return isOn(cs) && cs.Boot.BootSourceOverrideTarget == redfish.BootNone
	})
	second := h.vmi("tenant-a", "iso-0")
	require.NotNil(t, second)
	assert.NotEqual(t, first.UID, second.UID, "a restart makes a new VMI")
	assert.Equal(t, u(1), vmiOrders(second)["disk/installer"], "the new VMI boots from the CD")
	assert.Equal(t, redfish.BootDisabled, cs.Boot.BootSourceOverrideEnabled)
}

func TestGracefulShutdown(t *testing.T) {
	h := newHarness(t, true)
	h.powerOn(cpA0)
	h.reset(cpA0, redfish.ResetGracefulShutdown)
	seen, cs := h.powerStates(cpA0, isOff)
	assert.Contains(t, seen, redfish.PowerPoweringOff, "a graceful shutdown shows PoweringOff first: %v", seen)
	assert.True(t, monotonic(seen, redfish.PowerOn, redfish.PowerPoweringOff, redfish.PowerOff), "states %v", seen)
	assert.Equal(t, "StandbyOffline", cs.Status.State)
	assert.Equal(t, virtv1.RunStrategyHalted, *h.vm("tenant-a", "cp-0").Spec.RunStrategy)
	require.Eventually(t, func() bool { return h.vmi("tenant-a", "cp-0") == nil }, pollFor, 5*time.Millisecond)
}

func TestForceOff(t *testing.T) {
	h := newHarness(t, true)
	h.powerOn(cpA0)
	h.reset(cpA0, redfish.ResetForceOff)
	seen, _ := h.powerStates(cpA0, isOff)
	assert.True(t, monotonic(seen, redfish.PowerOn, redfish.PowerPoweringOff, redfish.PowerOff), "states %v", seen)
	assert.Nil(t, h.vmi("tenant-a", "cp-0"), "ForceOff deletes the VMI")
	assert.Equal(t, virtv1.RunStrategyHalted, *h.vm("tenant-a", "cp-0").Spec.RunStrategy)

	// ForceOff again when Off: 204, nothing to do.
	before := h.vm("tenant-a", "cp-0")
	h.reset(cpA0, redfish.ResetForceOff)
	assert.Equal(t, before.Spec, h.vm("tenant-a", "cp-0").Spec)
}

// Ironic's reboot: ForceOff, wait for Off, On.
func TestIronicReboot(t *testing.T) {
	h := newHarness(t, true)
	h.powerOn(cpA0)
	first := h.vmi("tenant-a", "cp-0").UID
	h.reset(cpA0, redfish.ResetForceOff)
	h.powerStates(cpA0, isOff)
	h.powerOn(cpA0)
	require.Eventually(t, func() bool {
		vmi := h.vmi("tenant-a", "cp-0")
		return vmi != nil && vmi.UID != first
	}, pollFor, 5*time.Millisecond)
}

func TestRepeatedOnIsNoop(t *testing.T) {
	h := newHarness(t, true)
	h.powerOn(cpA0)
	vmBefore := h.vm("tenant-a", "cp-0")
	vmiBefore := h.vmi("tenant-a", "cp-0")
	require.NotNil(t, vmiBefore)

	resp, body := h.do(http.MethodPost, "/redfish/v1/Systems/"+cpA0+"/Actions/ComputerSystem.Reset", "admin", `{"ResetType":"On"}`, nil)
	require.Equal(t, http.StatusNoContent, resp.StatusCode, "%s", body)
	assert.Empty(t, body)

	assert.Equal(t, redfish.PowerOn, h.system(cpA0).PowerState)
	vmAfter := h.vm("tenant-a", "cp-0")
	assert.Equal(t, vmBefore.Spec, vmAfter.Spec, "On when On changes nothing")
	assert.Equal(t, vmBefore.Annotations, vmAfter.Annotations)
	vmiAfter := h.vmi("tenant-a", "cp-0")
	require.NotNil(t, vmiAfter)
	assert.Equal(t, vmiBefore.UID, vmiAfter.UID, "the running VMI is left alone")
}

// A shutdown from inside the guest must leave the machine Off (Ironic's deploy agent powers
// itself off at the end of a deploy).
func TestGuestShutdownLeavesMachineOff(t *testing.T) {
	h := newHarness(t, true)
	h.powerOn(cpA0)
	first := h.vmi("tenant-a", "cp-0").UID
	require.NoError(t, h.sim.GuestShutdown(context.Background(), "tenant-a", "cp-0"))
	h.powerStates(cpA0, isOff)

	// It stays off: sample for a while (longer than BootDelay) without waiting on a state.
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		require.Equal(t, redfish.PowerOff, h.system(cpA0).PowerState)
		time.Sleep(10 * time.Millisecond)
	}
	vmi := h.vmi("tenant-a", "cp-0")
	require.NotNil(t, vmi, "the finished VMI stays until the next power-on")
	assert.Equal(t, first, vmi.UID)
	assert.Equal(t, virtv1.Succeeded, vmi.Status.Phase)

	// Power-on removes the finished VMI and starts a new one.
	h.powerOn(cpA0)
	require.Eventually(t, func() bool {
		v := h.vmi("tenant-a", "cp-0")
		return v != nil && v.UID != first && v.Status.Phase == virtv1.Running
	}, pollFor, 5*time.Millisecond)
}

func TestPushPowerButtonToggles(t *testing.T) {
	h := newHarness(t, true)
	h.reset(cpA0, redfish.ResetPushPowerButton)
	h.powerStates(cpA0, isOn)
	h.reset(cpA0, redfish.ResetPushPowerButton)
	seen, _ := h.powerStates(cpA0, isOff)
	assert.True(t, monotonic(seen, redfish.PowerOn, redfish.PowerPoweringOff, redfish.PowerOff), "states %v", seen)
}

func TestGracefulRestartKeepsMachineOn(t *testing.T) {
	h := newHarness(t, true)
	h.powerOn(cpA0)
	first := h.vmi("tenant-a", "cp-0").UID
	h.reset(cpA0, redfish.ResetGracefulRestart)
	require.Eventually(t, func() bool {
		v := h.vmi("tenant-a", "cp-0")
		return v != nil && v.UID != first && v.Status.Phase == virtv1.Running
	}, pollFor, 5*time.Millisecond)
	h.powerStates(cpA0, isOn)
	assert.Equal(t, virtv1.RunStrategyOnce, *h.vm("tenant-a", "cp-0").Spec.RunStrategy)
}

func TestPatchResponseMatchesGet(t *testing.T) {
	h := newHarness(t, true)
	resp, body := h.do(http.MethodPatch, "/redfish/v1/Systems/"+isoVM, "admin", `{"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Continuous"}}`, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var patched redfish.ComputerSystem
	require.NoError(t, json.Unmarshal(body, &patched))
	got := h.system(isoVM)
	assert.Equal(t, patched.Boot, got.Boot)
	assert.Equal(t, redfish.BootPxe, got.Boot.BootSourceOverrideTarget)
	st := h.vm("tenant-a", "iso-0").Annotations[kubevirt.BootAnnotation]
	assert.Contains(t, st, `"target":"Pxe"`)
}
