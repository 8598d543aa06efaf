package kubevirt

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	k8sv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

func withDomain(f func(d *virtv1.DomainSpec)) vmOption {
	return func(vm *virtv1.VirtualMachine) { f(&vm.Spec.Template.Spec.Domain) }
}

func qty(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

func TestMachineIDAndVMIUID(t *testing.T) {
	m := Machine{VM: newVM()}
	assert.Equal(t, "tenant-a.cp-0", m.ID())
	assert.Equal(t, "", m.VMIUID())
	m.VMI = newVMI(virtv1.Running, "abc")
	assert.Equal(t, "abc", m.VMIUID())
}

func TestFactsOfCPUTopology(t *testing.T) {
	tests := []struct {
		name                   string
		cpu                    *virtv1.CPU
		res                    virtv1.ResourceRequirements
		sockets, cores, thread int
	}{
		{"nothing at all", nil, virtv1.ResourceRequirements{}, 1, 1, 1},
		{"full topology", &virtv1.CPU{Sockets: 2, Cores: 4, Threads: 2}, virtv1.ResourceRequirements{}, 2, 8, 16},
		{"cores only", &virtv1.CPU{Cores: 4}, virtv1.ResourceRequirements{}, 1, 4, 4},
		{"sockets only", &virtv1.CPU{Sockets: 3}, virtv1.ResourceRequirements{}, 3, 3, 3},
		{"threads only", &virtv1.CPU{Threads: 2}, virtv1.ResourceRequirements{}, 1, 1, 2},
		{"topology wins over resources", &virtv1.CPU{Sockets: 1, Cores: 2, Threads: 1},
			virtv1.ResourceRequirements{Limits: k8sv1.ResourceList{k8sv1.ResourceCPU: *qty("8")}}, 1, 2, 2},
		{"sub-CPU request rounds up to one", nil,
			virtv1.ResourceRequirements{Requests: k8sv1.ResourceList{k8sv1.ResourceCPU: *qty("100m")}}, 1, 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vm := newVM(withDomain(func(d *virtv1.DomainSpec) { d.CPU, d.Resources = tc.cpu, tc.res }))
			f := FactsOf(Machine{VM: vm})
			assert.Equal(t, tc.sockets, f.Sockets, "sockets")
			assert.Equal(t, tc.cores, f.Cores, "total cores")
			assert.Equal(t, tc.thread, f.Threads, "total threads")
		})
	}
}

// KubeVirt sizes a guest without a CPU topology from the CPU limit, else the request, rounded
// up. The totals must match what the guest sees.
func TestFactsOfCPUTotalsFromResources(t *testing.T) {
	tests := []struct {
		name    string
		cpu     *virtv1.CPU
		res     virtv1.ResourceRequirements
		vcpus   int
		comment string
	}{
		{"request", nil, virtv1.ResourceRequirements{Requests: k8sv1.ResourceList{k8sv1.ResourceCPU: *qty("2")}}, 2, ""},
		{"limit", nil, virtv1.ResourceRequirements{Limits: k8sv1.ResourceList{k8sv1.ResourceCPU: *qty("4")}}, 4, ""},
		{"limit wins over request", nil, virtv1.ResourceRequirements{
			Requests: k8sv1.ResourceList{k8sv1.ResourceCPU: *qty("2")},
			Limits:   k8sv1.ResourceList{k8sv1.ResourceCPU: *qty("6")}}, 6, ""},
		{"fraction rounds up", nil, virtv1.ResourceRequirements{Limits: k8sv1.ResourceList{k8sv1.ResourceCPU: *qty("2500m")}}, 3, ""},
		{"CPU with a model but no topology", &virtv1.CPU{Model: "host-passthrough"},
			virtv1.ResourceRequirements{Requests: k8sv1.ResourceList{k8sv1.ResourceCPU: *qty("3")}}, 3, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vm := newVM(withDomain(func(d *virtv1.DomainSpec) { d.CPU, d.Resources = tc.cpu, tc.res }))
			f := FactsOf(Machine{VM: vm})
			assert.Equal(t, tc.vcpus, f.Cores, "total cores")
			assert.Equal(t, tc.vcpus, f.Threads, "total threads")
		})
	}
}

// Regression test (the bug it found is fixed): KubeVirt's defaulting (virt-api
// SetDefaultGuestCPUTopology, virt-launcher getCPUTopology) puts the vCPU count taken from
// resources into *sockets* of one core and one thread each (rhbz#1653453). cpuTopology used
// to put it into the cores of one socket, so ProcessorSummary.Count said 1.
func TestFactsOfCPUSocketsFromResourcesFollowKubeVirt(t *testing.T) {
	vm := newVM(withDomain(func(d *virtv1.DomainSpec) {
		d.Resources = virtv1.ResourceRequirements{Requests: k8sv1.ResourceList{k8sv1.ResourceCPU: *qty("4")}}
	}))
	f := FactsOf(Machine{VM: vm})
	assert.Equal(t, 4, f.Sockets, "KubeVirt gives the guest 4 sockets of 1 core")
	assert.Equal(t, 4, f.Cores)
	assert.Equal(t, 4, f.Threads)
}

