package kubevirt

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

const (
	on          = redfish.PowerOn
	off         = redfish.PowerOff
	poweringOn  = redfish.PowerPoweringOn
	poweringOff = redfish.PowerPoweringOff
)

func TestRunStrategy(t *testing.T) {
	tests := []struct {
		name string
		vm   *virtv1.VirtualMachine
		want virtv1.VirtualMachineRunStrategy
	}{
		{"runStrategy Always", newVM(withRunStrategy(virtv1.RunStrategyAlways)), virtv1.RunStrategyAlways},
		{"runStrategy Once", newVM(withRunStrategy(virtv1.RunStrategyOnce)), virtv1.RunStrategyOnce},
		{"runStrategy Manual", newVM(withRunStrategy(virtv1.RunStrategyManual)), virtv1.RunStrategyManual},
		{"runStrategy wins over running", newVM(withRunStrategy(virtv1.RunStrategyHalted), withRunning(true)), virtv1.RunStrategyHalted},
		{"running true", newVM(withRunning(true)), virtv1.RunStrategyAlways},
		{"running false", newVM(withRunning(false)), virtv1.RunStrategyHalted},
		{"neither", newVM(), virtv1.RunStrategyHalted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, RunStrategy(tc.vm))
		})
	}
}

// vmiCase is one column of the PowerState matrix.
type vmiCase struct {
	name string
	vmi  func() *virtv1.VirtualMachineInstance
}

var vmiCases = []vmiCase{
	{"nil", func() *virtv1.VirtualMachineInstance { return nil }},
	{"Pending", func() *virtv1.VirtualMachineInstance { return newVMI(virtv1.Pending, "") }},
	{"Scheduling", func() *virtv1.VirtualMachineInstance { return newVMI(virtv1.Scheduling, "") }},
	{"Scheduled", func() *virtv1.VirtualMachineInstance { return newVMI(virtv1.Scheduled, "") }},
	{"Running", func() *virtv1.VirtualMachineInstance { return newVMI(virtv1.Running, "") }},
	{"Succeeded", func() *virtv1.VirtualMachineInstance { return newVMI(virtv1.Succeeded, "") }},
	{"Failed", func() *virtv1.VirtualMachineInstance { return newVMI(virtv1.Failed, "") }},
	{"deleting Running", func() *virtv1.VirtualMachineInstance { return terminating(newVMI(virtv1.Running, "")) }},
	{"deleting Pending", func() *virtv1.VirtualMachineInstance { return terminating(newVMI(virtv1.Pending, "")) }},
}

