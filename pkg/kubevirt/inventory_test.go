package kubevirt

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	k8sv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	virtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

func gi(n int64) *int64 { v := n << 30; return &v }

func storageReq(q string) k8sv1.VolumeResourceRequirements {
	return k8sv1.VolumeResourceRequirements{Requests: k8sv1.ResourceList{k8sv1.ResourceStorage: resource.MustParse(q)}}
}

func TestArchitecture(t *testing.T) {
	tests := []struct{ in, arch, isa string }{
		{"amd64", "x86", "x86-64"},
		{"x86_64", "x86", "x86-64"},
		{"arm64", "ARM", "ARM-A64"},
		{"aarch64", "ARM", "ARM-A64"},
		{"ppc64le", "Power", "PowerISA"},
		{"riscv64", "RISC-V", "RV64"},
		{"s390x", "OEM", "OEM"},
		{"mips", "", ""},
		{"", "", ""},
	}
	for _, tc := range tests {
		arch, isa := Architecture(tc.in)
		assert.Equal(t, tc.arch, arch, tc.in)
		assert.Equal(t, tc.isa, isa, tc.in)
	}
}

func TestProcessorsOfArchitectureSource(t *testing.T) {
	vmi := func(arch string) *virtv1.VirtualMachineInstance {
		v := newVMI(virtv1.Running, "")
		v.Spec.Architecture = arch
		return v
	}
	tests := []struct {
		name    string
		vmArch  string
		vmi     *virtv1.VirtualMachineInstance
		arch    string
		isa     string
		comment string
	}{
		{"the VM's architecture", "arm64", vmi("amd64"), "ARM", "ARM-A64", "the VM wins over the VMI"},
		{"the VMI's when the VM names none", "", vmi("arm64"), "ARM", "ARM-A64", ""},
		{"KubeVirt's default otherwise", "", nil, "x86", "x86-64", ""},
		{"s390x", "s390x", nil, "OEM", "OEM", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vm := newVM(func(vm *virtv1.VirtualMachine) { vm.Spec.Template.Spec.Architecture = tc.vmArch })
			ps := ProcessorsOf(Machine{VM: vm, VMI: tc.vmi})
			require.Len(t, ps, 1)
			assert.Equal(t, tc.arch, ps[0].Architecture, tc.comment)
			assert.Equal(t, tc.isa, ps[0].InstructionSet)
		})
	}
}

func TestProcessorsOfTopology(t *testing.T) {
	res := func(q string) virtv1.ResourceRequirements {
		return virtv1.ResourceRequirements{Requests: k8sv1.ResourceList{k8sv1.ResourceCPU: resource.MustParse(q)}}
	}
	tests := []struct {
		name             string
		cpu              *virtv1.CPU
		res              virtv1.ResourceRequirements
		sockets          int
		cores, threads   int // per socket
		summaryCores     int
		summaryThreads   int
		summarySocketsOK int
	}{
		{"demo: 1 socket of 4 cores", &virtv1.CPU{Sockets: 1, Cores: 4, Threads: 1}, virtv1.ResourceRequirements{}, 1, 4, 4, 4, 4, 1},
		{"2 sockets, 4 cores, 2 threads", &virtv1.CPU{Sockets: 2, Cores: 4, Threads: 2}, virtv1.ResourceRequirements{}, 2, 4, 8, 8, 16, 2},
		{"cores only", &virtv1.CPU{Cores: 6}, virtv1.ResourceRequirements{}, 1, 6, 6, 6, 6, 1},
		{"threads only", &virtv1.CPU{Threads: 2}, virtv1.ResourceRequirements{}, 1, 1, 2, 1, 2, 1},
		{"no topology: sockets from the request", nil, res("3"), 3, 1, 1, 3, 3, 3},
		{"no topology: fractions round up", nil, res("1500m"), 2, 1, 1, 2, 2, 2},
		{"nothing at all: one CPU", nil, virtv1.ResourceRequirements{}, 1, 1, 1, 1, 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vm := newVM(func(vm *virtv1.VirtualMachine) {
				vm.Spec.Template.Spec.Domain.CPU, vm.Spec.Template.Spec.Domain.Resources = tc.cpu, tc.res
			})
			m := Machine{VM: vm}
			ps := ProcessorsOf(m)
			require.Len(t, ps, tc.sockets)
			for i, p := range ps {
				assert.Equal(t, i, p.Socket)
				assert.Equal(t, tc.cores, p.Cores, "cores per socket")
				assert.Equal(t, tc.threads, p.Threads, "threads per socket")
			}
			// Processors add up to ProcessorSummary.
			f := FactsOf(m)
			assert.Equal(t, tc.summarySocketsOK, f.Sockets)
			assert.Equal(t, tc.summaryCores, f.Cores)
			assert.Equal(t, tc.summaryThreads, f.Threads)
		})
	}
}

