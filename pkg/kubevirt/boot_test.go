package kubevirt

import (
	"encoding/json"
	"fmt"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

func targetPtr(t redfish.BootTarget) *redfish.BootTarget    { return &t }
func enabledPtr(e redfish.BootEnabled) *redfish.BootEnabled { return &e }
func modePtr(m redfish.BootMode) *redfish.BootMode          { return &m }

// applyPatch applies a patch to a VM the way the apiserver would (RFC 6902 on its JSON).
func applyPatch(t *testing.T, vm *virtv1.VirtualMachine, p jsonPatch) *virtv1.VirtualMachine {
	t.Helper()
	raw, err := json.Marshal(vm)
	require.NoError(t, err)
	decoded, err := jsonpatch.DecodePatch(p.Bytes())
	require.NoError(t, err, "patch %s", p.Bytes())
	out, err := decoded.Apply(raw)
	require.NoError(t, err, "patch %s", p.Bytes())
	var next virtv1.VirtualMachine
	require.NoError(t, json.Unmarshal(out, &next))
	return &next
}

// applyBootChange writes a BootChange to a VM through the patch builders.
func applyBootChange(t *testing.T, vm *virtv1.VirtualMachine, c BootChange) *virtv1.VirtualMachine {
	t.Helper()
	p := newVMPatch(vm)
	p.applyBoot(vm, c)
	return applyPatch(t, vm, p)
}

// ordersOf reads the boot order of every device of a VM (0 for none).
func ordersOf(vm *virtv1.VirtualMachine) map[string]uint {
	out := map[string]uint{}
	for _, d := range devices(vm) {
		out[d.key] = d.order
	}
	return out
}

func stateOf(t *testing.T, raw string) bootState {
	t.Helper()
	var s bootState
	require.NoError(t, json.Unmarshal([]byte(raw), &s), raw)
	return s
}

// installVM has a root disk booting first, an installer CD-ROM, a data disk and two NICs, one
// of which boots second.
func installVM() *virtv1.VirtualMachine {
	return newVM(withRunStrategy(virtv1.RunStrategyHalted),
		withDisks(disk("rootdisk", 2), cdrom("installer", 0), disk("data", 0)),
		withInterfaces(iface("default", 1), iface("pxe", 0)))
}

func TestDevices(t *testing.T) {
	vm := installVM()
	devs := devices(vm)
	require.Len(t, devs, 5)
	assert.Equal(t, []device{
		{key: "disk/rootdisk", kind: kindDisk, index: 0, order: 2},
		{key: "disk/installer", kind: kindCdrom, index: 1, order: 0},
		{key: "disk/data", kind: kindDisk, index: 2, order: 0},
		{key: "iface/default", kind: kindInterface, index: 0, order: 1},
		{key: "iface/pxe", kind: kindInterface, index: 1, order: 0},
	}, devs)
	assert.Nil(t, devices(&virtv1.VirtualMachine{}), "a VM without template has no devices")
	assert.Equal(t, map[string]uint{"disk/rootdisk": 2, "iface/default": 1}, originalOrders(devs))
}

func TestComputeOrders(t *testing.T) {
	devs := devices(installVM())
	original := originalOrders(devs)
	tests := []struct {
		target redfish.BootTarget
		want   map[string]uint
	}{
		{redfish.BootNone, map[string]uint{"disk/rootdisk": 2, "disk/installer": 0, "disk/data": 0, "iface/default": 1, "iface/pxe": 0}},
		// Target devices first (ranked by original order, then spec order), then the rest
		// by original order, those without one last in spec order (disks before NICs).
		{redfish.BootHdd, map[string]uint{"disk/rootdisk": 1, "disk/data": 2, "iface/default": 3, "disk/installer": 4, "iface/pxe": 5}},
		{redfish.BootCd, map[string]uint{"disk/installer": 1, "iface/default": 2, "disk/rootdisk": 3, "disk/data": 4, "iface/pxe": 5}},
		{redfish.BootPxe, map[string]uint{"iface/default": 1, "iface/pxe": 2, "disk/rootdisk": 3, "disk/installer": 4, "disk/data": 5}},
	}
	for _, tc := range tests {
		t.Run(string(tc.target), func(t *testing.T) {
			assert.Equal(t, tc.want, ComputeOrders(devs, tc.target, original))
		})
	}
}

func TestComputeOrdersNoneRestoresOriginalExactly(t *testing.T) {
	// Gaps, large values and devices without order survive verbatim; entries for devices that
	// no longer exist are ignored.
	vm := newVM(withDisks(disk("a", 10), cdrom("b", 0), disk("c", 3)), withInterfaces(iface("n", 7)))
	original := map[string]uint{"disk/a": 10, "disk/c": 3, "iface/n": 7, "disk/gone": 1}
	got := ComputeOrders(devices(vm), redfish.BootNone, original)
	assert.Equal(t, map[string]uint{"disk/a": 10, "disk/b": 0, "disk/c": 3, "iface/n": 7}, got)

	// An empty original map gives every device 0.
	got = ComputeOrders(devices(vm), redfish.BootNone, map[string]uint{})
	assert.Equal(t, map[string]uint{"disk/a": 0, "disk/b": 0, "disk/c": 0, "iface/n": 0}, got)
	// So does a nil one.
	got = ComputeOrders(devices(vm), redfish.BootNone, nil)
	assert.Equal(t, map[string]uint{"disk/a": 0, "disk/b": 0, "disk/c": 0, "iface/n": 0}, got)
}

func TestComputeOrdersInvariants(t *testing.T) {
	configs := map[string]*virtv1.VirtualMachine{
		"install VM":        installVM(),
		"no orders at all":  newVM(withDisks(disk("a", 0), cdrom("b", 0), disk("c", 0)), withInterfaces(iface("x", 0), iface("y", 0))),
		"all ordered":       newVM(withDisks(disk("a", 5), cdrom("b", 4), disk("c", 3)), withInterfaces(iface("x", 2), iface("y", 1))),
		"duplicate orders":  newVM(withDisks(disk("a", 1), cdrom("b", 1), disk("c", 1)), withInterfaces(iface("x", 1))),
		"only a NIC":        newVM(withInterfaces(iface("x", 0))),
		"only a CD-ROM":     newVM(withDisks(cdrom("iso", 0))),
		"same names":        newVM(withDisks(disk("x", 2)), withInterfaces(iface("x", 1))),
		"many NICs ordered": newVM(withDisks(disk("root", 0)), withInterfaces(iface("a", 30), iface("b", 20), iface("c", 10))),
		"no devices":        newVM(),
	}
	selectsKind := map[redfish.BootTarget]deviceKind{redfish.BootHdd: kindDisk, redfish.BootCd: kindCdrom, redfish.BootPxe: kindInterface}
	for name, vm := range configs {
		devs := devices(vm)
		original := originalOrders(devs)
		for _, target := range []redfish.BootTarget{redfish.BootHdd, redfish.BootCd, redfish.BootPxe} {
			t.Run(name+"/"+string(target), func(t *testing.T) {
				got := ComputeOrders(devs, target, original)
				require.Len(t, got, len(devs), "every device gets an order")
				// Complete, unique, sequential 1..n.
				var values []int
				for _, d := range devs {
					values = append(values, int(got[d.key]))
				}
				sort.Ints(values)
				for i, v := range values {
					assert.Equal(t, i+1, v, "orders must be 1..n without gaps or repeats: %v", got)
				}
				// Target devices come first.
				nTarget := 0
				for _, d := range devs {
					if d.kind == selectsKind[target] {
						nTarget++
					}
				}
				for _, d := range devs {
					if d.kind == selectsKind[target] {
						assert.LessOrEqual(t, got[d.key], uint(nTarget), "%s is a target device", d.key)
					} else {
						assert.Greater(t, got[d.key], uint(nTarget), "%s is not a target device", d.key)
					}
				}
				// Within each group the original order is respected; devices without one go
				// last, in spec order.
				for i, a := range devs {
					for _, b := range devs[i+1:] {
						if (a.kind == selectsKind[target]) != (b.kind == selectsKind[target]) {
							continue
						}
						oa, aok := original[a.key]
						ob, bok := original[b.key]
						switch {
						case aok && bok && oa < ob, aok && !bok, !aok && !bok:
							assert.Less(t, got[a.key], got[b.key], "%s before %s", a.key, b.key)
						case aok && bok && oa > ob, !aok && bok:
							assert.Greater(t, got[a.key], got[b.key], "%s after %s", a.key, b.key)
						}
					}
				}
			})
		}
	}
}

func TestBootReadsAnnotation(t *testing.T) {
	tests := []struct {
		name string
		ann  map[string]string
		want BootSettings
	}{
		{"no annotations", nil, BootSettings{redfish.BootNone, redfish.BootDisabled, redfish.BootLegacy}},
		{"other annotations", map[string]string{"a": "b"}, BootSettings{redfish.BootNone, redfish.BootDisabled, redfish.BootLegacy}},
		{"unreadable annotation", map[string]string{BootAnnotation: "{not json"}, BootSettings{redfish.BootNone, redfish.BootDisabled, redfish.BootLegacy}},
		{"Cd Once", map[string]string{BootAnnotation: `{"target":"Cd","enabled":"Once","original":{}}`}, BootSettings{redfish.BootCd, redfish.BootOnce, redfish.BootLegacy}},
		{"Hdd Continuous", map[string]string{BootAnnotation: `{"target":"Hdd","enabled":"Continuous","original":{}}`}, BootSettings{redfish.BootHdd, redfish.BootContinuous, redfish.BootLegacy}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Boot(newVM(withAnnotations(tc.ann))))
		})
	}
}

