package kubevirt

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	virtv1 "kubevirt.io/api/core/v1"
)

// strategy returns a pointer to a run strategy.
func strategy(rs virtv1.VirtualMachineRunStrategy) *virtv1.VirtualMachineRunStrategy { return &rs }

func boolPtr(b bool) *bool { return &b }

func uintPtr(u uint) *uint { return &u }

// vmOption tweaks a test VM.
type vmOption func(*virtv1.VirtualMachine)

// newVM builds a minimal VM with a template; options set run strategy, status and devices.
func newVM(opts ...vmOption) *virtv1.VirtualMachine {
	vm := &virtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "cp-0", UID: "11111111-2222-4333-8444-555555555555", ResourceVersion: "42"},
		Spec: virtv1.VirtualMachineSpec{
			Template: &virtv1.VirtualMachineInstanceTemplateSpec{},
		},
	}
	for _, o := range opts {
		o(vm)
	}
	return vm
}

func withRunStrategy(rs virtv1.VirtualMachineRunStrategy) vmOption {
	return func(vm *virtv1.VirtualMachine) { vm.Spec.RunStrategy = strategy(rs) }
}

func withRunning(b bool) vmOption {
	return func(vm *virtv1.VirtualMachine) { vm.Spec.Running = boolPtr(b) }
}

func withStatusRunStrategy(rs virtv1.VirtualMachineRunStrategy) vmOption {
	return func(vm *virtv1.VirtualMachine) { vm.Status.RunStrategy = rs }
}

func withStartRequest() vmOption {
	return func(vm *virtv1.VirtualMachine) {
		vm.Status.StateChangeRequests = []virtv1.VirtualMachineStateChangeRequest{{Action: virtv1.StartRequest}}
	}
}

func withStopRequest() vmOption {
	return func(vm *virtv1.VirtualMachine) {
		vm.Status.StateChangeRequests = []virtv1.VirtualMachineStateChangeRequest{{Action: virtv1.StopRequest}}
	}
}

func withDisks(disks ...virtv1.Disk) vmOption {
	return func(vm *virtv1.VirtualMachine) { vm.Spec.Template.Spec.Domain.Devices.Disks = disks }
}

func withInterfaces(ifaces ...virtv1.Interface) vmOption {
	return func(vm *virtv1.VirtualMachine) { vm.Spec.Template.Spec.Domain.Devices.Interfaces = ifaces }
}

func withAnnotations(kv map[string]string) vmOption {
	return func(vm *virtv1.VirtualMachine) { vm.Annotations = kv }
}

func disk(name string, order uint) virtv1.Disk {
	d := virtv1.Disk{Name: name, DiskDevice: virtv1.DiskDevice{Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}}}
	if order > 0 {
		d.BootOrder = uintPtr(order)
	}
	return d
}

func cdrom(name string, order uint) virtv1.Disk {
	d := virtv1.Disk{Name: name, DiskDevice: virtv1.DiskDevice{CDRom: &virtv1.CDRomTarget{Bus: virtv1.DiskBusSATA}}}
	if order > 0 {
		d.BootOrder = uintPtr(order)
	}
	return d
}

func iface(name string, order uint) virtv1.Interface {
	i := virtv1.Interface{Name: name, InterfaceBindingMethod: virtv1.InterfaceBindingMethod{Bridge: &virtv1.InterfaceBridge{}}}
	if order > 0 {
		i.BootOrder = uintPtr(order)
	}
	return i
}

// newVMI builds a VMI in a phase; uid "" picks a fixed one.
func newVMI(phase virtv1.VirtualMachineInstancePhase, uid string) *virtv1.VirtualMachineInstance {
	if uid == "" {
		uid = "vmi-uid-1"
	}
	return &virtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "cp-0", UID: types.UID(uid)},
		Status:     virtv1.VirtualMachineInstanceStatus{Phase: phase},
	}
}

// terminating marks a VMI as being deleted.
func terminating(vmi *virtv1.VirtualMachineInstance) *virtv1.VirtualMachineInstance {
	now := metav1.NewTime(time.Now())
	vmi.DeletionTimestamp = &now
	return vmi
}
