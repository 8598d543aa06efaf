package kubevirt

import (
	"encoding/json"
	"sort"

	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// BootAnnotation holds the boot override state on the VM, so every replica and every restart
// sees the same override.
const BootAnnotation = "redfish.kubevirt.io/boot"

// bootState is the JSON in BootAnnotation.
type bootState struct {
	Target  redfish.BootTarget  `json:"target"`
	Enabled redfish.BootEnabled `json:"enabled"`
	// OnceVMI is, for a Once override, the UID of the VMI that existed when it was set ("" for
	// none). The first VMI with another UID has booted with the override and consumes it.
	OnceVMI string `json:"onceVMI,omitempty"`
	// Then is the override that returns once a Once override is consumed (nil: none).
	Then *override `json:"then,omitempty"`
	// Original holds the boot orders the VM had before kubevirt-redfish first changed them,
	// keyed by device key; an override that is Disabled puts them back.
	Original map[string]uint `json:"original"`
}

type override struct {
	Target  redfish.BootTarget  `json:"target"`
	Enabled redfish.BootEnabled `json:"enabled"`
}

// BootSettings is the Redfish view of a VM's boot configuration.
type BootSettings struct {
	Target  redfish.BootTarget
	Enabled redfish.BootEnabled
	Mode    redfish.BootMode
}

// BootRequest is a validated PATCH of ComputerSystem.Boot; nil fields are left alone.
type BootRequest struct {
	Target  *redfish.BootTarget
	Enabled *redfish.BootEnabled
	Mode    *redfish.BootMode
}

// deviceKind classes what a boot target selects.
type deviceKind int

const (
	kindDisk deviceKind = iota
	kindCdrom
	kindInterface
)

// device is a bootable device of the VM template, in spec order (disks, then interfaces).
type device struct {
	key   string // "disk/<name>" or "iface/<name>"
	kind  deviceKind
	index int // index within its list
	order uint
}

func devices(vm *virtv1.VirtualMachine) []device {
	var out []device
	if vm.Spec.Template == nil {
		return nil
	}
	d := vm.Spec.Template.Spec.Domain.Devices
	for i, disk := range d.Disks {
		kind := kindDisk
		if disk.CDRom != nil {
			kind = kindCdrom
		}
		out = append(out, device{key: "disk/" + disk.Name, kind: kind, index: i, order: deref(disk.BootOrder)})
	}
	for i, iface := range d.Interfaces {
		out = append(out, device{key: "iface/" + iface.Name, kind: kindInterface, index: i, order: deref(iface.BootOrder)})
	}
	return out
}

func deref(p *uint) uint {
	if p == nil {
		return 0
	}
	return *p
}

// readBootState parses the annotation; a missing or unreadable one means "no override".
func readBootState(vm *virtv1.VirtualMachine) *bootState {
	raw, ok := vm.Annotations[BootAnnotation]
	if !ok {
		return nil
	}
	var s bootState
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return nil
	}
	return &s
}

// Boot returns the boot settings a GET shows.
func Boot(vm *virtv1.VirtualMachine) BootSettings {
	b := BootSettings{Target: redfish.BootNone, Enabled: redfish.BootDisabled, Mode: FirmwareMode(vm)}
	if s := readBootState(vm); s != nil {
		b.Target, b.Enabled = s.Target, s.Enabled
	}
	return b
}

// FirmwareMode is UEFI when the VM boots with EFI, else Legacy (KubeVirt's default is BIOS).
func FirmwareMode(vm *virtv1.VirtualMachine) redfish.BootMode {
	if t := vm.Spec.Template; t != nil {
		if fw := t.Spec.Domain.Firmware; fw != nil && fw.Bootloader != nil && fw.Bootloader.EFI != nil {
			return redfish.BootUEFI
		}
	}
	return redfish.BootLegacy
}

// BootChange is the outcome of a boot PATCH or a consumed Once override.
type BootChange struct {
	// Orders maps every device key to its new boot order (0 removes it).
	Orders map[string]uint
	// State is the new annotation value.
	State string
	// Mode, when set, switches the firmware.
	Mode *redfish.BootMode
}