func TestFirmwareMode(t *testing.T) {
	efi := newVM()
	efi.Spec.Template.Spec.Domain.Firmware = &virtv1.Firmware{Bootloader: &virtv1.Bootloader{EFI: &virtv1.EFI{}}}
	bios := newVM()
	bios.Spec.Template.Spec.Domain.Firmware = &virtv1.Firmware{Bootloader: &virtv1.Bootloader{BIOS: &virtv1.BIOS{}}}
	fwNoLoader := newVM()
	fwNoLoader.Spec.Template.Spec.Domain.Firmware = &virtv1.Firmware{UUID: "x"}
	assert.Equal(t, redfish.BootUEFI, FirmwareMode(efi))
	assert.Equal(t, redfish.BootLegacy, FirmwareMode(bios))
	assert.Equal(t, redfish.BootLegacy, FirmwareMode(fwNoLoader))
	assert.Equal(t, redfish.BootLegacy, FirmwareMode(newVM()))
	assert.Equal(t, redfish.BootLegacy, FirmwareMode(&virtv1.VirtualMachine{}))
	assert.Equal(t, redfish.BootUEFI, Boot(efi).Mode)
}

func TestMergeOverride(t *testing.T) {
	none := override{redfish.BootNone, redfish.BootDisabled}
	cdOnce := override{redfish.BootCd, redfish.BootOnce}
	hddCont := override{redfish.BootHdd, redfish.BootContinuous}
	tests := []struct {
		name string
		cur  override
		req  BootRequest
		want override
	}{
		{"target without Enabled arms Once", none, BootRequest{Target: targetPtr(redfish.BootCd)}, cdOnce},
		{"target without Enabled keeps Continuous", hddCont, BootRequest{Target: targetPtr(redfish.BootCd)}, override{redfish.BootCd, redfish.BootContinuous}},
		{"target without Enabled keeps Once", cdOnce, BootRequest{Target: targetPtr(redfish.BootPxe)}, override{redfish.BootPxe, redfish.BootOnce}},
		{"target and Enabled", none, BootRequest{Target: targetPtr(redfish.BootHdd), Enabled: enabledPtr(redfish.BootContinuous)}, hddCont},
		{"Enabled alone changes persistence", hddCont, BootRequest{Enabled: enabledPtr(redfish.BootOnce)}, override{redfish.BootHdd, redfish.BootOnce}},
		{"Enabled alone without a target is nothing", none, BootRequest{Enabled: enabledPtr(redfish.BootOnce)}, none},
		{"Disabled clears the target", cdOnce, BootRequest{Enabled: enabledPtr(redfish.BootDisabled)}, none},
		{"Disabled with a target clears it", none, BootRequest{Target: targetPtr(redfish.BootCd), Enabled: enabledPtr(redfish.BootDisabled)}, none},
		{"None disables", hddCont, BootRequest{Target: targetPtr(redfish.BootNone)}, none},
		{"None with Continuous disables", none, BootRequest{Target: targetPtr(redfish.BootNone), Enabled: enabledPtr(redfish.BootContinuous)}, none},
		{"empty request keeps", cdOnce, BootRequest{}, cdOnce},
		{"mode only keeps", hddCont, BootRequest{Mode: modePtr(redfish.BootUEFI)}, hddCont},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, mergeOverride(tc.cur, tc.req))
		})
	}
}