func TestPowerStateMatrix(t *testing.T) {
	// Columns follow vmiCases: nil, Pending, Scheduling, Scheduled, Running, Succeeded, Failed,
	// deleting Running, deleting Pending.
	tests := []struct {
		name string
		vm   func() *virtv1.VirtualMachine
		want [9]redfish.PowerState
	}{
		{"Always", func() *virtv1.VirtualMachine { return newVM(withRunStrategy(virtv1.RunStrategyAlways)) },
			[9]redfish.PowerState{poweringOn, poweringOn, poweringOn, poweringOn, on, poweringOn, poweringOn, poweringOff, poweringOff}},
		{"RerunOnFailure, status.runStrategy same", func() *virtv1.VirtualMachine {
			return newVM(withRunStrategy(virtv1.RunStrategyRerunOnFailure), withStatusRunStrategy(virtv1.RunStrategyRerunOnFailure))
		}, [9]redfish.PowerState{off, poweringOn, poweringOn, poweringOn, on, off, poweringOn, poweringOff, poweringOff}},
		{"RerunOnFailure, status.runStrategy different", func() *virtv1.VirtualMachine {
			return newVM(withRunStrategy(virtv1.RunStrategyRerunOnFailure), withStatusRunStrategy(virtv1.RunStrategyHalted))
		}, [9]redfish.PowerState{poweringOn, poweringOn, poweringOn, poweringOn, on, off, poweringOn, poweringOff, poweringOff}},
		{"RerunOnFailure, status.runStrategy unset (never reconciled)", func() *virtv1.VirtualMachine {
			return newVM(withRunStrategy(virtv1.RunStrategyRerunOnFailure))
		}, [9]redfish.PowerState{poweringOn, poweringOn, poweringOn, poweringOn, on, off, poweringOn, poweringOff, poweringOff}},
		{"RerunOnFailure, same status with a start request", func() *virtv1.VirtualMachine {
			return newVM(withRunStrategy(virtv1.RunStrategyRerunOnFailure), withStatusRunStrategy(virtv1.RunStrategyRerunOnFailure), withStartRequest())
		}, [9]redfish.PowerState{poweringOn, poweringOn, poweringOn, poweringOn, on, off, poweringOn, poweringOff, poweringOff}},
		{"RerunOnFailure, same status with a stop request", func() *virtv1.VirtualMachine {
			return newVM(withRunStrategy(virtv1.RunStrategyRerunOnFailure), withStatusRunStrategy(virtv1.RunStrategyRerunOnFailure), withStopRequest())
		}, [9]redfish.PowerState{off, poweringOn, poweringOn, poweringOn, on, off, poweringOn, poweringOff, poweringOff}},
		{"Once", func() *virtv1.VirtualMachine { return newVM(withRunStrategy(virtv1.RunStrategyOnce)) },
			[9]redfish.PowerState{poweringOn, poweringOn, poweringOn, poweringOn, on, off, off, poweringOff, poweringOff}},
		{"Halted", func() *virtv1.VirtualMachine { return newVM(withRunStrategy(virtv1.RunStrategyHalted)) },
			[9]redfish.PowerState{off, poweringOff, poweringOff, poweringOff, poweringOff, off, off, poweringOff, poweringOff}},
		{"Manual", func() *virtv1.VirtualMachine { return newVM(withRunStrategy(virtv1.RunStrategyManual)) },
			[9]redfish.PowerState{off, poweringOn, poweringOn, poweringOn, on, off, off, poweringOff, poweringOff}},
		{"Manual with a start request", func() *virtv1.VirtualMachine {
			return newVM(withRunStrategy(virtv1.RunStrategyManual), withStartRequest())
		}, [9]redfish.PowerState{poweringOn, poweringOn, poweringOn, poweringOn, on, off, off, poweringOff, poweringOff}},
		{"no runStrategy, running true", func() *virtv1.VirtualMachine { return newVM(withRunning(true)) },
			[9]redfish.PowerState{poweringOn, poweringOn, poweringOn, poweringOn, on, poweringOn, poweringOn, poweringOff, poweringOff}},
		{"no runStrategy, running false", func() *virtv1.VirtualMachine { return newVM(withRunning(false)) },
			[9]redfish.PowerState{off, poweringOff, poweringOff, poweringOff, poweringOff, off, off, poweringOff, poweringOff}},
		{"no runStrategy, no running", func() *virtv1.VirtualMachine { return newVM() },
			[9]redfish.PowerState{off, poweringOff, poweringOff, poweringOff, poweringOff, off, off, poweringOff, poweringOff}},
	}
	require.Len(t, vmiCases, 9)
	for _, tc := range tests {
		for i, vc := range vmiCases {
			t.Run(tc.name+"/"+vc.name, func(t *testing.T) {
				assert.Equal(t, tc.want[i], PowerState(tc.vm(), vc.vmi()))
			})
		}
	}
}

func TestPowerStateFinalVMIBeingDeleted(t *testing.T) {
	// A finished VMI on its way out counts like a finished one: the strategy decides.
	assert.Equal(t, poweringOn, PowerState(newVM(withRunStrategy(virtv1.RunStrategyAlways)), terminating(newVMI(virtv1.Succeeded, ""))))
	assert.Equal(t, off, PowerState(newVM(withRunStrategy(virtv1.RunStrategyOnce)), terminating(newVMI(virtv1.Succeeded, ""))))
	assert.Equal(t, off, PowerState(newVM(withRunStrategy(virtv1.RunStrategyHalted)), terminating(newVMI(virtv1.Failed, ""))))
}

func TestPowerStateDoesNotMutateInputs(t *testing.T) {
	vm := newVM(withRunStrategy(virtv1.RunStrategyOnce))
	vmi := newVMI(virtv1.Running, "")
	vmCopy, vmiCopy := vm.DeepCopy(), vmi.DeepCopy()
	_ = PowerState(vm, vmi)
	_ = PlanReset(redfish.ResetForceRestart, vm, vmi)
	assert.Equal(t, vmCopy, vm)
	assert.Equal(t, vmiCopy, vmi)
}

// planWant is the expected outcome of PlanReset.
type planWant struct {
	rs     virtv1.VirtualMachineRunStrategy // "" for no change
	delete bool
	force  bool
}

func (w planWant) String() string {
	return fmt.Sprintf("rs=%q delete=%v force=%v", w.rs, w.delete, w.force)
}