func TestProcessorsOfModel(t *testing.T) {
	running := newVMI(virtv1.Running, "")
	running.Spec.Domain.CPU = &virtv1.CPU{Model: "Skylake-Server-IBRS"}
	done := newVMI(virtv1.Succeeded, "")
	done.Spec.Domain.CPU = &virtv1.CPU{Model: "Skylake-Server-IBRS"}
	tests := []struct {
		name  string
		cpu   *virtv1.CPU
		vmi   *virtv1.VirtualMachineInstance
		model string
	}{
		{"the VM's model", &virtv1.CPU{Model: "host-passthrough"}, running, "host-passthrough"},
		{"the running VMI's model (cluster default applied)", nil, running, "Skylake-Server-IBRS"},
		{"a stopped VMI says nothing", nil, done, ""},
		{"unknown", nil, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vm := newVM(func(vm *virtv1.VirtualMachine) { vm.Spec.Template.Spec.Domain.CPU = tc.cpu })
			assert.Equal(t, tc.model, ProcessorsOf(Machine{VM: vm, VMI: tc.vmi})[0].Model)
		})
	}
}

func TestNormalizeMAC(t *testing.T) {
	for in, want := range map[string]string{
		"02:00:00:00:00:01":       "02:00:00:00:00:01",
		"DE-AD-00-00-BE-AF":       "de:ad:00:00:be:af",
		" de:ad:00:00:be:af ":     "de:ad:00:00:be:af",
		"":                        "",
		"garbage":                 "",
		"00:00:00:00:fe:80:00:00": "", // EUI-64 is no Ethernet MAC
	} {
		assert.Equal(t, want, NormalizeMAC(in), in)
	}
}

func TestNICsOfMACPrecedence(t *testing.T) {
	withStatus := func(phase virtv1.VirtualMachineInstancePhase, mac string) *virtv1.VirtualMachineInstance {
		v := newVMI(phase, "")
		v.Status.Interfaces = []virtv1.VirtualMachineInstanceNetworkInterface{{Name: "default", MAC: mac}}
		return v
	}
	tests := []struct {
		name           string
		specMAC        string
		vmi            *virtv1.VirtualMachineInstance
		mac, permanent string
		comment        string
	}{
		{"pinned, VM off", "02:00:00:00:00:01", nil, "02:00:00:00:00:01", "02:00:00:00:00:01", ""},
		{"pinned, VMI reports the same", "02:00:00:00:00:01", withStatus(virtv1.Running, "02:00:00:00:00:01"), "02:00:00:00:00:01", "02:00:00:00:00:01", ""},
		{"pinned in another spelling", "02-00-00-00-00-0A", nil, "02:00:00:00:00:0a", "02:00:00:00:00:0a", "normalized"},
		{"not pinned, VMI running", "", withStatus(virtv1.Running, "52:54:00:12:34:56"), "52:54:00:12:34:56", "", "a per-boot MAC is not permanent"},
		{"pinned changed while running", "02:00:00:00:00:02", withStatus(virtv1.Running, "02:00:00:00:00:01"), "02:00:00:00:00:01", "02:00:00:00:00:02", "the guest still uses the old one"},
		{"not pinned, VM off", "", nil, "", "", "unknown until KubeVirt assigns one"},
		{"not pinned, VMI stopped for good", "", withStatus(virtv1.Succeeded, "52:54:00:12:34:56"), "", "", "a finished VMI says nothing"},
		{"VMI reports garbage", "02:00:00:00:00:01", withStatus(virtv1.Running, "bogus"), "02:00:00:00:00:01", "02:00:00:00:00:01", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			i := iface("default", 0)
			i.MacAddress = tc.specMAC
			nics := NICsOf(Machine{VM: newVM(withInterfaces(i)), VMI: tc.vmi})
			require.Len(t, nics, 1)
			assert.Equal(t, tc.mac, nics[0].MAC, tc.comment)
			assert.Equal(t, tc.permanent, nics[0].PermanentMAC, tc.comment)
		})
	}
}