func TestFactsOfMemory(t *testing.T) {
	tests := []struct {
		name  string
		mem   *virtv1.Memory
		res   virtv1.ResourceRequirements
		want  float64
		delta float64
	}{
		{"nothing", nil, virtv1.ResourceRequirements{}, 0, 0},
		{"guest", &virtv1.Memory{Guest: qty("16Gi")}, virtv1.ResourceRequirements{}, 16, 0},
		{"guest wins over requests and limits", &virtv1.Memory{Guest: qty("8Gi")}, virtv1.ResourceRequirements{
			Requests: k8sv1.ResourceList{k8sv1.ResourceMemory: *qty("2Gi")},
			Limits:   k8sv1.ResourceList{k8sv1.ResourceMemory: *qty("4Gi")}}, 8, 0},
		{"requests", nil, virtv1.ResourceRequirements{Requests: k8sv1.ResourceList{k8sv1.ResourceMemory: *qty("1536Mi")}}, 1.5, 0},
		{"requests win over limits", nil, virtv1.ResourceRequirements{
			Requests: k8sv1.ResourceList{k8sv1.ResourceMemory: *qty("2Gi")},
			Limits:   k8sv1.ResourceList{k8sv1.ResourceMemory: *qty("4Gi")}}, 2, 0},
		{"limits only", nil, virtv1.ResourceRequirements{Limits: k8sv1.ResourceList{k8sv1.ResourceMemory: *qty("4Gi")}}, 4, 0},
		{"memory without guest falls back to requests", &virtv1.Memory{}, virtv1.ResourceRequirements{
			Requests: k8sv1.ResourceList{k8sv1.ResourceMemory: *qty("3Gi")}}, 3, 0},
		{"decimal units rounded to three places", &virtv1.Memory{Guest: qty("1G")}, virtv1.ResourceRequirements{}, 0.931, 0},
		{"small", &virtv1.Memory{Guest: qty("512Mi")}, virtv1.ResourceRequirements{}, 0.5, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vm := newVM(withDomain(func(d *virtv1.DomainSpec) { d.Memory, d.Resources = tc.mem, tc.res }))
			assert.Equal(t, tc.want, FactsOf(Machine{VM: vm}).MemoryGiB)
		})
	}
}

func TestFactsOfFirmwareUUID(t *testing.T) {
	specUUID := types.UID("aaaaaaaa-0000-4000-8000-000000000001")
	vmiUUID := types.UID("bbbbbbbb-0000-4000-8000-000000000002")
	vmWithUUID := func(u types.UID) *virtv1.VirtualMachine {
		return newVM(withDomain(func(d *virtv1.DomainSpec) { d.Firmware = &virtv1.Firmware{UUID: u} }))
	}
	vmiWithUUID := func(u types.UID) *virtv1.VirtualMachineInstance {
		vmi := newVMI(virtv1.Running, "")
		vmi.Spec.Domain.Firmware = &virtv1.Firmware{UUID: u}
		return vmi
	}

	t.Run("spec wins over VMI", func(t *testing.T) {
		assert.Equal(t, string(specUUID), FactsOf(Machine{VM: vmWithUUID(specUUID), VMI: vmiWithUUID(vmiUUID)}).UUID)
	})
	t.Run("VMI when the spec has none", func(t *testing.T) {
		assert.Equal(t, string(vmiUUID), FactsOf(Machine{VM: newVM(), VMI: vmiWithUUID(vmiUUID)}).UUID)
		assert.Equal(t, string(vmiUUID), FactsOf(Machine{VM: vmWithUUID(""), VMI: vmiWithUUID(vmiUUID)}).UUID)
	})
	t.Run("derived when neither has one, stable", func(t *testing.T) {
		a := FactsOf(Machine{VM: newVM()}).UUID
		b := FactsOf(Machine{VM: newVM()}).UUID
		_, err := uuid.Parse(a)
		require.NoError(t, err)
		assert.Equal(t, a, b, "the same VM always gets the same UUID")
		// A VMI without firmware UUID does not change it.
		assert.Equal(t, a, FactsOf(Machine{VM: newVM(), VMI: newVMI(virtv1.Running, "")}).UUID)
		assert.Equal(t, a, FactsOf(Machine{VM: newVM(), VMI: vmiWithUUID("")}).UUID)

		other := newVM()
		other.Name, other.UID = "cp-1", "99999999-2222-4333-8444-555555555555"
		assert.NotEqual(t, a, FactsOf(Machine{VM: other}).UUID, "different VMs get different UUIDs")
	})
}