func TestPlanReset(t *testing.T) {
	type state struct {
		vm  func() *virtv1.VirtualMachine
		vmi func() *virtv1.VirtualMachineInstance
	}
	rs := func(s virtv1.VirtualMachineRunStrategy, opts ...vmOption) func() *virtv1.VirtualMachine {
		return func() *virtv1.VirtualMachine { return newVM(append([]vmOption{withRunStrategy(s)}, opts...)...) }
	}
	phase := func(p virtv1.VirtualMachineInstancePhase) func() *virtv1.VirtualMachineInstance {
		return func() *virtv1.VirtualMachineInstance { return newVMI(p, "") }
	}
	none := func() *virtv1.VirtualMachineInstance { return nil }
	deletingRunning := func() *virtv1.VirtualMachineInstance { return terminating(newVMI(virtv1.Running, "")) }
	deletingSucceeded := func() *virtv1.VirtualMachineInstance { return terminating(newVMI(virtv1.Succeeded, "")) }

	states := map[string]state{
		"Halted, no VMI":                        {rs(virtv1.RunStrategyHalted), none},
		"Halted, Running VMI (stopping)":        {rs(virtv1.RunStrategyHalted), phase(virtv1.Running)},
		"Halted, Succeeded VMI":                 {rs(virtv1.RunStrategyHalted), phase(virtv1.Succeeded)},
		"Once, no VMI (starting)":               {rs(virtv1.RunStrategyOnce), none},
		"Once, Pending":                         {rs(virtv1.RunStrategyOnce), phase(virtv1.Pending)},
		"Once, Running":                         {rs(virtv1.RunStrategyOnce), phase(virtv1.Running)},
		"Once, Succeeded (guest shut down)":     {rs(virtv1.RunStrategyOnce), phase(virtv1.Succeeded)},
		"Once, Failed":                          {rs(virtv1.RunStrategyOnce), phase(virtv1.Failed)},
		"Once, Running VMI being deleted":       {rs(virtv1.RunStrategyOnce), deletingRunning},
		"Once, Succeeded VMI being deleted":     {rs(virtv1.RunStrategyOnce), deletingSucceeded},
		"Always, no VMI":                        {rs(virtv1.RunStrategyAlways), none},
		"Always, Running":                       {rs(virtv1.RunStrategyAlways), phase(virtv1.Running)},
		"Always, Succeeded":                     {rs(virtv1.RunStrategyAlways), phase(virtv1.Succeeded)},
		"RerunOnFailure, Running":               {rs(virtv1.RunStrategyRerunOnFailure, withStatusRunStrategy(virtv1.RunStrategyRerunOnFailure)), phase(virtv1.Running)},
		"RerunOnFailure, no VMI, settled":       {rs(virtv1.RunStrategyRerunOnFailure, withStatusRunStrategy(virtv1.RunStrategyRerunOnFailure)), none},
		"RerunOnFailure, no VMI, just switched": {rs(virtv1.RunStrategyRerunOnFailure, withStatusRunStrategy(virtv1.RunStrategyHalted)), none},
		"RerunOnFailure, Succeeded":             {rs(virtv1.RunStrategyRerunOnFailure, withStatusRunStrategy(virtv1.RunStrategyRerunOnFailure)), phase(virtv1.Succeeded)},
		"Manual, no VMI":                        {rs(virtv1.RunStrategyManual), none},
		"Manual, Running":                       {rs(virtv1.RunStrategyManual), phase(virtv1.Running)},
		"running:true, Running":                 {func() *virtv1.VirtualMachine { return newVM(withRunning(true)) }, phase(virtv1.Running)},
		"running:false, no VMI":                 {func() *virtv1.VirtualMachine { return newVM(withRunning(false)) }, none},
	}

	const (
		once   = virtv1.RunStrategyOnce
		halted = virtv1.RunStrategyHalted
	)
	noop := planWant{}
	tests := []struct {
		rt    redfish.ResetType
		state string
		want  planWant
	}{
		// On
		{redfish.ResetOn, "Halted, no VMI", planWant{rs: once}},
		{redfish.ResetOn, "Halted, Running VMI (stopping)", planWant{rs: once}},
		{redfish.ResetOn, "Halted, Succeeded VMI", planWant{rs: once, delete: true}},
		{redfish.ResetOn, "Once, no VMI (starting)", noop},
		{redfish.ResetOn, "Once, Pending", noop},
		{redfish.ResetOn, "Once, Running", noop},
		{redfish.ResetOn, "Once, Succeeded (guest shut down)", planWant{delete: true}},
		{redfish.ResetOn, "Once, Failed", planWant{delete: true}},
		{redfish.ResetOn, "Once, Running VMI being deleted", noop},
		{redfish.ResetOn, "Once, Succeeded VMI being deleted", noop},
		{redfish.ResetOn, "Always, no VMI", noop},
		{redfish.ResetOn, "Always, Running", noop},
		{redfish.ResetOn, "Always, Succeeded", planWant{rs: once, delete: true}},
		{redfish.ResetOn, "RerunOnFailure, Running", noop},
		{redfish.ResetOn, "RerunOnFailure, no VMI, settled", planWant{rs: once}},
		{redfish.ResetOn, "RerunOnFailure, no VMI, just switched", noop},
		{redfish.ResetOn, "RerunOnFailure, Succeeded", planWant{rs: once, delete: true}},
		{redfish.ResetOn, "Manual, no VMI", planWant{rs: once}},
		{redfish.ResetOn, "Manual, Running", noop},
		{redfish.ResetOn, "running:true, Running", noop},
		{redfish.ResetOn, "running:false, no VMI", planWant{rs: once}},

		// ForceOff
		{redfish.ResetForceOff, "Halted, no VMI", noop},
		{redfish.ResetForceOff, "Halted, Running VMI (stopping)", planWant{delete: true, force: true}},
		{redfish.ResetForceOff, "Halted, Succeeded VMI", planWant{force: true}},
		{redfish.ResetForceOff, "Once, no VMI (starting)", planWant{rs: halted, force: true}},
		{redfish.ResetForceOff, "Once, Pending", planWant{rs: halted, delete: true, force: true}},
		{redfish.ResetForceOff, "Once, Running", planWant{rs: halted, delete: true, force: true}},
		{redfish.ResetForceOff, "Once, Succeeded (guest shut down)", planWant{rs: halted, force: true}},
		{redfish.ResetForceOff, "Once, Running VMI being deleted", planWant{rs: halted, delete: true, force: true}},
		{redfish.ResetForceOff, "Always, Running", planWant{rs: halted, delete: true, force: true}},
		{redfish.ResetForceOff, "Always, no VMI", planWant{rs: halted, force: true}},
		{redfish.ResetForceOff, "Manual, Running", planWant{rs: halted, delete: true, force: true}},
		{redfish.ResetForceOff, "running:true, Running", planWant{rs: halted, delete: true, force: true}},
		{redfish.ResetForceOff, "running:false, no VMI", noop},

		// GracefulShutdown: the controller stops the guest with its grace period.
		{redfish.ResetGracefulShutdown, "Halted, no VMI", noop},
		{redfish.ResetGracefulShutdown, "Halted, Running VMI (stopping)", noop},
		{redfish.ResetGracefulShutdown, "Once, Running", planWant{rs: halted}},
		{redfish.ResetGracefulShutdown, "Once, no VMI (starting)", planWant{rs: halted}},
		{redfish.ResetGracefulShutdown, "Always, Running", planWant{rs: halted}},
		{redfish.ResetGracefulShutdown, "RerunOnFailure, Running", planWant{rs: halted}},
		{redfish.ResetGracefulShutdown, "Manual, Running", planWant{rs: halted}},
		{redfish.ResetGracefulShutdown, "running:false, no VMI", noop},

		// ForceRestart
		{redfish.ResetForceRestart, "Once, Running", planWant{delete: true, force: true}},
		{redfish.ResetForceRestart, "Once, Pending", planWant{delete: true, force: true}},
		{redfish.ResetForceRestart, "Always, Running", planWant{delete: true, force: true}},
		{redfish.ResetForceRestart, "running:true, Running", planWant{delete: true, force: true}},
		{redfish.ResetForceRestart, "RerunOnFailure, Running", planWant{rs: once, delete: true, force: true}},
		{redfish.ResetForceRestart, "Manual, Running", planWant{rs: once, delete: true, force: true}},
		{redfish.ResetForceRestart, "Halted, no VMI", planWant{rs: once}},
		{redfish.ResetForceRestart, "Once, Succeeded (guest shut down)", planWant{delete: true}},
		{redfish.ResetForceRestart, "Once, no VMI (starting)", noop},

		// GracefulRestart: same as ForceRestart without the zero grace period.
		{redfish.ResetGracefulRestart, "Once, Running", planWant{delete: true}},
		{redfish.ResetGracefulRestart, "Always, Running", planWant{delete: true}},
		{redfish.ResetGracefulRestart, "RerunOnFailure, Running", planWant{rs: once, delete: true}},
		{redfish.ResetGracefulRestart, "Manual, Running", planWant{rs: once, delete: true}},
		{redfish.ResetGracefulRestart, "Halted, no VMI", planWant{rs: once}},
		{redfish.ResetGracefulRestart, "Once, Failed", planWant{delete: true}},

		// PushPowerButton toggles.
		{redfish.ResetPushPowerButton, "Once, Running", planWant{rs: halted}},
		{redfish.ResetPushPowerButton, "Always, Running", planWant{rs: halted}},
		{redfish.ResetPushPowerButton, "Halted, no VMI", planWant{rs: once}},
		{redfish.ResetPushPowerButton, "Once, Succeeded (guest shut down)", planWant{delete: true}},
		{redfish.ResetPushPowerButton, "Halted, Running VMI (stopping)", planWant{rs: once}},
		{redfish.ResetPushPowerButton, "Once, no VMI (starting)", noop},

		// Unknown reset types change nothing.
		{redfish.ResetType("Nmi"), "Once, Running", noop},
		{redfish.ResetType(""), "Halted, no VMI", noop},
	}
	for _, tc := range tests {
		t.Run(string(tc.rt)+"/"+tc.state, func(t *testing.T) {
			st, ok := states[tc.state]
			require.True(t, ok, "unknown state %q", tc.state)
			p := PlanReset(tc.rt, st.vm(), st.vmi())
			got := planWant{delete: p.DeleteVMI, force: p.Force}
			if p.RunStrategy != nil {
				got.rs = *p.RunStrategy
				assert.NotEmpty(t, got.rs, "a RunStrategy pointer must never point at an empty strategy")
			}
			// Force without a delete means nothing; compare it only where the plan deletes.
			if !tc.want.delete {
				got.force = tc.want.force
			}
			assert.Equal(t, tc.want, got, "got %v", got)
			assert.Equal(t, tc.want.rs == "" && !tc.want.delete, p.Noop(), "Noop()")
		})
	}
}