func TestNICsOfIPAddresses(t *testing.T) {
	tests := []struct {
		name   string
		st     virtv1.VirtualMachineInstanceNetworkInterface
		v4, v6 []string
	}{
		{"guest agent reports both families", virtv1.VirtualMachineInstanceNetworkInterface{
			InfoSource: "domain, guest-agent", IP: "10.0.2.2", IPs: []string{"10.0.2.2", "fd10:0:2::2", "fe80::1/64"}},
			[]string{"10.0.2.2"}, []string{"fd10:0:2::2", "fe80::1/64"}},
		{"guest agent alone", virtv1.VirtualMachineInstanceNetworkInterface{InfoSource: "guest-agent", IPs: []string{"192.168.1.10"}},
			[]string{"192.168.1.10"}, nil},
		{"only the first IP field", virtv1.VirtualMachineInstanceNetworkInterface{InfoSource: "guest-agent", IP: "192.168.1.11"},
			[]string{"192.168.1.11"}, nil},
		{"pod network IPs without the guest agent are not the guest's", virtv1.VirtualMachineInstanceNetworkInterface{
			InfoSource: "domain, multus-status", IPs: []string{"10.128.0.5"}}, nil, nil},
		{"no info source", virtv1.VirtualMachineInstanceNetworkInterface{IPs: []string{"10.128.0.5"}}, nil, nil},
		{"unparsable entries are dropped", virtv1.VirtualMachineInstanceNetworkInterface{InfoSource: "guest-agent", IPs: []string{"nope", "10.0.0.1"}},
			[]string{"10.0.0.1"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vmi := newVMI(virtv1.Running, "")
			tc.st.Name = "default"
			vmi.Status.Interfaces = []virtv1.VirtualMachineInstanceNetworkInterface{tc.st}
			nics := NICsOf(Machine{VM: newVM(withInterfaces(iface("default", 0))), VMI: vmi})
			require.Len(t, nics, 1)
			assert.Equal(t, tc.v4, nics[0].IPv4)
			assert.Equal(t, tc.v6, nics[0].IPv6)
		})
	}
}

func TestNICsOfLinkStatus(t *testing.T) {
	withLink := func(state string) *virtv1.VirtualMachineInstance {
		v := newVMI(virtv1.Running, "")
		v.Status.Interfaces = []virtv1.VirtualMachineInstanceNetworkInterface{{Name: "default", LinkState: state}}
		return v
	}
	tests := []struct {
		name  string
		state virtv1.InterfaceState
		vmi   *virtv1.VirtualMachineInstance
		want  string
	}{
		{"VM off", "", nil, LinkDown},
		{"VMI scheduling", "", newVMI(virtv1.Scheduling, ""), LinkDown},
		{"VMI running", "", newVMI(virtv1.Running, ""), LinkUp},
		{"VMI running, link reported up", "", withLink("up"), LinkUp},
		{"VMI running, link reported down", "", withLink("down"), LinkDown},
		{"link set down in the spec", virtv1.InterfaceStateLinkDown, newVMI(virtv1.Running, ""), LinkDown},
		{"VMI stopped", "", newVMI(virtv1.Succeeded, ""), LinkDown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			i := iface("default", 0)
			i.State = tc.state
			nics := NICsOf(Machine{VM: newVM(withInterfaces(i)), VMI: tc.vmi})
			require.Len(t, nics, 1)
			assert.Equal(t, tc.want, nics[0].LinkStatus)
		})
	}
}

func TestNICsOfOrderAndAbsent(t *testing.T) {
	gone := iface("gone", 0)
	gone.State = virtv1.InterfaceStateAbsent
	nics := NICsOf(Machine{VM: newVM(withInterfaces(iface("default", 0), gone, iface("storage", 0)))})
	require.Len(t, nics, 2, "an interface being removed is not listed")
	assert.Equal(t, "default", nics[0].Name)
	assert.Equal(t, "storage", nics[1].Name)
	assert.Empty(t, NICsOf(Machine{VM: &virtv1.VirtualMachine{}}), "a VM without template has no interfaces")
}

// dvCache is a DataVolume lookup over fixed objects.
func dvCache(dvs ...*cdiv1.DataVolume) DataVolumeLookup {
	return func(name string) (*cdiv1.DataVolume, bool) {
		for _, dv := range dvs {
			if dv.Name == name {
				return dv, true
			}
		}
		return nil, false
	}
}

