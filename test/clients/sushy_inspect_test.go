package clients

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim"
)

// inspectSteps are the steps of sushy_ironic.py --flow inspect, in order.
var inspectSteps = []string{
	"connect", "get_system",
	// Ironic's out-of-band inspection.
	"inspect_memory", "inspect_processors", "inspect_local_gb", "inspect_nics", "inspect_system", "inspect_firmware",
	// metal3's UEFISecureBoot through Ironic's set_secure_boot_state, while off and while on.
	"secure_boot_read", "set_boot_mode_uefi", "secure_boot_on", "secure_boot_off",
	"power_on", "secure_boot_on_while_on", "reboot_into_secure_boot", "secure_boot_off_while_on",
	"reboot_out_of_secure_boot", "force_off",
	"close",
}

// inspectResult is what the Go test checks of the inspect flow's step lines.
type inspectResult struct {
	Memory struct {
		SizeGiB  float64 `json:"size_gib"`
		MemoryMB float64 `json:"memory_mb"`
	}
	Processors struct {
		Count        int    `json:"count"`
		Architecture string `json:"architecture"`
		CPUArch      string `json:"cpu_arch"`
		Members      []struct {
			TotalThreads          int     `json:"total_threads"`
			ProcessorArchitecture string  `json:"processor_architecture"`
			InstructionSet        string  `json:"instruction_set"`
			Model                 *string `json:"model"`
		} `json:"members"`
	}
	LocalGB struct {
		SimpleStorage []int64 `json:"simple_storage_sizes"`
		Volumes       []int64 `json:"volume_sizes"`
		Drives        []int64 `json:"drive_sizes"`
		LocalGB       int     `json:"local_gb"`
		Disks         []struct {
			Name string `json:"name"`
			Size int64  `json:"size"`
		} `json:"inventory_disks"`
	}
	NICs struct {
		Summary map[string]string `json:"summary"`
		Enabled []string          `json:"enabled_macs"`
	}
	System struct {
		BootMode     string `json:"boot_mode"`
		Manufacturer string `json:"manufacturer"`
		Model        string `json:"model"`
		SerialNumber string `json:"serial_number"`
		UUID         string `json:"uuid"`
	}
	Firmware struct {
		BiosVersion     string            `json:"bios_version"`
		BiosAttributes  map[string]string `json:"bios_attributes"`
		ManagerFirmware string            `json:"manager_firmware_version"`
		IndicatorLED    string            `json:"indicator_led"`
		ChassisUUID     string            `json:"chassis_uuid"`
	}
}

// TestSushyInspection runs Ironic's out-of-band inspection through the real sushy and checks
// what Ironic would record against the demo VMs' specs: memory_mb, cpus and cpu_arch, local_gb
// (the 120 GiB root disk of the DataVolume template: 119 the way Ironic computes it), the
// ports' MACs (the pinned MACs, Enabled), boot mode, vendor data and firmware versions; then
// metal3's UEFISecureBoot on and off. Once for an explicit system, once for the only system
// of a single-tenant user.
func TestSushyInspection(t *testing.T) {
	t.Parallel()
	version := requireSushy(t)
	t.Logf("sushy %s (%s)", version, python())
	st := startServer(t)

	vms := map[string]*virtv1.VirtualMachine{}
	for _, vm := range sim.DemoVMs() {
		vms[vm.Namespace+"."+vm.Name] = vm
	}
	for _, c := range []struct{ name, user, system, id string }{
		{"explicit system", st.User, "/redfish/v1/Systems/tenant-a.cp-1", "tenant-a.cp-1"},
		{"only system of the user", st.SingleUser, "/redfish/v1/", st.SingleSystem},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			res := runSushy(t, st, sushyRun{user: c.user, system: c.system, steps: inspectSteps, args: []string{"--flow", "inspect"}})
			checkInspection(t, res, vms[c.id])
		})
	}
}