func TestPlanResetNeverWritesTheCurrentStrategy(t *testing.T) {
	// Whatever the reset, a plan never "changes" the run strategy to the one in force.
	strategies := []virtv1.VirtualMachineRunStrategy{
		virtv1.RunStrategyAlways, virtv1.RunStrategyRerunOnFailure, virtv1.RunStrategyOnce,
		virtv1.RunStrategyHalted, virtv1.RunStrategyManual,
	}
	for _, s := range strategies {
		for _, vc := range vmiCases {
			for _, rt := range redfish.ResetTypes {
				vm := newVM(withRunStrategy(s))
				p := PlanReset(rt, vm, vc.vmi())
				if p.RunStrategy != nil {
					assert.NotEqual(t, s, *p.RunStrategy, "%s with %s and VMI %s", rt, s, vc.name)
				}
			}
		}
	}
}

func TestPlanResetReachesTheAskedState(t *testing.T) {
	// Apply each plan the way virt-controller would, abstractly: after the plan, the VM's
	// PowerState must be heading for the asked state.
	strategies := []virtv1.VirtualMachineRunStrategy{
		virtv1.RunStrategyAlways, virtv1.RunStrategyOnce, virtv1.RunStrategyHalted, virtv1.RunStrategyManual,
	}
	onLike := map[redfish.PowerState]bool{on: true, poweringOn: true}
	for _, s := range strategies {
		for _, vc := range vmiCases {
			for _, rt := range []redfish.ResetType{redfish.ResetOn, redfish.ResetForceOff, redfish.ResetGracefulShutdown} {
				vm := newVM(withRunStrategy(s), withStatusRunStrategy(s))
				vmi := vc.vmi()
				p := PlanReset(rt, vm, vmi)
				if p.RunStrategy != nil {
					vm.Spec.RunStrategy = p.RunStrategy
				}
				if p.DeleteVMI {
					if vmi != nil && isFinal(vmi) {
						vmi = nil // a finished VMI goes at once
					} else {
						vmi = terminating(vmi)
					}
				}
				ps := PowerState(vm, vmi)
				if rt == redfish.ResetOn {
					// A VMI being deleted is PoweringOff until it is gone; then the strategy starts it.
					if vmi != nil && vmi.DeletionTimestamp != nil && !isFinal(vmi) {
						assert.Equal(t, poweringOff, ps, "%s/%s/%s", rt, s, vc.name)
						ps = PowerState(vm, nil)
					}
					assert.True(t, onLike[ps], "%s with %s and VMI %s gives %s", rt, s, vc.name, ps)
				} else {
					assert.False(t, onLike[ps], "%s with %s and VMI %s gives %s", rt, s, vc.name, ps)
				}
			}
		}
	}
}