func dataVolume(name string, spec cdiv1.DataVolumeSpec, phase cdiv1.DataVolumePhase) *cdiv1.DataVolume {
	return &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant-a"}, Spec: spec, Status: cdiv1.DataVolumeStatus{Phase: phase}}
}

func TestDisksOfCapacitySources(t *testing.T) {
	storageSpec := func(q string) cdiv1.DataVolumeSpec {
		return cdiv1.DataVolumeSpec{Storage: &cdiv1.StorageSpec{Resources: storageReq(q)}}
	}
	pvcSpec := func(q string) cdiv1.DataVolumeSpec {
		return cdiv1.DataVolumeSpec{PVC: &k8sv1.PersistentVolumeClaimSpec{Resources: storageReq(q)}}
	}
	dvVol := func(name string) virtv1.VolumeSource {
		return virtv1.VolumeSource{DataVolume: &virtv1.DataVolumeSource{Name: name}}
	}
	pvcVol := func(name string) virtv1.VolumeSource {
		return virtv1.VolumeSource{PersistentVolumeClaim: &virtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: k8sv1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}
	}
	vmiWith := func(st virtv1.VolumeStatus) *virtv1.VirtualMachineInstance {
		v := newVMI(virtv1.Running, "")
		st.Name = "root"
		v.Status.VolumeStatus = []virtv1.VolumeStatus{st}
		return v
	}
	tests := []struct {
		name      string
		src       virtv1.VolumeSource
		templates []virtv1.DataVolumeTemplateSpec
		dvs       []*cdiv1.DataVolume
		vmi       *virtv1.VirtualMachineInstance
		want      *int64
		from      string
	}{
		{"DataVolume spec.storage", dvVol("root-dv"), nil,
			[]*cdiv1.DataVolume{dataVolume("root-dv", storageSpec("20Gi"), cdiv1.Succeeded)}, nil, gi(20), CapacityFromDataVolume},
		{"DataVolume spec.pvc", dvVol("root-dv"), nil,
			[]*cdiv1.DataVolume{dataVolume("root-dv", pvcSpec("30Gi"), cdiv1.Succeeded)}, nil, gi(30), CapacityFromDataVolume},
		{"the DataVolume wins over its template", dvVol("root-dv"),
			[]virtv1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: "root-dv"}, Spec: storageSpec("10Gi")}},
			[]*cdiv1.DataVolume{dataVolume("root-dv", storageSpec("40Gi"), cdiv1.Succeeded)}, nil, gi(40), CapacityFromDataVolume},
		{"dataVolumeTemplate before the DataVolume exists", dvVol("root-dv"),
			[]virtv1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: "root-dv"}, Spec: storageSpec("120Gi")}},
			nil, nil, gi(120), CapacityFromTemplate},
		{"dataVolumeTemplate with spec.pvc", dvVol("root-dv"),
			[]virtv1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: "root-dv"}, Spec: pvcSpec("8Gi")}},
			nil, nil, gi(8), CapacityFromTemplate},
		{"a DataVolume without a size (clone) falls through to the template", dvVol("root-dv"),
			[]virtv1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: "root-dv"}, Spec: storageSpec("16Gi")}},
			[]*cdiv1.DataVolume{dataVolume("root-dv", cdiv1.DataVolumeSpec{Storage: &cdiv1.StorageSpec{}}, cdiv1.Succeeded)}, nil, gi(16), CapacityFromTemplate},
		{"a PVC made by a DataVolume of the same name", pvcVol("root-pvc"), nil,
			[]*cdiv1.DataVolume{dataVolume("root-pvc", storageSpec("50Gi"), cdiv1.Succeeded)}, nil, gi(50), CapacityFromDataVolume},
		{"a plain PVC: the running VMI's PVC request", pvcVol("root-pvc"), nil, nil,
			vmiWith(virtv1.VolumeStatus{PersistentVolumeClaimInfo: &virtv1.PersistentVolumeClaimInfo{
				Requests: k8sv1.ResourceList{k8sv1.ResourceStorage: resource.MustParse("60Gi")},
				Capacity: k8sv1.ResourceList{k8sv1.ResourceStorage: resource.MustParse("64Gi")}}}),
			gi(60), CapacityFromVMIRequest},
		{"a plain PVC: the running VMI's PVC capacity", pvcVol("root-pvc"), nil, nil,
			vmiWith(virtv1.VolumeStatus{PersistentVolumeClaimInfo: &virtv1.PersistentVolumeClaimInfo{
				Capacity: k8sv1.ResourceList{k8sv1.ResourceStorage: resource.MustParse("64Gi")}}}),
			gi(64), CapacityFromVMICapacity},
		{"a plain PVC, VM off: unknown", pvcVol("root-pvc"), nil, nil, nil, nil, CapacityFromNowhere},
		{"ephemeral over a PVC", virtv1.VolumeSource{Ephemeral: &virtv1.EphemeralVolumeSource{
			PersistentVolumeClaim: &k8sv1.PersistentVolumeClaimVolumeSource{ClaimName: "golden"}}}, nil,
			[]*cdiv1.DataVolume{dataVolume("golden", storageSpec("12Gi"), cdiv1.Succeeded)}, nil, gi(12), CapacityFromDataVolume},
		{"emptyDisk", virtv1.VolumeSource{EmptyDisk: &virtv1.EmptyDiskSource{Capacity: resource.MustParse("5Gi")}}, nil, nil, nil, gi(5), CapacityFromEmptyDisk},
		{"hostDisk with a capacity", virtv1.VolumeSource{HostDisk: &virtv1.HostDisk{Path: "/d.img", Type: virtv1.HostDiskExistsOrCreate,
			Capacity: resource.MustParse("7Gi")}}, nil, nil, nil, gi(7), CapacityFromHostDisk},
		{"hostDisk without one", virtv1.VolumeSource{HostDisk: &virtv1.HostDisk{Path: "/d.img", Type: virtv1.HostDiskExists}}, nil, nil, nil, nil, CapacityFromNowhere},
		{"containerDisk: unknown", virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "quay.io/x"}}, nil, nil, nil, nil, CapacityFromNowhere},
		{"containerDisk: the size the running VMI reports", virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "quay.io/x"}},
			nil, nil, vmiWith(virtv1.VolumeStatus{Size: 10 << 30}), gi(10), CapacityFromVMIVolume},
		{"cloud-init: unknown", virtv1.VolumeSource{CloudInitNoCloud: &virtv1.CloudInitNoCloudSource{UserData: "#cloud-config"}}, nil, nil, nil, nil, CapacityFromNowhere},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vm := newVM(withDisks(disk("root", 1)), func(vm *virtv1.VirtualMachine) {
				vm.Spec.Template.Spec.Volumes = []virtv1.Volume{{Name: "root", VolumeSource: tc.src}}
				vm.Spec.DataVolumeTemplates = tc.templates
			})
			disks := DisksOf(Machine{VM: vm, VMI: tc.vmi}, dvCache(tc.dvs...))
			require.Len(t, disks, 1)
			assert.Equal(t, tc.want, disks[0].CapacityBytes)
			assert.Equal(t, tc.from, disks[0].CapacitySource)
		})
	}
}

