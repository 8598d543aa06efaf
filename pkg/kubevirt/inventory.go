package kubevirt

import (
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	virtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// The inventory of a machine: what its processors, network interfaces, disks and firmware
// are, read from the VM, its VMI and its DataVolumes. Nothing is made up: a fact that none of
// them states is left empty, and the Redfish layer leaves the property out.

// IndicatorAnnotation on the VM stores the indicator LED state (Lit, Blinking or Off), so a
// PATCH reads back from every replica. A VM without it is Off.
const IndicatorAnnotation = "redfish.kubevirt.io/indicator-led"

// defaultArchitecture is what KubeVirt assumes when neither the VM nor its VMI names an
// architecture: virt-api defaults spec.template.spec.architecture to the architecture it was
// built for, amd64 on every supported x86 cluster.
const defaultArchitecture = "amd64"

// Architecture maps a KubeVirt architecture onto Redfish ProcessorArchitecture and
// InstructionSet. An architecture Redfish has no value for gives OEM; an unknown string
// gives nothing.
func Architecture(arch string) (processorArch, instructionSet string) {
	switch arch {
	case "amd64", "x86_64":
		return "x86", "x86-64"
	case "arm64", "aarch64":
		return "ARM", "ARM-A64"
	case "ppc64le", "ppc64":
		return "Power", "PowerISA"
	case "riscv64":
		return "RISC-V", "RV64"
	case "s390x":
		return "OEM", "OEM"
	}
	return "", ""
}

// architectureOf is the machine's architecture: the VM's, else the VMI's, else KubeVirt's
// default.
func architectureOf(m Machine) string {
	if t := m.VM.Spec.Template; t != nil && t.Spec.Architecture != "" {
		return t.Spec.Architecture
	}
	if m.VMI != nil && m.VMI.Spec.Architecture != "" {
		return m.VMI.Spec.Architecture
	}
	return defaultArchitecture
}

func domainOf(vm *virtv1.VirtualMachine) virtv1.DomainSpec {
	if vm.Spec.Template == nil {
		return virtv1.DomainSpec{}
	}
	return vm.Spec.Template.Spec.Domain
}

// live returns the VMI when one exists that has not stopped for good.
func live(m Machine) *virtv1.VirtualMachineInstance {
	if m.VMI == nil || isFinal(m.VMI) {
		return nil
	}
	return m.VMI
}

// ProcessorFacts describes one socket.
type ProcessorFacts struct {
	Socket         int
	Cores          int // cores in this socket
	Threads        int // threads in this socket
	Architecture   string
	InstructionSet string
	// Model is the CPU model the VM asks for (host-passthrough, host-model or a named model),
	// else the one the running VMI was given; "" when neither says.
	Model string
}

// ProcessorsOf lists one processor per socket of the VM's topology, the same topology
// ProcessorSummary counts.
func ProcessorsOf(m Machine) []ProcessorFacts {
	d := domainOf(m.VM)
	sockets, cores, threads := cpuTopology(d)
	arch, isa := Architecture(architectureOf(m))
	model := ""
	if d.CPU != nil && d.CPU.Model != "" {
		model = d.CPU.Model
	} else if vmi := live(m); vmi != nil && vmi.Spec.Domain.CPU != nil {
		model = vmi.Spec.Domain.CPU.Model
	}
	out := make([]ProcessorFacts, sockets)
	for i := range out {
		out[i] = ProcessorFacts{Socket: i, Cores: cores / sockets, Threads: threads / sockets,
			Architecture: arch, InstructionSet: isa, Model: model}
	}
	return out
}

// Link states of a network interface.
const (
	LinkUp   = "LinkUp"
	LinkDown = "LinkDown"
)

// NIC describes one network interface of the VM.
type NIC struct {
	Name    string
	Network string // the network the interface is attached to (same name in KubeVirt)
	Model   string
	// MAC is the address the guest uses: the running VMI's, else the one pinned in the spec.
	MAC string
	// PermanentMAC is the address pinned in the VM spec; "" when KubeVirt picks one per boot.
	PermanentMAC string
	LinkStatus   string
	// IPv4 and IPv6 are the addresses the guest agent reports.
	IPv4, IPv6 []string
}

// NICsOf lists the VM's interfaces in spec order. An interface whose removal was requested
// (state absent) is gone.
func NICsOf(m Machine) []NIC {
	d := domainOf(m.VM)
	vmi := live(m)
	var out []NIC
	for _, iface := range d.Devices.Interfaces {
		if iface.State == virtv1.InterfaceStateAbsent {
			continue
		}
		n := NIC{Name: iface.Name, Network: iface.Name, Model: iface.Model, PermanentMAC: NormalizeMAC(iface.MacAddress), LinkStatus: LinkDown}
		n.MAC = n.PermanentMAC
		st := interfaceStatus(vmi, iface.Name)
		if st != nil {
			if mac := NormalizeMAC(st.MAC); mac != "" {
				n.MAC = mac
			}
			if reportedByGuestAgent(st.InfoSource) {
				n.IPv4, n.IPv6 = splitIPs(st)
			}
		}
		if vmi != nil && vmi.Status.Phase == virtv1.Running && iface.State != virtv1.InterfaceStateLinkDown &&
			(st == nil || st.LinkState != "down") {
			n.LinkStatus = LinkUp
		}
		out = append(out, n)
	}
	return out
}

// infoSourceGuestAgent marks interface data the guest agent reported (KubeVirt writes
// infoSource as a comma-separated list: "domain, guest-agent, multus-status").
const infoSourceGuestAgent = "guest-agent"

func reportedByGuestAgent(infoSource string) bool {
	for _, s := range strings.Split(infoSource, ",") {
		if strings.TrimSpace(s) == infoSourceGuestAgent {
			return true
		}
	}
	return false
}

func interfaceStatus(vmi *virtv1.VirtualMachineInstance, name string) *virtv1.VirtualMachineInstanceNetworkInterface {
	if vmi == nil {
		return nil
	}
	for i := range vmi.Status.Interfaces {
		if vmi.Status.Interfaces[i].Name == name {
			return &vmi.Status.Interfaces[i]
		}
	}
	return nil
}

// NormalizeMAC renders a MAC address as lower-case colon-separated hex; "" for anything that
// is not a 48-bit MAC.
func NormalizeMAC(s string) string {
	hw, err := net.ParseMAC(strings.TrimSpace(s))
	if err != nil || len(hw) != 6 {
		return ""
	}
	return hw.String()
}

// splitIPs returns the interface's addresses by family, normalized; an IPv6 address keeps
// its prefix length when KubeVirt reports one ("fd10::2/64").
func splitIPs(st *virtv1.VirtualMachineInstanceNetworkInterface) (v4, v6 []string) {
	ips := st.IPs
	if len(ips) == 0 && st.IP != "" {
		ips = []string{st.IP}
	}
	for _, s := range ips {
		addr, prefix, hasPrefix := strings.Cut(strings.TrimSpace(s), "/")
		ip := net.ParseIP(addr)
		switch {
		case ip == nil:
		case ip.To4() != nil:
			v4 = append(v4, ip.String())
		case hasPrefix:
			v6 = append(v6, ip.String()+"/"+prefix)
		default:
			v6 = append(v6, ip.String())
		}
	}
	return v4, v6
}

// Kinds of disk devices.
const (
	KindDisk  = "disk"
	KindCDROM = "cdrom"
	KindLUN   = "lun"
)

// Where a disk's capacity came from, most trusted first.
const (
	CapacityFromDataVolume  = "DataVolume"         // the DataVolume's storage request
	CapacityFromTemplate    = "dataVolumeTemplate" // the VM's dataVolumeTemplates entry
	CapacityFromVMIRequest  = "VMI PVC request"    // the PVC request the running VMI reports
	CapacityFromVMICapacity = "VMI PVC capacity"   // the PVC capacity the running VMI reports
	CapacityFromVMIVolume   = "VMI volume size"    // the volume size the running VMI reports
	CapacityFromEmptyDisk   = "emptyDisk"          // emptyDisk.capacity
	CapacityFromHostDisk    = "hostDisk"           // hostDisk.capacity
	CapacityFromNowhere     = ""
)

const storageKey = corev1.ResourceStorage

// DiskFacts describes one disk device of the VM.
type DiskFacts struct {
	Name string
	Kind string // KindDisk, KindCDROM or KindLUN
	Bus  string // virtio, sata, scsi, usb; "" when unknown
	// Source is the kind of volume behind the disk (dataVolume, persistentVolumeClaim,
	// containerDisk, cloudInitNoCloud, ...); Claim names its DataVolume or PVC, if any.
	Source, Claim string
	// CapacityBytes is the size of the volume, nil when nothing states it; CapacitySource
	// says where it came from.
	CapacityBytes  *int64
	CapacitySource string
	// DataVolumePhase is the phase of the DataVolume behind the disk, if there is one.
	DataVolumePhase cdiv1.DataVolumePhase
}

// DataVolumeLookup finds a DataVolume of the machine's namespace by name.
type DataVolumeLookup func(name string) (*cdiv1.DataVolume, bool)

// DisksOf lists the VM's disk devices in spec order, without the virtual media CD-ROM
// (shown as VirtualMedia). dvs reads the DataVolume cache; PVCs are not cached, so a PVC's
// size comes from the DataVolume of the same name, a dataVolumeTemplates entry, or the running
// VMI's volume status.
func DisksOf(m Machine, dvs DataVolumeLookup) []DiskFacts {
	if m.VM.Spec.Template == nil {
		return nil
	}
	spec := m.VM.Spec.Template.Spec
	vmi := live(m)
	arch := architectureOf(m)
	var out []DiskFacts
	for _, d := range spec.Domain.Devices.Disks {
		if d.Name == MediaDevice {
			continue
		}
		f := DiskFacts{Name: d.Name}
		f.Kind, f.Bus = diskKindBus(d)
		if f.Bus == "" {
			f.Bus = vmiDiskBus(vmi, d.Name)
		}
		if f.Bus == "" {
			f.Bus = defaultBus(f.Kind, arch)
		}
		if vol := findVolume(spec.Volumes, d.Name); vol != nil {
			f.Source, f.Claim = volumeSource(vol)
			f.CapacityBytes, f.CapacitySource = capacityOf(m.VM, vmi, vol, f.Claim, dvs)
			if vol.DataVolume != nil && dvs != nil {
				if dv, ok := dvs(vol.DataVolume.Name); ok {
					f.DataVolumePhase = dv.Status.Phase
				}
			}
		}
		out = append(out, f)
	}
	return out
}

func diskKindBus(d virtv1.Disk) (kind, bus string) {
	switch {
	case d.CDRom != nil:
		return KindCDROM, string(d.CDRom.Bus)
	case d.LUN != nil:
		return KindLUN, string(d.LUN.Bus)
	case d.Disk != nil:
		return KindDisk, string(d.Disk.Bus)
	}
	return KindDisk, ""
}

func vmiDiskBus(vmi *virtv1.VirtualMachineInstance, name string) string {
	if vmi == nil {
		return ""
	}
	for _, d := range vmi.Spec.Domain.Devices.Disks {
		if d.Name == name {
			_, bus := diskKindBus(d)
			return bus
		}
	}
	return ""
}

// defaultBus is the bus KubeVirt's defaulting gives a disk without one: virtio for disks,
// scsi for LUNs, and sata for CD-ROMs (scsi on arm64, which has no SATA controller).
func defaultBus(kind, arch string) string {
	switch kind {
	case KindLUN:
		return string(virtv1.DiskBusSCSI)
	case KindCDROM:
		if arch == "arm64" || arch == "s390x" {
			return string(virtv1.DiskBusSCSI)
		}
		return string(virtv1.DiskBusSATA)
	}
	return string(virtv1.DiskBusVirtio)
}

func findVolume(vols []virtv1.Volume, name string) *virtv1.Volume {
	for i := range vols {
		if vols[i].Name == name {
			return &vols[i]
		}
	}
	return nil
}

// volumeSource names the kind of volume and the DataVolume or PVC behind it.
func volumeSource(v *virtv1.Volume) (source, claim string) {
	s := v.VolumeSource
	switch {
	case s.DataVolume != nil:
		return "dataVolume", s.DataVolume.Name
	case s.PersistentVolumeClaim != nil:
		return "persistentVolumeClaim", s.PersistentVolumeClaim.ClaimName
	case s.Ephemeral != nil && s.Ephemeral.PersistentVolumeClaim != nil:
		return "ephemeral", s.Ephemeral.PersistentVolumeClaim.ClaimName
	case s.ContainerDisk != nil:
		return "containerDisk", ""
	case s.EmptyDisk != nil:
		return "emptyDisk", ""
	case s.HostDisk != nil:
		return "hostDisk", ""
	case s.CloudInitNoCloud != nil:
		return "cloudInitNoCloud", ""
	case s.CloudInitConfigDrive != nil:
		return "cloudInitConfigDrive", ""
	case s.ConfigMap != nil:
		return "configMap", ""
	case s.Secret != nil:
		return "secret", ""
	case s.ServiceAccount != nil:
		return "serviceAccount", ""
	case s.DownwardAPI != nil:
		return "downwardAPI", ""
	case s.Sysprep != nil:
		return "sysprep", ""
	}
	return "", ""
}

// capacityOf finds the size of a volume. For a DataVolume or PVC (claim) it is the storage
// request of the DataVolume of that name, else of the dataVolumeTemplates entry, else what the
// running VMI reports for the PVC; emptyDisk and hostDisk state their capacity; for any other
// volume only a size the running VMI reports counts.
func capacityOf(vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance, vol *virtv1.Volume, claim string, dvs DataVolumeLookup) (*int64, string) {
	switch {
	case vol.EmptyDisk != nil:
		return quantityBytes(&vol.EmptyDisk.Capacity), CapacityFromEmptyDisk
	case vol.HostDisk != nil && !vol.HostDisk.Capacity.IsZero():
		return quantityBytes(&vol.HostDisk.Capacity), CapacityFromHostDisk
	}
	if claim != "" {
		if dvs != nil {
			if dv, ok := dvs(claim); ok {
				if n := dataVolumeRequest(dv.Spec); n != nil {
					return n, CapacityFromDataVolume
				}
			}
		}
		for _, t := range vm.Spec.DataVolumeTemplates {
			if t.Name == claim {
				if n := dataVolumeRequest(t.Spec); n != nil {
					return n, CapacityFromTemplate
				}
			}
		}
	}
	if st := volumeStatus(vmi, vol.Name); st != nil {
		if info := st.PersistentVolumeClaimInfo; info != nil {
			if q, ok := info.Requests[storageKey]; ok {
				return quantityBytes(&q), CapacityFromVMIRequest
			}
			if q, ok := info.Capacity[storageKey]; ok {
				return quantityBytes(&q), CapacityFromVMICapacity
			}
		}
		if st.Size > 0 {
			n := st.Size
			return &n, CapacityFromVMIVolume
		}
	}
	return nil, CapacityFromNowhere
}

func volumeStatus(vmi *virtv1.VirtualMachineInstance, name string) *virtv1.VolumeStatus {
	if vmi == nil {
		return nil
	}
	for i := range vmi.Status.VolumeStatus {
		if vmi.Status.VolumeStatus[i].Name == name {
			return &vmi.Status.VolumeStatus[i]
		}
	}
	return nil
}

// dataVolumeRequest is a DataVolume's storage request, from spec.storage or spec.pvc.
func dataVolumeRequest(s cdiv1.DataVolumeSpec) *int64 {
	if s.Storage != nil {
		if q, ok := s.Storage.Resources.Requests[storageKey]; ok {
			return quantityBytes(&q)
		}
	}
	if s.PVC != nil {
		if q, ok := s.PVC.Resources.Requests[storageKey]; ok {
			return quantityBytes(&q)
		}
	}
	return nil
}

func quantityBytes(q *resource.Quantity) *int64 {
	if q == nil || q.Sign() <= 0 {
		return nil
	}
	n := q.Value()
	return &n
}

// FirmwareFacts describes the VM's firmware.
type FirmwareFacts struct {
	Mode redfish.BootMode
	// SecureBoot is what the next boot uses: EFI with secureBoot set or left to its default
	// (true).
	SecureBoot bool
	// SecureBootCurrent is what the running VMI booted with; nil when none runs.
	SecureBootCurrent *bool
	// SMM is features.smm as the VM sets it; nil when the VM does not say.
	SMM *bool
	// PersistentNVRAM is efi.persistent (false by default); nil outside UEFI.
	PersistentNVRAM *bool
	// MachineType is the VM's machine type, else the one the running VMI reports; "" when
	// neither says.
	MachineType string
}

// FirmwareOf derives the firmware facts of a machine as its VM spec sets them: what its next
// boot uses. SecureBootCurrent tells what the running VMI booted with.
func FirmwareOf(m Machine) FirmwareFacts {
	f := domainFirmware(domainOf(m.VM))
	vmi := live(m)
	if vmi != nil {
		cur := SecureBootEnabled(vmi.Spec.Domain)
		f.SecureBootCurrent = &cur
	}
	if f.MachineType == "" {
		f.MachineType = vmiMachineType(vmi)
	}
	return f
}

// CurrentFirmwareOf is the firmware the machine runs with: the running VMI's, else (when it
// is off) the one its VM spec sets for the next boot.
func CurrentFirmwareOf(m Machine) FirmwareFacts {
	vmi := live(m)
	if vmi == nil {
		return FirmwareOf(m)
	}
	f := domainFirmware(vmi.Spec.Domain)
	cur := f.SecureBoot
	f.SecureBootCurrent = &cur
	if mt := vmiMachineType(vmi); mt != "" {
		f.MachineType = mt
	}
	return f
}

func vmiMachineType(vmi *virtv1.VirtualMachineInstance) string {
	switch {
	case vmi == nil:
	case vmi.Status.Machine != nil && vmi.Status.Machine.Type != "":
		return vmi.Status.Machine.Type
	case vmi.Spec.Domain.Machine != nil:
		return vmi.Spec.Domain.Machine.Type
	}
	return ""
}

// domainFirmware reads the firmware settings of a VM template's or a VMI's domain.
func domainFirmware(d virtv1.DomainSpec) FirmwareFacts {
	f := FirmwareFacts{Mode: redfish.BootLegacy, SecureBoot: SecureBootEnabled(d)}
	if d.Features != nil && d.Features.SMM != nil {
		on := d.Features.SMM.Enabled == nil || *d.Features.SMM.Enabled
		f.SMM = &on
	}
	if fw := d.Firmware; fw != nil && fw.Bootloader != nil && fw.Bootloader.EFI != nil {
		f.Mode = redfish.BootUEFI
		persistent := fw.Bootloader.EFI.Persistent != nil && *fw.Bootloader.EFI.Persistent
		f.PersistentNVRAM = &persistent
	}
	if d.Machine != nil {
		f.MachineType = d.Machine.Type
	}
	return f
}

// SecureBootEnabled reports whether a domain boots with UEFI Secure Boot: EFI firmware whose
// secureBoot is true or unset (KubeVirt's default is true).
func SecureBootEnabled(d virtv1.DomainSpec) bool {
	fw := d.Firmware
	if fw == nil || fw.Bootloader == nil || fw.Bootloader.EFI == nil {
		return false
	}
	return fw.Bootloader.EFI.SecureBoot == nil || *fw.Bootloader.EFI.SecureBoot
}

// SecureBootMode is the UEFI Secure Boot mode the firmware starts in: KubeVirt boots secure
// boot VMs from OVMF's secboot variable store, which has the platform key enrolled (User
// Mode), and other EFI VMs from the empty store (Setup Mode). "" outside UEFI.
func SecureBootMode(f FirmwareFacts) string {
	switch {
	case f.Mode != redfish.BootUEFI:
		return ""
	case f.SecureBoot:
		return "UserMode"
	}
	return "SetupMode"
}

// BiosVersion names the virtual firmware: KubeVirt's UEFI or BIOS firmware, with the machine
// type when known (it versions the virtual platform, e.g. pc-q35-rhel9.4.0).
func BiosVersion(f FirmwareFacts) string {
	v := "KubeVirt BIOS"
	if f.Mode == redfish.BootUEFI {
		v = "KubeVirt UEFI"
	}
	if f.MachineType != "" {
		v += " (" + f.MachineType + ")"
	}
	return v
}

// IndicatorLEDOf reads the stored indicator LED state; Off when none (or a bad one) is stored.
func IndicatorLEDOf(vm *virtv1.VirtualMachine) redfish.IndicatorLED {
	v := redfish.IndicatorLED(vm.Annotations[IndicatorAnnotation])
	if redfish.Contains(redfish.IndicatorLEDs, v) {
		return v
	}
	return redfish.LEDOff
}
