package sim

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
)

type simEnv struct {
	t   *testing.T
	dyn dynamic.Interface
	sim *Simulator
	ctx context.Context
}

func startSim(t *testing.T, opts Options) *simEnv {
	t.Helper()
	dyn := demo(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s := New(dyn, opts)
	require.NoError(t, s.Run(ctx))
	return &simEnv{t: t, dyn: dyn, sim: s, ctx: ctx}
}

func (e *simEnv) setRunStrategy(name string, rs virtv1.VirtualMachineRunStrategy) {
	e.t.Helper()
	_, err := e.dyn.Resource(kubevirt.VMResource).Namespace("tenant-a").Patch(e.ctx, name, types.MergePatchType,
		[]byte(fmt.Sprintf(`{"spec":{"runStrategy":%q}}`, rs)), metav1.PatchOptions{})
	require.NoError(e.t, err)
}

func (e *simEnv) vm(name string) *virtv1.VirtualMachine {
	e.t.Helper()
	return typedVM(e.t, getVM(e.t, e.dyn, "tenant-a", name))
}

func (e *simEnv) vmi(name string) *virtv1.VirtualMachineInstance {
	e.t.Helper()
	u, err := e.dyn.Resource(kubevirt.VMIResource).Namespace("tenant-a").Get(e.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(e.t, err)
	vmi := &virtv1.VirtualMachineInstance{}
	require.NoError(e.t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, vmi))
	return vmi
}

// waitVMI polls until cond holds for the VMI (nil when absent) and returns it.
func (e *simEnv) waitVMI(name, what string, cond func(*virtv1.VirtualMachineInstance) bool) *virtv1.VirtualMachineInstance {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		vmi := e.vmi(name)
		if cond(vmi) {
			return vmi
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("VMI %s: timed out waiting for %s; last %+v", name, what, vmi)
		}
		time.Sleep(3 * time.Millisecond)
	}
}

func running(vmi *virtv1.VirtualMachineInstance) bool {
	return vmi != nil && vmi.Status.Phase == virtv1.Running
}

func gone(vmi *virtv1.VirtualMachineInstance) bool { return vmi == nil }

func fast() Options {
	return Options{BootDelay: 50 * time.Millisecond, ShutdownDelay: 50 * time.Millisecond}
}

func TestSimOnceStartsAVMI(t *testing.T) {
	e := startSim(t, fast())
	e.setRunStrategy("cp-0", virtv1.RunStrategyOnce)
	vmi := e.waitVMI("cp-0", "Running", running)
	vm := e.vm("cp-0")

	assert.NotEmpty(t, vmi.UID)
	assert.NotEqual(t, vm.UID, vmi.UID)
	ctrl := metav1.GetControllerOf(vmi)
	require.NotNil(t, ctrl, "the VMI is owned by its VM")
	assert.Equal(t, vm.UID, ctrl.UID)
	assert.Equal(t, vm.Spec.Template.Spec.Domain.Firmware.UUID, vmi.Spec.Domain.Firmware.UUID)
	assert.NotEmpty(t, vmi.Status.NodeName)
	assert.Equal(t, vmi.Status.NodeName, vmi.Labels[virtv1.NodeNameLabel])
	require.Len(t, vmi.Status.Interfaces, 1)
	assert.Equal(t, "02:00:00:00:00:01", vmi.Status.Interfaces[0].MAC, "the pinned MAC")
	assert.Equal(t, "control-plane", vmi.Labels["role"], "template labels are copied")

	require.Eventually(t, func() bool {
		vm := e.vm("cp-0")
		return vm.Status.PrintableStatus == virtv1.VirtualMachineStatusRunning && vm.Status.Ready &&
			vm.Status.RunStrategy == virtv1.RunStrategyOnce && vm.Status.Created
	}, 10*time.Second, 5*time.Millisecond, "VM status follows the VMI")
}