func TestDisksOfKindsBusesAndMedia(t *testing.T) {
	lun := virtv1.Disk{Name: "lun", DiskDevice: virtv1.DiskDevice{LUN: &virtv1.LunTarget{}}}
	plain := virtv1.Disk{Name: "nobus"}
	cd := virtv1.Disk{Name: "cd", DiskDevice: virtv1.DiskDevice{CDRom: &virtv1.CDRomTarget{}}}
	media := cdrom(MediaDevice, 0)
	vm := newVM(withDisks(disk("root", 1), cdrom("installer", 0), lun, plain, cd, media), func(vm *virtv1.VirtualMachine) {
		vm.Spec.Template.Spec.Volumes = []virtv1.Volume{
			{Name: "root", VolumeSource: virtv1.VolumeSource{DataVolume: &virtv1.DataVolumeSource{Name: "root-dv"}}},
			{Name: "installer", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "quay.io/iso"}}},
		}
	})
	vmi := newVMI(virtv1.Running, "")
	vmi.Spec.Domain.Devices.Disks = []virtv1.Disk{{Name: "nobus", DiskDevice: virtv1.DiskDevice{Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusSCSI}}}}
	failed := dataVolume("root-dv", cdiv1.DataVolumeSpec{}, cdiv1.Failed)

	disks := DisksOf(Machine{VM: vm, VMI: vmi}, dvCache(failed))
	got := map[string]DiskFacts{}
	var order []string
	for _, d := range disks {
		got[d.Name] = d
		order = append(order, d.Name)
	}
	assert.Equal(t, []string{"root", "installer", "lun", "nobus", "cd"}, order, "spec order, the virtual media CD-ROM left out")
	assert.Equal(t, DiskFacts{Name: "root", Kind: KindDisk, Bus: "virtio", Source: "dataVolume", Claim: "root-dv", DataVolumePhase: cdiv1.Failed}, got["root"])
	assert.Equal(t, KindCDROM, got["installer"].Kind)
	assert.Equal(t, "sata", got["installer"].Bus)
	assert.Equal(t, "containerDisk", got["installer"].Source)
	assert.Equal(t, KindLUN, got["lun"].Kind)
	assert.Equal(t, "scsi", got["lun"].Bus, "KubeVirt's default LUN bus")
	assert.Equal(t, "scsi", got["nobus"].Bus, "the bus the running VMI was given")
	assert.Equal(t, "sata", got["cd"].Bus, "KubeVirt's default CD-ROM bus on amd64")

	arm := vm.DeepCopy()
	arm.Spec.Template.Spec.Architecture = "arm64"
	for _, d := range DisksOf(Machine{VM: arm}, nil) {
		if d.Name == "cd" {
			assert.Equal(t, "scsi", d.Bus, "arm64 has no SATA")
		}
		if d.Name == "nobus" {
			assert.Equal(t, "virtio", d.Bus, "KubeVirt's default disk bus")
		}
	}
	assert.Empty(t, DisksOf(Machine{VM: &virtv1.VirtualMachine{}}, nil))
}