func TestPlanBootFirstOverrideRecordsOriginal(t *testing.T) {
	vm := installVM()
	c := PlanBoot(vm, "", BootRequest{Target: targetPtr(redfish.BootCd), Enabled: enabledPtr(redfish.BootOnce)})
	assert.Nil(t, c.Mode)
	assert.Equal(t, map[string]uint{"disk/installer": 1, "iface/default": 2, "disk/rootdisk": 3, "disk/data": 4, "iface/pxe": 5}, c.Orders)
	s := stateOf(t, c.State)
	assert.Equal(t, bootState{Target: redfish.BootCd, Enabled: redfish.BootOnce, OnceVMI: "", Then: nil,
		Original: map[string]uint{"disk/rootdisk": 2, "iface/default": 1}}, s)
	assert.Contains(t, c.State, `"original":`, "the original orders are always recorded")
}

func TestBootOnceCdConsumedByNewVMI(t *testing.T) {
	vm0 := installVM()
	wantOriginal := ordersOf(vm0)

	c := PlanBoot(vm0, "", BootRequest{Target: targetPtr(redfish.BootCd), Enabled: enabledPtr(redfish.BootOnce)})
	vm1 := applyBootChange(t, vm0, c)
	assert.Equal(t, BootSettings{redfish.BootCd, redfish.BootOnce, redfish.BootLegacy}, Boot(vm1))
	assert.Equal(t, c.Orders, ordersOf(vm1))

	// No VMI yet: nothing consumes it.
	assert.Nil(t, ConsumeOnce(vm1, ""))
	assert.False(t, OnceConsumable(vm1, ""))

	// The first VMI boots with the override and consumes it.
	require.True(t, OnceConsumable(vm1, "vmi-A"))
	done := ConsumeOnce(vm1, "vmi-A")
	require.NotNil(t, done)
	assert.Nil(t, done.Mode)
	vm2 := applyBootChange(t, vm1, *done)
	assert.Equal(t, BootSettings{redfish.BootNone, redfish.BootDisabled, redfish.BootLegacy}, Boot(vm2))
	assert.Equal(t, wantOriginal, ordersOf(vm2), "original orders come back exactly")
	// Devices that had no order have none again (the field is removed, not set to 0).
	assert.Nil(t, vm2.Spec.Template.Spec.Domain.Devices.Disks[1].BootOrder)
	assert.Nil(t, vm2.Spec.Template.Spec.Domain.Devices.Disks[2].BootOrder)
	assert.Nil(t, vm2.Spec.Template.Spec.Domain.Devices.Interfaces[1].BootOrder)
	s := stateOf(t, vm2.Annotations[BootAnnotation])
	assert.Equal(t, map[string]uint{"disk/rootdisk": 2, "iface/default": 1}, s.Original)
	assert.Empty(t, s.OnceVMI)
	assert.Nil(t, s.Then)

	// Consumed: later VMIs find nothing to consume.
	assert.Nil(t, ConsumeOnce(vm2, "vmi-B"))
	assert.Nil(t, ConsumeOnce(vm2, "vmi-A"))
}

