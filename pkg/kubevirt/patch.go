package kubevirt

import (
	"encoding/json"
	"strings"

	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// jsonPatch is an RFC 6902 patch. Every VM patch starts by asserting the resourceVersion the
// change was computed from: the apiserver answers 409 when the object moved on, so a patch
// never lands on a state it was not computed for. Paths touch single fields, so fields of
// newer KubeVirt versions that our types do not know survive.
type jsonPatch []patchOp

type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

func newVMPatch(vm *virtv1.VirtualMachine) jsonPatch {
	return jsonPatch{{Op: "add", Path: "/metadata/resourceVersion", Value: vm.ResourceVersion}}
}

// Bytes renders the patch.
func (p jsonPatch) Bytes() []byte {
	b, _ := json.Marshal(p)
	return b
}

// Changes reports whether the patch does more than assert the resourceVersion.
func (p jsonPatch) Changes() bool { return len(p) > 1 }

func (p *jsonPatch) add(path string, v any) {
	*p = append(*p, patchOp{Op: "add", Path: path, Value: v})
}
func (p *jsonPatch) remove(path string) { *p = append(*p, patchOp{Op: "remove", Path: path}) }

// replace swaps an existing member; on arrays "add" would insert instead.
func (p *jsonPatch) replace(path string, v any) {
	*p = append(*p, patchOp{Op: "replace", Path: path, Value: v})
}

// escape encodes a JSON pointer token.
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// setAnnotation adds or replaces one annotation. A VM without annotations first gets the map
// (once per patch: a second whole-map add would drop the first annotation).
func (p *jsonPatch) setAnnotation(vm *virtv1.VirtualMachine, key, value string) {
	if len(vm.Annotations) == 0 && !p.has("/metadata/annotations") {
		p.add("/metadata/annotations", map[string]string{})
	}
	p.add("/metadata/annotations/"+escape(key), value)
}

// has reports whether the patch already writes path.
func (p jsonPatch) has(path string) bool {
	for _, op := range p {
		if op.Path == path {
			return true
		}
	}
	return false
}

// setRunStrategy sets spec.runStrategy, dropping the deprecated spec.running that may not
// coexist with it.
func (p *jsonPatch) setRunStrategy(vm *virtv1.VirtualMachine, rs virtv1.VirtualMachineRunStrategy) {
	if vm.Spec.Running != nil {
		p.remove("/spec/running")
	}
	p.add("/spec/runStrategy", string(rs))
}

const domainPath = "/spec/template/spec/domain"

// setBootOrders writes the boot order of each device whose order changes.
func (p *jsonPatch) setBootOrders(vm *virtv1.VirtualMachine, orders map[string]uint) {
	for _, d := range devices(vm) {
		want, ok := orders[d.key]
		if !ok || want == d.order {
			continue
		}
		list := "disks"
		if d.kind == kindInterface {
			list = "interfaces"
		}
		path := domainPath + "/devices/" + list + "/" + itoa(d.index) + "/bootOrder"
		if want == 0 {
			p.remove(path)
		} else {
			p.add(path, want)
		}
	}
}

// setFirmwareMode switches between EFI (secure boot off unless SecureBoot asks for it) and BIOS.
func (p *jsonPatch) setFirmwareMode(vm *virtv1.VirtualMachine, mode redfish.BootMode) {
	bl := map[string]any{"bios": map[string]any{}}
	if mode == redfish.BootUEFI {
		bl = map[string]any{"efi": map[string]any{"secureBoot": false}}
	}
	fw := vm.Spec.Template.Spec.Domain.Firmware
	switch {
	case fw == nil:
		p.add(domainPath+"/firmware", map[string]any{"bootloader": bl})
	default:
		p.add(domainPath+"/firmware/bootloader", bl)
	}
}

// applyBoot adds a BootChange to the patch.
func (p *jsonPatch) applyBoot(vm *virtv1.VirtualMachine, c BootChange) {
	p.setBootOrders(vm, c.Orders)
	if vm.Annotations[BootAnnotation] != c.State {
		p.setAnnotation(vm, BootAnnotation, c.State)
	}
	if c.Mode != nil {
		p.setFirmwareMode(vm, *c.Mode)
	}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// setSecureBoot turns UEFI Secure Boot on or off for the next boot of a VM that boots with
// EFI (the caller checks). KubeVirt refuses secure boot without the SMM feature, so turning it
// on enables SMM as well; turning it off leaves SMM as it is, since SMM alone is harmless and
// may be wanted for other reasons.
func (p *jsonPatch) setSecureBoot(vm *virtv1.VirtualMachine, enable bool) {
	d := vm.Spec.Template.Spec.Domain
	if SecureBootEnabled(d) != enable {
		p.add(domainPath+"/firmware/bootloader/efi/secureBoot", enable)
	}
	if !enable {
		return
	}
	switch {
	case d.Features == nil:
		p.add(domainPath+"/features", map[string]any{"smm": map[string]any{"enabled": true}})
	case d.Features.SMM == nil:
		p.add(domainPath+"/features/smm", map[string]any{"enabled": true})
	case d.Features.SMM.Enabled != nil && !*d.Features.SMM.Enabled:
		p.add(domainPath+"/features/smm/enabled", true)
	}
}

// setIndicatorLED stores the indicator LED state in its annotation.
func (p *jsonPatch) setIndicatorLED(vm *virtv1.VirtualMachine, led redfish.IndicatorLED) {
	if IndicatorLEDOf(vm) != led {
		p.setAnnotation(vm, IndicatorAnnotation, string(led))
	}
}