func TestFirmwareOf(t *testing.T) {
	efi := func(secure *bool, persistent *bool) *virtv1.Firmware {
		return &virtv1.Firmware{Bootloader: &virtv1.Bootloader{EFI: &virtv1.EFI{SecureBoot: secure, Persistent: persistent}}}
	}
	bios := &virtv1.Firmware{Bootloader: &virtv1.Bootloader{BIOS: &virtv1.BIOS{}}}
	running := func(fw *virtv1.Firmware, machine string) *virtv1.VirtualMachineInstance {
		v := newVMI(virtv1.Running, "")
		v.Spec.Domain.Firmware = fw
		if machine != "" {
			v.Status.Machine = &virtv1.Machine{Type: machine}
		}
		return v
	}
	tests := []struct {
		name       string
		fw         *virtv1.Firmware
		features   *virtv1.Features
		machine    string
		vmi        *virtv1.VirtualMachineInstance
		mode       redfish.BootMode
		secure     bool
		current    *bool
		smm        *bool
		persistent *bool
		machineOut string
		sbMode     string
		version    string
	}{
		{"no firmware: BIOS", nil, nil, "", nil, redfish.BootLegacy, false, nil, nil, nil, "", "", "KubeVirt BIOS"},
		{"explicit BIOS", bios, nil, "q35", nil, redfish.BootLegacy, false, nil, nil, nil, "q35", "", "KubeVirt BIOS (q35)"},
		{"EFI, secure boot off (demo)", efi(boolPtr(false), nil), nil, "", nil, redfish.BootUEFI, false, nil, nil, boolPtr(false), "", "SetupMode", "KubeVirt UEFI"},
		{"EFI, secure boot by default", efi(nil, boolPtr(true)), &virtv1.Features{SMM: &virtv1.FeatureState{}}, "", nil,
			redfish.BootUEFI, true, nil, boolPtr(true), boolPtr(true), "", "UserMode", "KubeVirt UEFI"},
		{"EFI, secure boot on, running with it", efi(boolPtr(true), nil), &virtv1.Features{SMM: &virtv1.FeatureState{Enabled: boolPtr(true)}}, "",
			running(efi(boolPtr(true), nil), "pc-q35-rhel9.4.0"), redfish.BootUEFI, true, boolPtr(true), boolPtr(true), boolPtr(false), "pc-q35-rhel9.4.0", "UserMode", "KubeVirt UEFI (pc-q35-rhel9.4.0)"},
		{"secure boot turned on while running without it", efi(boolPtr(true), nil), nil, "q35",
			running(efi(boolPtr(false), nil), "pc-q35-rhel9.4.0"), redfish.BootUEFI, true, boolPtr(false), nil, boolPtr(false), "q35", "UserMode", "KubeVirt UEFI (q35)"},
		{"SMM off", bios, &virtv1.Features{SMM: &virtv1.FeatureState{Enabled: boolPtr(false)}}, "", nil, redfish.BootLegacy, false, nil, boolPtr(false), nil, "", "", "KubeVirt BIOS"},
		{"a finished VMI says nothing", efi(boolPtr(false), nil), nil, "", func() *virtv1.VirtualMachineInstance {
			v := running(efi(boolPtr(true), nil), "pc-q35-9.0")
			v.Status.Phase = virtv1.Failed
			return v
		}(), redfish.BootUEFI, false, nil, nil, boolPtr(false), "", "SetupMode", "KubeVirt UEFI"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vm := newVM(func(vm *virtv1.VirtualMachine) {
				d := &vm.Spec.Template.Spec.Domain
				d.Firmware, d.Features = tc.fw, tc.features
				if tc.machine != "" {
					d.Machine = &virtv1.Machine{Type: tc.machine}
				}
			})
			f := FirmwareOf(Machine{VM: vm, VMI: tc.vmi})
			assert.Equal(t, tc.mode, f.Mode)
			assert.Equal(t, tc.secure, f.SecureBoot, "secure boot")
			assert.Equal(t, tc.current, f.SecureBootCurrent, "secure boot of the current boot")
			assert.Equal(t, tc.smm, f.SMM, "SMM")
			assert.Equal(t, tc.persistent, f.PersistentNVRAM, "persistent NVRAM")
			assert.Equal(t, tc.machineOut, f.MachineType)
			assert.Equal(t, tc.sbMode, SecureBootMode(f))
			assert.Equal(t, tc.version, BiosVersion(f))
		})
	}
}