// Regression test (the bug it found is fixed): when neither the VM template nor the VMI
// carries a firmware UUID, the guest gets the one KubeVirt derives (virt-controller
// CalculateLegacyUUID = uuid.NewSHA1(6a1a24a1-4061-4607-8bf4-a3963d0c5895, []byte(vm.Name))).
// view.go used to hash the VM's UID instead, so an Off machine showed a UUID the guest never
// sees.
func TestFactsOfDerivedUUIDMatchesKubeVirt(t *testing.T) {
	vm := newVM()
	want := uuid.NewSHA1(uuid.MustParse("6a1a24a1-4061-4607-8bf4-a3963d0c5895"), []byte(vm.Name)).String()
	assert.Equal(t, want, FactsOf(Machine{VM: vm}).UUID)
}

func TestFactsOfSerialAndModel(t *testing.T) {
	plain := newVM()
	assert.Equal(t, string(plain.UID), FactsOf(Machine{VM: plain}).SerialNumber)
	assert.Equal(t, "KubeVirt VirtualMachine", FactsOf(Machine{VM: plain}).Model)

	serial := newVM(withDomain(func(d *virtv1.DomainSpec) { d.Firmware = &virtv1.Firmware{Serial: "SN-123"} }))
	assert.Equal(t, "SN-123", FactsOf(Machine{VM: serial}).SerialNumber)

	emptySerial := newVM(withDomain(func(d *virtv1.DomainSpec) { d.Firmware = &virtv1.Firmware{} }))
	assert.Equal(t, string(emptySerial.UID), FactsOf(Machine{VM: emptySerial}).SerialNumber)

	q35 := newVM(withDomain(func(d *virtv1.DomainSpec) { d.Machine = &virtv1.Machine{Type: "q35"} }))
	assert.Equal(t, "KubeVirt VirtualMachine (q35)", FactsOf(Machine{VM: q35}).Model)

	noType := newVM(withDomain(func(d *virtv1.DomainSpec) { d.Machine = &virtv1.Machine{} }))
	assert.Equal(t, "KubeVirt VirtualMachine", FactsOf(Machine{VM: noType}).Model)
}

func TestFactsOfWithoutTemplate(t *testing.T) {
	vm := newVM(withRunStrategy(virtv1.RunStrategyHalted))
	vm.Spec.Template = nil
	f := FactsOf(Machine{VM: vm})
	assert.Equal(t, redfish.PowerOff, f.PowerState)
	assert.Equal(t, 1, f.Sockets)
	assert.Equal(t, float64(0), f.MemoryGiB)
	assert.Equal(t, string(vm.UID), f.SerialNumber)
	assert.NotEmpty(t, f.UUID)
	assert.Equal(t, BootSettings{redfish.BootNone, redfish.BootDisabled, redfish.BootLegacy}, f.Boot)
}

func TestFactsOfStatus(t *testing.T) {
	tests := []struct {
		name  string
		vm    *virtv1.VirtualMachine
		vmi   *virtv1.VirtualMachineInstance
		power redfish.PowerState
		state string
		heal  string
	}{
		{"off", newVM(withRunStrategy(virtv1.RunStrategyHalted)), nil, off, "StandbyOffline", "OK"},
		{"starting", newVM(withRunStrategy(virtv1.RunStrategyOnce)), nil, poweringOn, "Starting", "OK"},
		{"pending", newVM(withRunStrategy(virtv1.RunStrategyOnce)), newVMI(virtv1.Pending, ""), poweringOn, "Starting", "OK"},
		{"on", newVM(withRunStrategy(virtv1.RunStrategyOnce)), newVMI(virtv1.Running, ""), on, "Enabled", "OK"},
		{"stopping", newVM(withRunStrategy(virtv1.RunStrategyHalted)), newVMI(virtv1.Running, ""), poweringOff, "Enabled", "OK"},
		{"guest shut down", newVM(withRunStrategy(virtv1.RunStrategyOnce)), newVMI(virtv1.Succeeded, ""), off, "StandbyOffline", "OK"},
		{"failed, off", newVM(withRunStrategy(virtv1.RunStrategyOnce)), newVMI(virtv1.Failed, ""), off, "StandbyOffline", "Critical"},
		{"failed, restarting", newVM(withRunStrategy(virtv1.RunStrategyAlways)), newVMI(virtv1.Failed, ""), poweringOn, "Starting", "Critical"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := FactsOf(Machine{VM: tc.vm, VMI: tc.vmi})
			assert.Equal(t, tc.power, f.PowerState)
			assert.Equal(t, tc.state, f.Status.State)
			assert.Equal(t, tc.heal, f.Status.Health)
		})
	}
}

func TestFactsOfBoot(t *testing.T) {
	vm := newVM(withAnnotations(map[string]string{BootAnnotation: `{"target":"Cd","enabled":"Once","original":{}}`}),
		withDomain(func(d *virtv1.DomainSpec) {
			d.Firmware = &virtv1.Firmware{Bootloader: &virtv1.Bootloader{EFI: &virtv1.EFI{}}}
		}))
	assert.Equal(t, BootSettings{redfish.BootCd, redfish.BootOnce, redfish.BootUEFI}, FactsOf(Machine{VM: vm}).Boot)
}