func TestSimHaltedStopsAfterShutdownDelay(t *testing.T) {
	e := startSim(t, Options{BootDelay: 50 * time.Millisecond, ShutdownDelay: 400 * time.Millisecond})
	e.setRunStrategy("cp-0", virtv1.RunStrategyOnce)
	first := e.waitVMI("cp-0", "Running", running)

	e.setRunStrategy("cp-0", virtv1.RunStrategyHalted)
	halted := time.Now()
	// The guest gets ShutdownDelay: well before it ends the VMI is still there.
	time.Sleep(150 * time.Millisecond)
	vmi := e.vmi("cp-0")
	require.NotNil(t, vmi, "the VMI stays while the guest shuts down")
	assert.Equal(t, first.UID, vmi.UID)
	require.Eventually(t, func() bool {
		vm := e.vm("cp-0")
		return vm.Status.PrintableStatus == virtv1.VirtualMachineStatusStopping
	}, 10*time.Second, 5*time.Millisecond)

	e.waitVMI("cp-0", "deletion", gone)
	assert.GreaterOrEqual(t, time.Since(halted), 400*time.Millisecond)
	require.Eventually(t, func() bool {
		return e.vm("cp-0").Status.PrintableStatus == virtv1.VirtualMachineStatusStopped
	}, 10*time.Second, 5*time.Millisecond)
}

func TestSimOnceGuestShutdownStaysOff(t *testing.T) {
	e := startSim(t, fast())
	e.setRunStrategy("cp-0", virtv1.RunStrategyOnce)
	first := e.waitVMI("cp-0", "Running", running)
	require.NoError(t, e.sim.GuestShutdown(e.ctx, "tenant-a", "cp-0"))
	e.waitVMI("cp-0", "Succeeded", func(v *virtv1.VirtualMachineInstance) bool { return v != nil && v.Status.Phase == virtv1.Succeeded })

	time.Sleep(200 * time.Millisecond) // several BootDelays: nothing must restart it
	vmi := e.vmi("cp-0")
	require.NotNil(t, vmi)
	assert.Equal(t, first.UID, vmi.UID, "Once never restarts a finished VMI")
	assert.Equal(t, virtv1.Succeeded, vmi.Status.Phase)

	assert.Error(t, e.sim.GuestShutdown(e.ctx, "tenant-a", "cp-0"), "no running VMI to shut down")
	assert.Error(t, e.sim.GuestReboot(e.ctx, "tenant-a", "cp-0"))
}

func TestSimAlwaysRestartsAfterGuestShutdown(t *testing.T) {
	e := startSim(t, fast())
	e.setRunStrategy("cp-0", virtv1.RunStrategyAlways)
	first := e.waitVMI("cp-0", "Running", running)
	require.NoError(t, e.sim.GuestShutdown(e.ctx, "tenant-a", "cp-0"))
	e.waitVMI("cp-0", "a new VMI", func(v *virtv1.VirtualMachineInstance) bool { return running(v) && v.UID != first.UID })
}

func TestSimRerunOnFailure(t *testing.T) {
	e := startSim(t, fast())
	// Switching to RerunOnFailure starts the VM (the strategy just changed).
	e.setRunStrategy("cp-0", virtv1.RunStrategyRerunOnFailure)
	first := e.waitVMI("cp-0", "Running", running)

	// A failure restarts it.
	_, err := e.dyn.Resource(kubevirt.VMIResource).Namespace("tenant-a").Patch(e.ctx, "cp-0", types.MergePatchType,
		[]byte(`{"status":{"phase":"Failed"}}`), metav1.PatchOptions{}, "status")
	require.NoError(t, err)
	second := e.waitVMI("cp-0", "a restarted VMI", func(v *virtv1.VirtualMachineInstance) bool { return running(v) && v.UID != first.UID })

	// A clean guest shutdown does not: the VMI is removed and nothing replaces it.
	require.NoError(t, e.sim.GuestShutdown(e.ctx, "tenant-a", "cp-0"))
	e.waitVMI("cp-0", "removal", gone)
	time.Sleep(200 * time.Millisecond)
	assert.Nil(t, e.vmi("cp-0"), "RerunOnFailure does not restart a VMI that succeeded")
	_ = second
}