func TestIndicatorLEDOf(t *testing.T) {
	for value, want := range map[string]redfish.IndicatorLED{
		"": redfish.LEDOff, "Lit": redfish.LEDLit, "Blinking": redfish.LEDBlinking, "Off": redfish.LEDOff, "lit": redfish.LEDOff, "On": redfish.LEDOff,
	} {
		vm := newVM()
		if value != "" {
			vm.Annotations = map[string]string{IndicatorAnnotation: value}
		}
		assert.Equal(t, want, IndicatorLEDOf(vm), value)
	}
}

func TestSetSecureBootPatch(t *testing.T) {
	efi := func(secure *bool) *virtv1.Firmware {
		return &virtv1.Firmware{Bootloader: &virtv1.Bootloader{EFI: &virtv1.EFI{SecureBoot: secure}}}
	}
	tests := []struct {
		name     string
		fw       *virtv1.Firmware
		features *virtv1.Features
		enable   bool
		ops      string
	}{
		{"on: secureBoot and the SMM feature", efi(boolPtr(false)), nil, true,
			`[{"op":"add","path":"/spec/template/spec/domain/firmware/bootloader/efi/secureBoot","value":true},` +
				`{"op":"add","path":"/spec/template/spec/domain/features","value":{"smm":{"enabled":true}}}]`},
		{"on: features exist without smm", efi(boolPtr(false)), &virtv1.Features{ACPI: virtv1.FeatureState{}}, true,
			`[{"op":"add","path":"/spec/template/spec/domain/firmware/bootloader/efi/secureBoot","value":true},` +
				`{"op":"add","path":"/spec/template/spec/domain/features/smm","value":{"enabled":true}}]`},
		{"on: smm disabled", efi(boolPtr(false)), &virtv1.Features{SMM: &virtv1.FeatureState{Enabled: boolPtr(false)}}, true,
			`[{"op":"add","path":"/spec/template/spec/domain/firmware/bootloader/efi/secureBoot","value":true},` +
				`{"op":"add","path":"/spec/template/spec/domain/features/smm/enabled","value":true}]`},
		{"on: smm already on", efi(boolPtr(false)), &virtv1.Features{SMM: &virtv1.FeatureState{}}, true,
			`[{"op":"add","path":"/spec/template/spec/domain/firmware/bootloader/efi/secureBoot","value":true}]`},
		{"on: already on by default", efi(nil), &virtv1.Features{SMM: &virtv1.FeatureState{}}, true, `[]`},
		{"off: secureBoot false, SMM left alone", efi(nil), &virtv1.Features{SMM: &virtv1.FeatureState{}}, false,
			`[{"op":"add","path":"/spec/template/spec/domain/firmware/bootloader/efi/secureBoot","value":false}]`},
		{"off: already off", efi(boolPtr(false)), nil, false, `[]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vm := newVM(func(vm *virtv1.VirtualMachine) {
				vm.Spec.Template.Spec.Domain.Firmware, vm.Spec.Template.Spec.Domain.Features = tc.fw, tc.features
			})
			var p jsonPatch
			p.setSecureBoot(vm, tc.enable)
			if p == nil {
				p = jsonPatch{}
			}
			assert.JSONEq(t, tc.ops, string(p.Bytes()))

			full := newVMPatch(vm)
			full.setSecureBoot(vm, tc.enable)
			next := applyPatch(t, vm, full)
			d := next.Spec.Template.Spec.Domain
			assert.Equal(t, tc.enable, SecureBootEnabled(d))
			if tc.enable {
				require.NotNil(t, d.Features)
				require.NotNil(t, d.Features.SMM, "KubeVirt refuses secure boot without SMM")
				assert.True(t, d.Features.SMM.Enabled == nil || *d.Features.SMM.Enabled)
			}
			assert.Equal(t, FirmwareMode(vm), FirmwareMode(next), "the boot mode stays")
		})
	}
}

func TestSetIndicatorLEDPatch(t *testing.T) {
	tests := []struct {
		name string
		ann  map[string]string
		led  redfish.IndicatorLED
		ops  string
	}{
		{"Lit on a VM without annotations", nil, redfish.LEDLit,
			`[{"op":"add","path":"/metadata/annotations","value":{}},` +
				`{"op":"add","path":"/metadata/annotations/redfish.kubevirt.io~1indicator-led","value":"Lit"}]`},
		{"Blinking over Lit", map[string]string{IndicatorAnnotation: "Lit"}, redfish.LEDBlinking,
			`[{"op":"add","path":"/metadata/annotations/redfish.kubevirt.io~1indicator-led","value":"Blinking"}]`},
		{"Off when nothing is stored: no change", map[string]string{"x": "y"}, redfish.LEDOff, `[]`},
		{"Off over Lit", map[string]string{IndicatorAnnotation: "Lit"}, redfish.LEDOff,
			`[{"op":"add","path":"/metadata/annotations/redfish.kubevirt.io~1indicator-led","value":"Off"}]`},
		{"the same state: no change", map[string]string{IndicatorAnnotation: "Blinking"}, redfish.LEDBlinking, `[]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vm := newVM(withAnnotations(tc.ann))
			p := jsonPatch{}
			p.setIndicatorLED(vm, tc.led)
			assert.JSONEq(t, tc.ops, string(p.Bytes()))
			full := newVMPatch(vm)
			full.setIndicatorLED(vm, tc.led)
			assert.Equal(t, tc.led, IndicatorLEDOf(applyPatch(t, vm, full)))
		})
	}
}

