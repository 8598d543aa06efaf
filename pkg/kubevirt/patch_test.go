package kubevirt

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// ops decodes a patch into generic operations for comparison.
func ops(t *testing.T, p jsonPatch) []map[string]any {
	t.Helper()
	var out []map[string]any
	require.NoError(t, json.Unmarshal(p.Bytes(), &out))
	return out
}

func TestNewVMPatchAssertsResourceVersionFirst(t *testing.T) {
	vm := newVM()
	p := newVMPatch(vm)
	assert.False(t, p.Changes(), "a patch that only asserts the resourceVersion changes nothing")
	assert.JSONEq(t, `[{"op":"add","path":"/metadata/resourceVersion","value":"42"}]`, string(p.Bytes()))

	p.setRunStrategy(vm, virtv1.RunStrategyOnce)
	assert.True(t, p.Changes())
	got := ops(t, p)
	require.NotEmpty(t, got)
	assert.Equal(t, map[string]any{"op": "add", "path": "/metadata/resourceVersion", "value": "42"}, got[0])

	// An empty resourceVersion is still asserted (value present, not omitted).
	vm.ResourceVersion = ""
	assert.JSONEq(t, `[{"op":"add","path":"/metadata/resourceVersion","value":""}]`, string(newVMPatch(vm).Bytes()))
}

func TestEscape(t *testing.T) {
	tests := map[string]string{
		"plain":                    "plain",
		"redfish.kubevirt.io/boot": "redfish.kubevirt.io~1boot",
		"a~b":                      "a~0b",
		"a~/b":                     "a~0~1b",
		"/~":                       "~1~0",
		"~1":                       "~01",
	}
	for in, want := range tests {
		assert.Equal(t, want, escape(in), in)
	}
}

func TestSetAnnotation(t *testing.T) {
	tests := []struct {
		name string
		ann  map[string]string
		want string
	}{
		{"nil annotations map: add an empty map, then the key", nil,
			`[{"op":"add","path":"/metadata/annotations","value":{}},{"op":"add","path":"/metadata/annotations/redfish.kubevirt.io~1boot","value":"v"}]`},
		{"existing annotations: add one key, escaped", map[string]string{"other": "x"},
			`[{"op":"add","path":"/metadata/annotations/redfish.kubevirt.io~1boot","value":"v"}]`},
		{"existing key: add replaces it", map[string]string{BootAnnotation: "old"},
			`[{"op":"add","path":"/metadata/annotations/redfish.kubevirt.io~1boot","value":"v"}]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vm := newVM(withAnnotations(tc.ann))
			var p jsonPatch
			p.setAnnotation(vm, BootAnnotation, "v")
			assert.JSONEq(t, tc.want, string(p.Bytes()))

			full := newVMPatch(vm)
			full.setAnnotation(vm, BootAnnotation, "v")
			next := applyPatch(t, vm, full)
			assert.Equal(t, "v", next.Annotations[BootAnnotation])
			for k, v := range tc.ann {
				if k != BootAnnotation {
					assert.Equal(t, v, next.Annotations[k], "other annotations survive")
				}
			}
		})
	}
	// An empty value is still written.
	var p jsonPatch
	p.setAnnotation(newVM(withAnnotations(map[string]string{"a": "b"})), "k", "")
	assert.JSONEq(t, `[{"op":"add","path":"/metadata/annotations/k","value":""}]`, string(p.Bytes()))
}

func TestSetRunStrategy(t *testing.T) {
	tests := []struct {
		name string
		vm   *virtv1.VirtualMachine
		want string
	}{
		{"runStrategy already used", newVM(withRunStrategy(virtv1.RunStrategyHalted)),
			`[{"op":"add","path":"/spec/runStrategy","value":"Once"}]`},
		{"deprecated running true is removed", newVM(withRunning(true)),
			`[{"op":"remove","path":"/spec/running"},{"op":"add","path":"/spec/runStrategy","value":"Once"}]`},
		{"deprecated running false is removed", newVM(withRunning(false)),
			`[{"op":"remove","path":"/spec/running"},{"op":"add","path":"/spec/runStrategy","value":"Once"}]`},
		{"neither set", newVM(),
			`[{"op":"add","path":"/spec/runStrategy","value":"Once"}]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p jsonPatch
			p.setRunStrategy(tc.vm, virtv1.RunStrategyOnce)
			assert.JSONEq(t, tc.want, string(p.Bytes()))

			full := newVMPatch(tc.vm)
			full.setRunStrategy(tc.vm, virtv1.RunStrategyOnce)
			next := applyPatch(t, tc.vm, full)
			assert.Nil(t, next.Spec.Running, "spec.running may not coexist with spec.runStrategy")
			require.NotNil(t, next.Spec.RunStrategy)
			assert.Equal(t, virtv1.RunStrategyOnce, *next.Spec.RunStrategy)
		})
	}
}