func TestSimManualStartsNothing(t *testing.T) {
	e := startSim(t, fast())
	e.setRunStrategy("cp-0", virtv1.RunStrategyManual)
	require.Eventually(t, func() bool { return e.vm("cp-0").Status.RunStrategy == virtv1.RunStrategyManual }, 10*time.Second, 5*time.Millisecond)
	time.Sleep(150 * time.Millisecond)
	assert.Nil(t, e.vmi("cp-0"))
}

func TestSimGuestReboot(t *testing.T) {
	e := startSim(t, fast())
	e.setRunStrategy("cp-0", virtv1.RunStrategyOnce)
	first := e.waitVMI("cp-0", "Running", running)
	require.NoError(t, e.sim.GuestReboot(e.ctx, "tenant-a", "cp-0"))
	// The counter is read from the simulator's cache: let it see the first reboot.
	require.Eventually(t, func() bool {
		o, ok, _ := e.sim.vmis.GetIndexer().GetByKey("tenant-a/cp-0")
		return ok && o.(*virtv1.VirtualMachineInstance).Annotations[simAnnotation+"reboots"] == "1"
	}, 10*time.Second, 3*time.Millisecond)
	require.NoError(t, e.sim.GuestReboot(e.ctx, "tenant-a", "cp-0"))
	vmi := e.waitVMI("cp-0", "two reboots", func(v *virtv1.VirtualMachineInstance) bool {
		return v != nil && v.Annotations[simAnnotation+"reboots"] == "2"
	})
	assert.Equal(t, first.UID, vmi.UID, "a guest reboot keeps the VMI")
	assert.Equal(t, virtv1.Running, vmi.Status.Phase)
}

func TestSimSpreadsVMIsOverNodes(t *testing.T) {
	e := startSim(t, fast())
	for _, name := range []string{"cp-0", "cp-1", "cp-2"} {
		e.setRunStrategy(name, virtv1.RunStrategyOnce)
		e.waitVMI(name, "Running", running)
	}
	nodes := map[string]bool{}
	for _, name := range []string{"cp-0", "cp-1", "cp-2"} {
		nodes[e.vmi(name).Status.NodeName] = true
	}
	assert.Len(t, nodes, 3, "three VMIs on three nodes")
}

func TestDerivedMAC(t *testing.T) {
	a := DerivedMAC("tenant-a", "cp-0", "default")
	assert.Equal(t, a, DerivedMAC("tenant-a", "cp-0", "default"))
	assert.NotEqual(t, a, DerivedMAC("tenant-a", "cp-1", "default"))
	assert.Regexp(t, `^02(:[0-9a-f]{2}){5}$`, a, "a locally administered unicast MAC")
}

// Regression: advance() used to measure BootDelay from vmi.CreationTimestamp, which reaches the
// cache at one-second precision, so a VMI created late in a second went Running almost at
// once. It now counts from when the simulator first saw the VMI.
func TestSimBootDelayIsHonoured(t *testing.T) {
	const bootDelay = 700 * time.Millisecond
	e := startSim(t, Options{BootDelay: bootDelay, ShutdownDelay: 50 * time.Millisecond})
	// Start the VM 800ms into a second, so truncation loses about 0.8s.
	now := time.Now()
	time.Sleep(now.Truncate(time.Second).Add(time.Second + 800*time.Millisecond).Sub(now))
	e.setRunStrategy("cp-0", virtv1.RunStrategyOnce)
	vmi := e.waitVMI("cp-0", "creation", func(v *virtv1.VirtualMachineInstance) bool { return v != nil })
	created := time.Now()
	for time.Since(created) < bootDelay/2 {
		vmi = e.vmi("cp-0")
		require.NotNil(t, vmi)
		require.NotEqual(t, virtv1.Running, vmi.Status.Phase,
			"Running %v after creation with BootDelay %v (creationTimestamp %v)", time.Since(created), bootDelay, vmi.CreationTimestamp)
		time.Sleep(10 * time.Millisecond)
	}
}