func TestCurrentFirmwareOf(t *testing.T) {
	efi := func(secure bool) *virtv1.Firmware {
		return &virtv1.Firmware{Bootloader: &virtv1.Bootloader{EFI: &virtv1.EFI{SecureBoot: &secure}}}
	}
	vm := newVM(func(vm *virtv1.VirtualMachine) {
		vm.Spec.Template.Spec.Domain.Firmware = &virtv1.Firmware{Bootloader: &virtv1.Bootloader{BIOS: &virtv1.BIOS{}}}
	})
	// Off: what the VM sets.
	f := CurrentFirmwareOf(Machine{VM: vm})
	assert.Equal(t, redfish.BootLegacy, f.Mode)
	assert.Nil(t, f.SecureBootCurrent)

	// Running: what the VMI booted with, though the VM now says otherwise.
	vmi := newVMI(virtv1.Running, "")
	vmi.Spec.Domain.Firmware = efi(true)
	vmi.Status.Machine = &virtv1.Machine{Type: "pc-q35-rhel9.6.0"}
	f = CurrentFirmwareOf(Machine{VM: vm, VMI: vmi})
	assert.Equal(t, redfish.BootUEFI, f.Mode)
	assert.True(t, f.SecureBoot)
	assert.Equal(t, boolPtr(true), f.SecureBootCurrent)
	assert.Equal(t, "pc-q35-rhel9.6.0", f.MachineType)
	assert.Equal(t, "KubeVirt UEFI (pc-q35-rhel9.6.0)", BiosVersion(f))
	next := FirmwareOf(Machine{VM: vm, VMI: vmi})
	assert.Equal(t, redfish.BootLegacy, next.Mode, "the next start")
	assert.Equal(t, boolPtr(true), next.SecureBootCurrent)

	// A finished VMI counts as off.
	vmi.Status.Phase = virtv1.Succeeded
	assert.Equal(t, redfish.BootLegacy, CurrentFirmwareOf(Machine{VM: vm, VMI: vmi}).Mode)
}