func TestBootOnceOverContinuousHddReturnsToContinuousHdd(t *testing.T) {
	vm0 := installVM()
	hdd := PlanBoot(vm0, "", BootRequest{Target: targetPtr(redfish.BootHdd), Enabled: enabledPtr(redfish.BootContinuous)})
	vm1 := applyBootChange(t, vm0, hdd)
	require.Equal(t, BootSettings{redfish.BootHdd, redfish.BootContinuous, redfish.BootLegacy}, Boot(vm1))
	hddOrders := ordersOf(vm1)
	assert.Equal(t, map[string]uint{"disk/rootdisk": 1, "disk/data": 2, "iface/default": 3, "disk/installer": 4, "iface/pxe": 5}, hddOrders)
	// Continuous overrides are never consumed.
	assert.Nil(t, ConsumeOnce(vm1, "vmi-A"))

	// The machine runs with VMI A when the Once override is set.
	cd := PlanBoot(vm1, "vmi-A", BootRequest{Target: targetPtr(redfish.BootCd), Enabled: enabledPtr(redfish.BootOnce)})
	s := stateOf(t, cd.State)
	assert.Equal(t, "vmi-A", s.OnceVMI)
	require.NotNil(t, s.Then)
	assert.Equal(t, override{redfish.BootHdd, redfish.BootContinuous}, *s.Then)
	vm2 := applyBootChange(t, vm1, cd)
	assert.Equal(t, BootSettings{redfish.BootCd, redfish.BootOnce, redfish.BootLegacy}, Boot(vm2))

	// The VMI that was running when the override was set does not consume it.
	assert.Nil(t, ConsumeOnce(vm2, "vmi-A"))
	assert.False(t, OnceConsumable(vm2, "vmi-A"))

	done := ConsumeOnce(vm2, "vmi-B")
	require.NotNil(t, done)
	vm3 := applyBootChange(t, vm2, *done)
	assert.Equal(t, BootSettings{redfish.BootHdd, redfish.BootContinuous, redfish.BootLegacy}, Boot(vm3))
	assert.Equal(t, hddOrders, ordersOf(vm3))
	assert.Equal(t, map[string]uint{"disk/rootdisk": 2, "iface/default": 1}, stateOf(t, vm3.Annotations[BootAnnotation]).Original,
		"the original orders stay those from before the first override")

	// Disabling now restores the orders from before any override.
	off := PlanBoot(vm3, "vmi-B", BootRequest{Enabled: enabledPtr(redfish.BootDisabled)})
	vm4 := applyBootChange(t, vm3, off)
	assert.Equal(t, BootSettings{redfish.BootNone, redfish.BootDisabled, redfish.BootLegacy}, Boot(vm4))
	assert.Equal(t, ordersOf(vm0), ordersOf(vm4))
}

