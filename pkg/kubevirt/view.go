package kubevirt

import (
	"math"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/resource"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// Machine is a VM and its current VMI (nil when none exists), as read from the caches.
type Machine struct {
	VM  *virtv1.VirtualMachine
	VMI *virtv1.VirtualMachineInstance
	// Peers, when set, lists the live VMIs of the VM's namespace on a hosting node (for
	// placement checks).
	Peers func(node string) []*virtv1.VirtualMachineInstance
}

// ID is the machine's Redfish id.
func (m Machine) ID() string { return SystemID(m.VM.Namespace, m.VM.Name) }

// VMIUID is the current VMI's UID, or "".
func (m Machine) VMIUID() string {
	if m.VMI == nil {
		return ""
	}
	return string(m.VMI.UID)
}

// Facts is the inventory and state of a machine as the ComputerSystem shows it.
type Facts struct {
	UUID         string
	SerialNumber string
	Model        string
	PowerState   redfish.PowerState
	Status       redfish.Status
	Sockets      int
	Cores        int // total
	Threads      int // total
	MemoryGiB    float64
	Boot         BootSettings
}

// firmwareNamespace is the namespace KubeVirt derives a VM's firmware UUID from (a SHA-1
// UUID of the VM name) when the spec sets none: the UUID the guest's SMBIOS shows.
var firmwareNamespace = uuid.MustParse("6a1a24a1-4061-4607-8bf4-a3963d0c5895")

// FactsOf derives the facts of a machine.
func FactsOf(m Machine) Facts {
	vm := m.VM
	f := Facts{Model: "KubeVirt VirtualMachine", PowerState: PowerState(vm, m.VMI), Boot: Boot(vm)}
	var domain virtv1.DomainSpec
	if vm.Spec.Template != nil {
		domain = vm.Spec.Template.Spec.Domain
	}
	f.UUID = firmwareUUID(m, domain)
	if fw := domain.Firmware; fw != nil && fw.Serial != "" {
		f.SerialNumber = fw.Serial
	} else {
		f.SerialNumber = string(vm.UID)
	}
	if mt := domain.Machine; mt != nil && mt.Type != "" {
		f.Model = "KubeVirt VirtualMachine (" + mt.Type + ")"
	}
	f.Sockets, f.Cores, f.Threads = cpuTopology(domain)
	f.MemoryGiB = memoryGiB(domain)
	f.Status = status(f.PowerState)
	f.Status.Health, f.Status.Conditions = Health(m, m.Neighbours())
	return f
}

// firmwareUUID is the SMBIOS UUID the guest sees: the VM's firmware UUID, else the one the VMI
// was started with, else the one KubeVirt derives from the VM name.
func firmwareUUID(m Machine, domain virtv1.DomainSpec) string {
	if fw := domain.Firmware; fw != nil && fw.UUID != "" {
		return string(fw.UUID)
	}
	if m.VMI != nil && m.VMI.Spec.Domain.Firmware != nil && m.VMI.Spec.Domain.Firmware.UUID != "" {
		return string(m.VMI.Spec.Domain.Firmware.UUID)
	}
	return DerivedFirmwareUUID(m.VM.Name)
}

// DerivedFirmwareUUID is the firmware UUID KubeVirt gives a VM named name that sets none.
func DerivedFirmwareUUID(name string) string {
	return uuid.NewSHA1(firmwareNamespace, []byte(name)).String()
}

// cpuTopology returns sockets, total cores and total threads. Without a topology KubeVirt
// (virt-api's SetDefaultGuestCPUTopology, virt-launcher's topology) gives the guest as many
// sockets of one core and one thread as the CPU limit, else the request, rounds up to.
func cpuTopology(d virtv1.DomainSpec) (sockets, cores, threads int) {
	sockets, perSocket, perCore := 1, 1, 1
	if c := d.CPU; c != nil && (c.Sockets > 0 || c.Cores > 0 || c.Threads > 0) {
		sockets, perSocket, perCore = atLeastOne(c.Sockets), atLeastOne(c.Cores), atLeastOne(c.Threads)
	} else if q, ok := cpuQuantity(d.Resources); ok {
		sockets = int(math.Ceil(float64(q.MilliValue()) / 1000))
		if sockets < 1 {
			sockets = 1
		}
	}
	return sockets, sockets * perSocket, sockets * perSocket * perCore
}

func cpuQuantity(r virtv1.ResourceRequirements) (resource.Quantity, bool) {
	if q, ok := r.Limits["cpu"]; ok {
		return q, true
	}
	q, ok := r.Requests["cpu"]
	return q, ok
}

func atLeastOne(v uint32) int {
	if v == 0 {
		return 1
	}
	return int(v)
}

// memoryGiB is the guest memory: memory.guest, else the memory request or limit.
func memoryGiB(d virtv1.DomainSpec) float64 {
	var q *resource.Quantity
	if d.Memory != nil && d.Memory.Guest != nil {
		q = d.Memory.Guest
	} else if r, ok := d.Resources.Requests["memory"]; ok {
		q = &r
	} else if r, ok := d.Resources.Limits["memory"]; ok {
		q = &r
	}
	if q == nil {
		return 0
	}
	gib := float64(q.Value()) / (1 << 30)
	return math.Round(gib*1000) / 1000
}

// status maps the power state onto Resource.Status.State; Health sets the health.
func status(ps redfish.PowerState) redfish.Status {
	s := redfish.Status{Health: "OK"}
	switch ps {
	case redfish.PowerOn, redfish.PowerPoweringOff:
		s.State = "Enabled"
	case redfish.PowerPoweringOn:
		s.State = "Starting"
	default:
		s.State = "StandbyOffline"
	}
	return s
}
