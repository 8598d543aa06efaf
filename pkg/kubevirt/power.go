package kubevirt

import (
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// RunStrategy returns the VM's effective run strategy, honouring the deprecated spec.running.
func RunStrategy(vm *virtv1.VirtualMachine) virtv1.VirtualMachineRunStrategy {
	if rs := vm.Spec.RunStrategy; rs != nil {
		return *rs
	}
	if vm.Spec.Running != nil && *vm.Spec.Running {
		return virtv1.RunStrategyAlways
	}
	return virtv1.RunStrategyHalted
}

// isFinal reports whether the VMI has stopped for good.
func isFinal(vmi *virtv1.VirtualMachineInstance) bool {
	return vmi.Status.Phase == virtv1.Succeeded || vmi.Status.Phase == virtv1.Failed
}

// active reports whether a VMI exists that is not stopped and not being deleted.
func active(vmi *virtv1.VirtualMachineInstance) bool {
	return vmi != nil && !isFinal(vmi) && vmi.DeletionTimestamp == nil
}

// PowerState derives the Redfish power state from the VM and its VMI (nil when none exists).
// It mirrors what virt-controller will do next, so a start it is about to make shows as
// PoweringOn and a stop as PoweringOff.
func PowerState(vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance) redfish.PowerState {
	rs := RunStrategy(vm)
	if vmi == nil || isFinal(vmi) {
		if willStart(vm, vmi, rs) {
			return redfish.PowerPoweringOn
		}
		return redfish.PowerOff
	}
	if vmi.DeletionTimestamp != nil || rs == virtv1.RunStrategyHalted {
		return redfish.PowerPoweringOff
	}
	if vmi.Status.Phase == virtv1.Running {
		return redfish.PowerOn
	}
	return redfish.PowerPoweringOn
}

// willStart reports whether virt-controller will create a VMI for a VM whose VMI is absent or
// final, following its run strategy rules.
func willStart(vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance, rs virtv1.VirtualMachineRunStrategy) bool {
	switch rs {
	case virtv1.RunStrategyAlways:
		return true
	case virtv1.RunStrategyOnce:
		// Once starts only when no VMI exists; a finished one stays until deleted.
		return vmi == nil
	case virtv1.RunStrategyRerunOnFailure:
		if vmi != nil {
			return vmi.Status.Phase == virtv1.Failed
		}
		// virt-controller starts a RerunOnFailure VM only when the strategy just changed.
		return vm.Status.RunStrategy != rs || hasStartRequest(vm)
	case virtv1.RunStrategyManual:
		return vmi == nil && hasStartRequest(vm)
	default:
		return false
	}
}

func hasStartRequest(vm *virtv1.VirtualMachine) bool {
	reqs := vm.Status.StateChangeRequests
	return len(reqs) > 0 && reqs[0].Action == virtv1.StartRequest
}

// PowerPlan is what one reset does to the cluster: at most one VM patch and one VMI delete.
type PowerPlan struct {
	// RunStrategy, when set, is written to spec.runStrategy first.
	RunStrategy *virtv1.VirtualMachineRunStrategy
	// DeleteVMI deletes the current VMI (guarded by its UID) after the patch.
	DeleteVMI bool
	// Force deletes with a zero grace period.
	Force bool
}

// Noop reports whether the plan changes nothing (the system is already in the asked state).
func (p PowerPlan) Noop() bool { return p.RunStrategy == nil && !p.DeleteVMI }

// PlanReset maps a Redfish reset onto run strategies and VMI deletes.
//
// Powered on means runStrategy Once: virt-controller starts a VMI when none exists and never
// restarts one that finished, so a shutdown from inside the guest leaves the machine Off, as
// Ironic requires. Powered off means Halted. Restarts delete the VMI; under Once the controller
// then starts a fresh one, which is also what consumes a one-time boot override.
func PlanReset(rt redfish.ResetType, vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance) PowerPlan {
	rs := RunStrategy(vm)
	running := active(vmi) && rs != virtv1.RunStrategyHalted
	switch rt {
	case redfish.ResetPushPowerButton:
		if running {
			return PlanReset(redfish.ResetGracefulShutdown, vm, vmi)
		}
		return PlanReset(redfish.ResetOn, vm, vmi)
	case redfish.ResetOn:
		if running || (vmi == nil && willStart(vm, vmi, rs)) {
			return PowerPlan{}
		}
		p := PowerPlan{RunStrategy: strategyIf(rs, virtv1.RunStrategyOnce)}
		// A finished VMI blocks Once from starting a new one; a terminating one goes by itself.
		p.DeleteVMI = vmi != nil && isFinal(vmi) && vmi.DeletionTimestamp == nil
		return p
	case redfish.ResetForceOff:
		return PowerPlan{
			RunStrategy: strategyIf(rs, virtv1.RunStrategyHalted),
			DeleteVMI:   vmi != nil && !isFinal(vmi),
			Force:       true,
		}
	case redfish.ResetGracefulShutdown:
		// virt-controller stops the VMI with the guest's termination grace period.
		return PowerPlan{RunStrategy: strategyIf(rs, virtv1.RunStrategyHalted)}
	case redfish.ResetForceRestart, redfish.ResetGracefulRestart:
		if !running {
			return PlanReset(redfish.ResetOn, vm, vmi)
		}
		p := PowerPlan{DeleteVMI: true, Force: rt == redfish.ResetForceRestart}
		// Only Once and Always start a new VMI after a delete without further ado.
		if rs != virtv1.RunStrategyAlways {
			p.RunStrategy = strategyIf(rs, virtv1.RunStrategyOnce)
		}
		return p
	}
	return PowerPlan{}
}

func strategyIf(current, want virtv1.VirtualMachineRunStrategy) *virtv1.VirtualMachineRunStrategy {
	if current == want {
		return nil
	}
	return &want
}