func TestBootOnceOverOnceKeepsWhatToReturnTo(t *testing.T) {
	vm := installVM()
	vm = applyBootChange(t, vm, PlanBoot(vm, "", BootRequest{Target: targetPtr(redfish.BootHdd), Enabled: enabledPtr(redfish.BootContinuous)}))
	vm = applyBootChange(t, vm, PlanBoot(vm, "vmi-A", BootRequest{Target: targetPtr(redfish.BootCd), Enabled: enabledPtr(redfish.BootOnce)}))
	// A second Once before the first was consumed: it must still fall back to Hdd Continuous.
	vm = applyBootChange(t, vm, PlanBoot(vm, "vmi-A", BootRequest{Target: targetPtr(redfish.BootPxe)}))
	assert.Equal(t, BootSettings{redfish.BootPxe, redfish.BootOnce, redfish.BootLegacy}, Boot(vm))
	s := stateOf(t, vm.Annotations[BootAnnotation])
	require.NotNil(t, s.Then)
	assert.Equal(t, override{redfish.BootHdd, redfish.BootContinuous}, *s.Then)

	done := ConsumeOnce(vm, "vmi-B")
	require.NotNil(t, done)
	vm = applyBootChange(t, vm, *done)
	assert.Equal(t, BootSettings{redfish.BootHdd, redfish.BootContinuous, redfish.BootLegacy}, Boot(vm))
}