func TestSetBootOrders(t *testing.T) {
	vm := newVM(withDisks(disk("root", 1), cdrom("iso", 0), disk("data", 3)), withInterfaces(iface("a", 0), iface("b", 2)))
	var p jsonPatch
	p.setBootOrders(vm, map[string]uint{
		"disk/root":  1, // unchanged: no op
		"disk/iso":   4, // add
		"disk/data":  0, // remove
		"iface/a":    5, // add
		"iface/b":    0, // remove
		"disk/other": 9, // unknown device: ignored
	})
	assert.JSONEq(t, `[
		{"op":"add","path":"/spec/template/spec/domain/devices/disks/1/bootOrder","value":4},
		{"op":"remove","path":"/spec/template/spec/domain/devices/disks/2/bootOrder"},
		{"op":"add","path":"/spec/template/spec/domain/devices/interfaces/0/bootOrder","value":5},
		{"op":"remove","path":"/spec/template/spec/domain/devices/interfaces/1/bootOrder"}
	]`, string(p.Bytes()))

	next := applyPatch(t, vm, p)
	assert.Equal(t, map[string]uint{"disk/root": 1, "disk/iso": 4, "disk/data": 0, "iface/a": 5, "iface/b": 0}, ordersOf(next))

	// Devices missing from the map are left alone; an empty map changes nothing.
	var q jsonPatch
	q.setBootOrders(vm, map[string]uint{})
	assert.Empty(t, q)
	q.setBootOrders(vm, nil)
	assert.Empty(t, q)
	// A VM without template has nothing to patch.
	q.setBootOrders(&virtv1.VirtualMachine{}, map[string]uint{"disk/root": 1})
	assert.Empty(t, q)
}

func TestSetBootOrdersIndexesBeyondNine(t *testing.T) {
	var disks []virtv1.Disk
	for i := 0; i < 12; i++ {
		disks = append(disks, disk(string(rune('a'+i)), 0))
	}
	vm := newVM(withDisks(disks...))
	var p jsonPatch
	p.setBootOrders(vm, map[string]uint{"disk/l": 1})
	assert.JSONEq(t, `[{"op":"add","path":"/spec/template/spec/domain/devices/disks/11/bootOrder","value":1}]`, string(p.Bytes()))
}