// PlanBoot merges a request into the VM's override and computes the resulting boot orders.
// vmiUID is the UID of the VM's current VMI ("" for none): a Once override is consumed by the
// next VMI with another UID.
func PlanBoot(vm *virtv1.VirtualMachine, vmiUID string, req BootRequest) BootChange {
	devs := devices(vm)
	prev := readBootState(vm)
	cur := override{Target: redfish.BootNone, Enabled: redfish.BootDisabled}
	next := &bootState{}
	if prev != nil {
		cur = override{prev.Target, prev.Enabled}
		next.Original = prev.Original
	} else {
		next.Original = originalOrders(devs)
	}
	want := mergeOverride(cur, req)
	next.Target, next.Enabled = want.Target, want.Enabled
	if want.Enabled == redfish.BootOnce {
		next.OnceVMI = vmiUID
		next.Then = restoreTarget(prev, cur)
	}
	change := BootChange{Orders: ComputeOrders(devs, next.Target, next.Original), State: mustJSON(next)}
	if req.Mode != nil && *req.Mode != FirmwareMode(vm) {
		change.Mode = req.Mode
	}
	return change
}

// mergeOverride applies a request to the current override with the rules a physical BMC
// follows: a target without an Enabled value arms it Once if nothing was armed, Disabled clears
// the target, and None disables the override.
func mergeOverride(cur override, req BootRequest) override {
	out := cur
	if req.Target != nil {
		out.Target = *req.Target
	}
	if req.Enabled != nil {
		out.Enabled = *req.Enabled
	} else if req.Target != nil && cur.Enabled == redfish.BootDisabled {
		out.Enabled = redfish.BootOnce
	}
	if out.Enabled == redfish.BootDisabled || out.Target == redfish.BootNone {
		return override{Target: redfish.BootNone, Enabled: redfish.BootDisabled}
	}
	return out
}

// restoreTarget is what a new Once override falls back to: the Continuous override in force,
// or what the pending Once override would itself have restored.
func restoreTarget(prev *bootState, cur override) *override {
	switch {
	case cur.Enabled == redfish.BootContinuous:
		return &cur
	case prev != nil && cur.Enabled == redfish.BootOnce:
		return prev.Then
	}
	return nil
}

// ConsumeOnce returns the change that ends a Once override after the VMI with vmiUID booted
// with it, or nil when there is nothing to consume.
func ConsumeOnce(vm *virtv1.VirtualMachine, vmiUID string) *BootChange {
	s := readBootState(vm)
	if s == nil || s.Enabled != redfish.BootOnce || vmiUID == "" || vmiUID == s.OnceVMI {
		return nil
	}
	next := &bootState{Target: redfish.BootNone, Enabled: redfish.BootDisabled, Original: s.Original}
	if s.Then != nil {
		next.Target, next.Enabled = s.Then.Target, s.Then.Enabled
	}
	return &BootChange{Orders: ComputeOrders(devices(vm), next.Target, next.Original), State: mustJSON(next)}
}

// OnceConsumable reports whether the VM carries a Once override that the VMI with vmiUID has
// booted with.
func OnceConsumable(vm *virtv1.VirtualMachine, vmiUID string) bool {
	return ConsumeOnce(vm, vmiUID) != nil
}

func originalOrders(devs []device) map[string]uint {
	out := map[string]uint{}
	for _, d := range devs {
		if d.order > 0 {
			out[d.key] = d.order
		}
	}
	return out
}

// ComputeOrders gives the boot order of every device for a target. With no override the
// original orders come back exactly. With a target, the devices it selects come first and
// every other device follows in its original order, numbered 1..n with no gaps or repeats,
// so KubeVirt and the firmware see one unambiguous order.
func ComputeOrders(devs []device, target redfish.BootTarget, original map[string]uint) map[string]uint {
	out := make(map[string]uint, len(devs))
	if target == redfish.BootNone {
		for _, d := range devs {
			out[d.key] = original[d.key]
		}
		return out
	}
	ranked := make([]device, len(devs))
	copy(ranked, devs)
	// Devices without an original order go after those with one, disks before interfaces.
	rank := func(d device) uint {
		if o, ok := original[d.key]; ok {
			return o
		}
		return 1 << 30
	}
	sort.SliceStable(ranked, func(i, j int) bool {
		ti, tj := selects(target, ranked[i].kind), selects(target, ranked[j].kind)
		if ti != tj {
			return ti
		}
		return rank(ranked[i]) < rank(ranked[j])
	})
	for i, d := range ranked {
		out[d.key] = uint(i + 1)
	}
	return out
}

func selects(target redfish.BootTarget, k deviceKind) bool {
	switch target {
	case redfish.BootHdd:
		return k == kindDisk
	case redfish.BootCd:
		return k == kindCdrom
	case redfish.BootPxe:
		return k == kindInterface
	}
	return false
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain structs are marshalled here
	}
	return string(b)
}