func TestBootContinuousOverOnceIsNotConsumed(t *testing.T) {
	vm := installVM()
	vm = applyBootChange(t, vm, PlanBoot(vm, "", BootRequest{Target: targetPtr(redfish.BootCd), Enabled: enabledPtr(redfish.BootOnce)}))
	vm = applyBootChange(t, vm, PlanBoot(vm, "", BootRequest{Target: targetPtr(redfish.BootHdd), Enabled: enabledPtr(redfish.BootContinuous)}))
	assert.Equal(t, BootSettings{redfish.BootHdd, redfish.BootContinuous, redfish.BootLegacy}, Boot(vm))
	s := stateOf(t, vm.Annotations[BootAnnotation])
	assert.Nil(t, s.Then)
	assert.Empty(t, s.OnceVMI)
	assert.Nil(t, ConsumeOnce(vm, "vmi-X"))
}

func TestBootTargetWithoutEnabledArmsOnce(t *testing.T) {
	vm := installVM()
	c := PlanBoot(vm, "", BootRequest{Target: targetPtr(redfish.BootPxe)})
	vm = applyBootChange(t, vm, c)
	assert.Equal(t, BootSettings{redfish.BootPxe, redfish.BootOnce, redfish.BootLegacy}, Boot(vm))
	assert.Equal(t, uint(1), ordersOf(vm)["iface/default"])
	assert.Equal(t, uint(2), ordersOf(vm)["iface/pxe"])
	assert.NotNil(t, ConsumeOnce(vm, "vmi-1"))
}

func TestBootDisabledClearsTarget(t *testing.T) {
	for _, req := range []BootRequest{
		{Enabled: enabledPtr(redfish.BootDisabled)},
		{Target: targetPtr(redfish.BootNone)},
		{Target: targetPtr(redfish.BootCd), Enabled: enabledPtr(redfish.BootDisabled)},
	} {
		vm0 := installVM()
		vm := applyBootChange(t, vm0, PlanBoot(vm0, "", BootRequest{Target: targetPtr(redfish.BootCd), Enabled: enabledPtr(redfish.BootOnce)}))
		c := PlanBoot(vm, "vmi-A", req)
		s := stateOf(t, c.State)
		assert.Equal(t, redfish.BootNone, s.Target)
		assert.Equal(t, redfish.BootDisabled, s.Enabled)
		assert.Nil(t, s.Then)
		assert.Empty(t, s.OnceVMI)
		vm = applyBootChange(t, vm, c)
		assert.Equal(t, ordersOf(vm0), ordersOf(vm))
		assert.Nil(t, ConsumeOnce(vm, "vmi-B"))
	}
}

func TestPlanBootMode(t *testing.T) {
	bios := installVM()
	efi := installVM()
	efi.Spec.Template.Spec.Domain.Firmware = &virtv1.Firmware{Bootloader: &virtv1.Bootloader{EFI: &virtv1.EFI{}}}
	tests := []struct {
		name string
		vm   *virtv1.VirtualMachine
		mode redfish.BootMode
		want *redfish.BootMode
	}{
		{"BIOS to UEFI", bios, redfish.BootUEFI, modePtr(redfish.BootUEFI)},
		{"BIOS stays Legacy", bios, redfish.BootLegacy, nil},
		{"EFI to Legacy", efi, redfish.BootLegacy, modePtr(redfish.BootLegacy)},
		{"EFI stays UEFI", efi, redfish.BootUEFI, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := PlanBoot(tc.vm, "", BootRequest{Mode: modePtr(tc.mode)})
			assert.Equal(t, tc.want, c.Mode)
			// A mode change alone leaves the override and the boot orders alone.
			s := stateOf(t, c.State)
			assert.Equal(t, redfish.BootNone, s.Target)
			assert.Equal(t, redfish.BootDisabled, s.Enabled)
			assert.Equal(t, ordersOf(tc.vm), c.Orders)
			next := applyBootChange(t, tc.vm, c)
			assert.Equal(t, tc.mode, FirmwareMode(next), "the new mode shows at once")
		})
	}
	// Mode together with an override.
	c := PlanBoot(bios, "", BootRequest{Target: targetPtr(redfish.BootCd), Enabled: enabledPtr(redfish.BootOnce), Mode: modePtr(redfish.BootUEFI)})
	require.NotNil(t, c.Mode)
	next := applyBootChange(t, bios, c)
	assert.Equal(t, BootSettings{redfish.BootCd, redfish.BootOnce, redfish.BootUEFI}, Boot(next))
}

