package kubevirt

import (
	"fmt"
	"testing"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// Benchmarks of the translation functions every GET and action runs, and of the cached List
// behind the collections:
//
//	go test ./pkg/kubevirt -run '^$' -bench . -benchmem
//
// Whole-server figures come from `make bench` (BENCHMARKS.md).

// benchVM is a control-plane-shaped VM: 4 cores, 16 GiB, UEFI, a root disk, an installer
// CD-ROM and a pod network interface.
func benchVM(ns, name string) *virtv1.VirtualMachine {
	always := virtv1.RunStrategyAlways
	one := uint(1)
	return &virtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: "00000000-0000-4000-8000-000000000001",
			ResourceVersion: "42", Labels: map[string]string{"role": "control-plane"}},
		Spec: virtv1.VirtualMachineSpec{
			RunStrategy: &always,
			Template: &virtv1.VirtualMachineInstanceTemplateSpec{Spec: virtv1.VirtualMachineInstanceSpec{Domain: virtv1.DomainSpec{
				CPU:      &virtv1.CPU{Sockets: 1, Cores: 4, Threads: 1},
				Memory:   &virtv1.Memory{Guest: resource.NewQuantity(16<<30, resource.BinarySI)},
				Firmware: &virtv1.Firmware{UUID: "5f1e6a3c-0000-4000-9000-000000000001", Bootloader: &virtv1.Bootloader{EFI: &virtv1.EFI{}}},
				Devices: virtv1.Devices{
					Disks: []virtv1.Disk{
						{Name: "rootdisk", BootOrder: &one, DiskDevice: virtv1.DiskDevice{Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}}},
						{Name: "installer", DiskDevice: virtv1.DiskDevice{CDRom: &virtv1.CDRomTarget{Bus: virtv1.DiskBusSATA}}},
					},
					Interfaces: []virtv1.Interface{{Name: "default", MacAddress: "02:00:00:00:00:01",
						InterfaceBindingMethod: virtv1.InterfaceBindingMethod{Bridge: &virtv1.InterfaceBridge{}}}},
				},
			}}},
		},
	}
}

func benchVMI(vm *virtv1.VirtualMachine) *virtv1.VirtualMachineInstance {
	return &virtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace, Name: vm.Name, UID: types.UID("vmi-" + string(vm.UID)),
			Labels: vm.Labels},
		Spec: vm.Spec.Template.Spec,
		Status: virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Running, NodeName: "node-1",
			Conditions: []virtv1.VirtualMachineInstanceCondition{{Type: virtv1.VirtualMachineInstanceReady, Status: "True"}}},
	}
}

var sinkString string

func BenchmarkParseSystemID(b *testing.B) {
	for _, id := range []string{"tenant-a.cp-0", "openshift-cluster-17.master-2.example.com", "no-dot", "Bad_Namespace.vm"} {
		b.Run(id, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ns, _, _ := ParseSystemID(id)
				sinkString = ns
			}
		})
	}
}

func BenchmarkPowerState(b *testing.B) {
	vm := benchVM("tenant-a", "cp-0")
	vmi := benchVMI(vm)
	b.Run("running", func(b *testing.B) {
		for b.Loop() {
			sinkString = string(PowerState(vm, vmi))
		}
	})
	b.Run("off", func(b *testing.B) {
		halted := vm.DeepCopy()
		rs := virtv1.RunStrategyHalted
		halted.Spec.RunStrategy = &rs
		for b.Loop() {
			sinkString = string(PowerState(halted, nil))
		}
	})
}

func BenchmarkFactsOf(b *testing.B) {
	vm := benchVM("tenant-a", "cp-0")
	b.Run("off", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkString = FactsOf(Machine{VM: vm}).UUID
		}
	})
	b.Run("running", func(b *testing.B) {
		m := Machine{VM: vm, VMI: benchVMI(vm)}
		b.ReportAllocs()
		for b.Loop() {
			sinkString = FactsOf(m).UUID
		}
	})
	// Placement checks read the VMIs on the machine's node: 50 neighbours, 3 of them
	// control-plane VMs of other namespaces.
	b.Run("running/50-peers", func(b *testing.B) {
		var peers []*virtv1.VirtualMachineInstance
		for i := range 50 {
			p := benchVMI(benchVM(fmt.Sprintf("tenant-%d", i%17), fmt.Sprintf("vm-%d", i)))
			if i%16 != 0 {
				p.Labels = map[string]string{"role": "worker"}
			}
			peers = append(peers, p)
		}
		m := Machine{VM: vm, VMI: benchVMI(vm), Peers: func(string) []*virtv1.VirtualMachineInstance { return peers }}
		b.ReportAllocs()
		for b.Loop() {
			sinkString = FactsOf(m).UUID
		}
	})
}

func BenchmarkComputeOrders(b *testing.B) {
	vm := benchVM("tenant-a", "cp-0")
	devs := devices(vm)
	original := originalOrders(devs)
	for _, target := range []redfish.BootTarget{redfish.BootNone, redfish.BootPxe, redfish.BootCd, redfish.BootHdd} {
		b.Run(string(target), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if len(ComputeOrders(devs, target, original)) != len(devs) {
					b.Fatal("orders lost a device")
				}
			}
		})
	}
}

func BenchmarkPlanBoot(b *testing.B) {
	vm := benchVM("tenant-a", "cp-0")
	target, enabled := redfish.BootPxe, redfish.BootOnce
	req := BootRequest{Target: &target, Enabled: &enabled}
	b.ReportAllocs()
	for b.Loop() {
		_ = PlanBoot(vm, "vmi-uid", req)
	}
}

func BenchmarkPlanReset(b *testing.B) {
	vm := benchVM("tenant-a", "cp-0")
	vmi := benchVMI(vm)
	for _, rt := range []redfish.ResetType{redfish.ResetOn, redfish.ResetForceOff, redfish.ResetGracefulShutdown, redfish.ResetForceRestart, redfish.ResetPushPowerButton} {
		b.Run(string(rt), func(b *testing.B) {
			for b.Loop() {
				_ = PlanReset(rt, vm, vmi)
			}
		})
	}
}

// listClient is a Client whose caches hold n VMs across m namespaces, every other one with a
// running VMI, put straight into the informers' stores (the informers never run).
func listClient(tb testing.TB, n, m int) *Client {
	tb.Helper()
	var nss []string
	for j := range m {
		nss = append(nss, fmt.Sprintf("bench-%d", j))
	}
	c := NewClient(nil, nss, zap.NewNop())
	for i := range n {
		vm := benchVM(nss[i%m], fmt.Sprintf("vm-%05d", (i*7919)%n)) // stored out of order
		nc := c.namespaces[vm.Namespace]
		if err := nc.vms.GetStore().Add(vm); err != nil {
			tb.Fatal(err)
		}
		if i%2 == 0 {
			if err := nc.vmis.GetStore().Add(benchVMI(vm)); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return c
}

// BenchmarkList is the cached list behind the Systems, Managers and Chassis collections: it
// should grow linearly with the fleet.
func BenchmarkList(b *testing.B) {
	all := func(*virtv1.VirtualMachine) bool { return true }
	for _, n := range []int{100, 1000, 10000} {
		c := listClient(b, n, 10)
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if len(c.List(all)) != n {
					b.Fatal("short list")
				}
			}
		})
	}
}