func checkInspection(t *testing.T, res *scriptLine, vm *virtv1.VirtualMachine) {
	t.Helper()
	var got inspectResult
	for step, into := range map[string]any{"inspect_memory": &got.Memory, "inspect_processors": &got.Processors,
		"inspect_local_gb": &got.LocalGB, "inspect_nics": &got.NICs, "inspect_system": &got.System, "inspect_firmware": &got.Firmware} {
		if err := json.Unmarshal(res.Steps[step], into); err != nil {
			t.Fatalf("step %s: %v: %s", step, err, res.Steps[step])
		}
	}
	spec := vm.Spec.Template.Spec.Domain
	wantMAC := strings.ToLower(spec.Devices.Interfaces[0].MacAddress)
	wantThreads := int(spec.CPU.Sockets * spec.CPU.Cores * spec.CPU.Threads)
	wantGiB := float64(spec.Memory.Guest.Value() >> 30)
	rootDisk := vm.Spec.DataVolumeTemplates[0].Spec.Storage.Resources.Requests.Storage().Value()

	if got.Memory.SizeGiB != wantGiB || got.Memory.MemoryMB != wantGiB*1024 {
		t.Errorf("memory: %v GiB, memory_mb %v; want %v GiB", got.Memory.SizeGiB, got.Memory.MemoryMB, wantGiB)
	}
	p := got.Processors
	if p.Count != wantThreads || p.Architecture != "x86" || p.CPUArch != "x86_64" || len(p.Members) != int(spec.CPU.Sockets) {
		t.Errorf("processors: count %d architecture %q cpu_arch %q, %d members; want %d threads in %d sockets, x86",
			p.Count, p.Architecture, p.CPUArch, len(p.Members), wantThreads, spec.CPU.Sockets)
	}
	for _, m := range p.Members {
		// The demo VMs name no CPU model, so Processor.Model is absent (none is made up).
		if m.TotalThreads == 0 || m.ProcessorArchitecture != "x86" || m.InstructionSet != "x86-64" || (m.Model != nil) != (spec.CPU.Model != "") {
			t.Errorf("processor member %+v (VM CPU model %q)", m, spec.CPU.Model)
		}
	}
	// Ironic: the smallest disk of at least 4 GiB, in GiB, less one.
	l := got.LocalGB
	if l.LocalGB != 119 && l.LocalGB != 120 {
		t.Errorf("local_gb %d, want 119 (or 120) from the %d-byte root disk", l.LocalGB, rootDisk)
	}
	for name, sizes := range map[string][]int64{"SimpleStorage": l.SimpleStorage, "Storage volumes": l.Volumes, "Storage drives": l.Drives} {
		if !slices.Equal(sizes, []int64{rootDisk}) {
			t.Errorf("%s sizes %v, want [%d]", name, sizes, rootDisk)
		}
	}
	if len(l.Disks) != 1 || l.Disks[0].Name != "rootdisk" || l.Disks[0].Size != rootDisk {
		t.Errorf("inventory disks %+v", l.Disks)
	}
	if len(got.NICs.Summary) != 1 || got.NICs.Summary[wantMAC] != "Enabled" || !slices.Equal(got.NICs.Enabled, []string{wantMAC}) {
		t.Errorf("NICs: summary %v, enabled %v; want %s Enabled", got.NICs.Summary, got.NICs.Enabled, wantMAC)
	}
	s := got.System
	if s.BootMode != "uefi" || s.Manufacturer != "KubeVirt" || s.Model == "" || s.SerialNumber == "" || s.UUID != string(spec.Firmware.UUID) {
		t.Errorf("system: %+v; want UUID %s", s, spec.Firmware.UUID)
	}
	f := got.Firmware
	if f.BiosVersion == "" || f.BiosAttributes["SecureBoot"] == "" || f.ManagerFirmware == "" || f.ChassisUUID != s.UUID ||
		!slices.Contains([]string{"Off", "Lit", "Blinking"}, f.IndicatorLED) {
		t.Errorf("firmware: %+v", f)
	}
	// Secure boot changes show at once (Ironic would otherwise reboot the node to apply them).
	for _, step := range []string{"secure_boot_on", "secure_boot_off", "secure_boot_on_while_on", "secure_boot_off_while_on"} {
		var sb struct {
			ShownAtOnce bool `json:"shown_at_once"`
			Rebooted    bool `json:"rebooted"`
		}
		if err := json.Unmarshal(res.Steps[step], &sb); err != nil || !sb.ShownAtOnce || sb.Rebooted {
			t.Errorf("%s: %s (%v): the change must show at once", step, res.Steps[step], err)
		}
	}
	t.Logf("Ironic would record: memory_mb %v, cpus %d, cpu_arch %s, local_gb %d, ports %v, boot_mode %s",
		got.Memory.MemoryMB, p.Count, p.CPUArch, l.LocalGB, got.NICs.Enabled, s.BootMode)
}