func TestSetFirmwareMode(t *testing.T) {
	const fwPath = "/spec/template/spec/domain/firmware"
	withFirmware := func(fw *virtv1.Firmware) *virtv1.VirtualMachine {
		vm := newVM()
		vm.Spec.Template.Spec.Domain.Firmware = fw
		return vm
	}
	tests := []struct {
		name string
		vm   *virtv1.VirtualMachine
		mode redfish.BootMode
		want string
	}{
		{"no firmware, to UEFI: add firmware", newVM(), redfish.BootUEFI,
			`[{"op":"add","path":"` + fwPath + `","value":{"bootloader":{"efi":{"secureBoot":false}}}}]`},
		{"no firmware, to Legacy: add firmware", newVM(), redfish.BootLegacy,
			`[{"op":"add","path":"` + fwPath + `","value":{"bootloader":{"bios":{}}}}]`},
		{"firmware with UUID, to UEFI: replace bootloader only", withFirmware(&virtv1.Firmware{UUID: "u-1", Serial: "s-1"}), redfish.BootUEFI,
			`[{"op":"add","path":"` + fwPath + `/bootloader","value":{"efi":{"secureBoot":false}}}]`},
		{"EFI firmware to Legacy: replace bootloader", withFirmware(&virtv1.Firmware{UUID: "u-1", Bootloader: &virtv1.Bootloader{EFI: &virtv1.EFI{SecureBoot: boolPtr(true)}}}), redfish.BootLegacy,
			`[{"op":"add","path":"` + fwPath + `/bootloader","value":{"bios":{}}}]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p jsonPatch
			p.setFirmwareMode(tc.vm, tc.mode)
			assert.JSONEq(t, tc.want, string(p.Bytes()))

			next := applyPatch(t, tc.vm, p)
			assert.Equal(t, tc.mode, FirmwareMode(next))
			bl := next.Spec.Template.Spec.Domain.Firmware.Bootloader
			require.NotNil(t, bl)
			if tc.mode == redfish.BootUEFI {
				assert.Nil(t, bl.BIOS)
				require.NotNil(t, bl.EFI.SecureBoot)
				assert.False(t, *bl.EFI.SecureBoot)
			} else {
				assert.Nil(t, bl.EFI, "the EFI bootloader is replaced, not merged")
				assert.NotNil(t, bl.BIOS)
			}
			if old := tc.vm.Spec.Template.Spec.Domain.Firmware; old != nil {
				assert.Equal(t, old.UUID, next.Spec.Template.Spec.Domain.Firmware.UUID, "other firmware fields survive")
				assert.Equal(t, old.Serial, next.Spec.Template.Spec.Domain.Firmware.Serial)
			}
		})
	}
}

func TestApplyBootSkipsUnchangedAnnotation(t *testing.T) {
	vm := installVM()
	c := PlanBoot(vm, "", BootRequest{Target: targetPtr(redfish.BootHdd), Enabled: enabledPtr(redfish.BootContinuous)})
	vm = applyBootChange(t, vm, c)

	// Planning the same thing again produces a patch that changes nothing.
	again := PlanBoot(vm, "", BootRequest{Target: targetPtr(redfish.BootHdd), Enabled: enabledPtr(redfish.BootContinuous)})
	p := newVMPatch(vm)
	p.applyBoot(vm, again)
	assert.False(t, p.Changes(), "patch: %s", p.Bytes())
}

func TestApplyBootFirstOverridePatch(t *testing.T) {
	vm := newVM(withDisks(disk("root", 0), cdrom("iso", 0)))
	c := PlanBoot(vm, "", BootRequest{Target: targetPtr(redfish.BootCd), Enabled: enabledPtr(redfish.BootOnce), Mode: modePtr(redfish.BootUEFI)})
	p := newVMPatch(vm)
	p.applyBoot(vm, c)
	got := ops(t, p)
	require.Len(t, got, 6)
	assert.Equal(t, "/metadata/resourceVersion", got[0]["path"])
	assert.Equal(t, map[string]any{"op": "add", "path": "/spec/template/spec/domain/devices/disks/0/bootOrder", "value": float64(2)}, got[1])
	assert.Equal(t, map[string]any{"op": "add", "path": "/spec/template/spec/domain/devices/disks/1/bootOrder", "value": float64(1)}, got[2])
	assert.Equal(t, "/metadata/annotations", got[3]["path"], "no annotations yet: the map is added first")
	assert.Equal(t, "/metadata/annotations/redfish.kubevirt.io~1boot", got[4]["path"])
	assert.Equal(t, "/spec/template/spec/domain/firmware", got[5]["path"])
}

func TestPatchKeepsUnknownFields(t *testing.T) {
	// Fields of newer KubeVirt versions that our types do not know survive a patch.
	raw := []byte(`{
		"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine",
		"metadata":{"name":"cp-0","namespace":"tenant-a","resourceVersion":"42","annotations":{"x":"y"}},
		"spec":{"runStrategy":"Halted","futureField":{"a":1},
			"template":{"spec":{"domain":{"futureDomainField":true,"devices":{"disks":[{"name":"root","disk":{},"futureDisk":1}]}}}}}}`)
	var vm virtv1.VirtualMachine
	require.NoError(t, json.Unmarshal(raw, &vm))
	p := newVMPatch(&vm)
	p.setRunStrategy(&vm, virtv1.RunStrategyOnce)
	p.applyBoot(&vm, PlanBoot(&vm, "", BootRequest{Target: targetPtr(redfish.BootHdd), Enabled: enabledPtr(redfish.BootContinuous)}))
	decoded, err := jsonpatch.DecodePatch(p.Bytes())
	require.NoError(t, err)
	out, err := decoded.Apply(raw)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(out, &m))
	spec := m["spec"].(map[string]any)
	assert.Equal(t, map[string]any{"a": float64(1)}, spec["futureField"])
	assert.Equal(t, "Once", spec["runStrategy"])
	domain := spec["template"].(map[string]any)["spec"].(map[string]any)["domain"].(map[string]any)
	assert.Equal(t, true, domain["futureDomainField"])
	d0 := domain["devices"].(map[string]any)["disks"].([]any)[0].(map[string]any)
	assert.Equal(t, float64(1), d0["futureDisk"])
	assert.Equal(t, float64(1), d0["bootOrder"])
	ann := m["metadata"].(map[string]any)["annotations"].(map[string]any)
	assert.Equal(t, "y", ann["x"])
	assert.Contains(t, ann, BootAnnotation)
}

func TestItoa(t *testing.T) {
	for in, want := range map[int]string{0: "0", 7: "7", 10: "10", 123: "123"} {
		assert.Equal(t, want, itoa(in))
	}
}