func TestBootOriginalRecordedOnlyOnce(t *testing.T) {
	vm0 := installVM()
	vm := vm0
	for i, req := range []BootRequest{
		{Target: targetPtr(redfish.BootHdd), Enabled: enabledPtr(redfish.BootContinuous)},
		{Target: targetPtr(redfish.BootPxe), Enabled: enabledPtr(redfish.BootContinuous)},
		{Target: targetPtr(redfish.BootCd), Enabled: enabledPtr(redfish.BootOnce)},
		{Enabled: enabledPtr(redfish.BootDisabled)},
		{Target: targetPtr(redfish.BootPxe)},
		{Target: targetPtr(redfish.BootNone)},
	} {
		vm = applyBootChange(t, vm, PlanBoot(vm, fmt.Sprintf("vmi-%d", i), req))
		assert.Equal(t, map[string]uint{"disk/rootdisk": 2, "iface/default": 1}, stateOf(t, vm.Annotations[BootAnnotation]).Original, "step %d", i)
	}
	assert.Equal(t, ordersOf(vm0), ordersOf(vm))
}

func TestConsumeOnceEdgeCases(t *testing.T) {
	cdOnce := func(onceVMI string) *virtv1.VirtualMachine {
		return newVM(withDisks(cdrom("iso", 0)), withAnnotations(map[string]string{
			BootAnnotation: fmt.Sprintf(`{"target":"Cd","enabled":"Once","onceVMI":%q,"original":{}}`, onceVMI)}))
	}
	tests := []struct {
		name    string
		vm      *virtv1.VirtualMachine
		vmiUID  string
		consume bool
	}{
		{"no annotation", newVM(), "vmi-1", false},
		{"unreadable annotation", newVM(withAnnotations(map[string]string{BootAnnotation: "]"})), "vmi-1", false},
		{"Continuous", newVM(withAnnotations(map[string]string{BootAnnotation: `{"target":"Hdd","enabled":"Continuous","original":{}}`})), "vmi-1", false},
		{"Disabled", newVM(withAnnotations(map[string]string{BootAnnotation: `{"target":"None","enabled":"Disabled","original":{}}`})), "vmi-1", false},
		{"Once, no VMI now", cdOnce(""), "", false},
		{"Once set with no VMI, new VMI", cdOnce(""), "vmi-1", true},
		{"Once, same VMI", cdOnce("vmi-1"), "vmi-1", false},
		{"Once, other VMI", cdOnce("vmi-1"), "vmi-2", true},
		{"Once set on a VMI that is gone, no VMI now", cdOnce("vmi-1"), "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ConsumeOnce(tc.vm, tc.vmiUID)
			assert.Equal(t, tc.consume, c != nil)
			assert.Equal(t, tc.consume, OnceConsumable(tc.vm, tc.vmiUID))
			if c != nil {
				s := stateOf(t, c.State)
				assert.Equal(t, redfish.BootNone, s.Target)
				assert.Equal(t, redfish.BootDisabled, s.Enabled)
				assert.Equal(t, map[string]uint{"disk/iso": 0}, c.Orders)
			}
		})
	}
}
