package kubevirt

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	virtv1 "kubevirt.io/api/core/v1"
)

func cpVM(name string, agentProbe bool) *virtv1.VirtualMachine {
	vm := &virtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: name, Labels: map[string]string{ControlPlaneLabel: ControlPlaneRole}},
		Spec:       virtv1.VirtualMachineSpec{Template: &virtv1.VirtualMachineInstanceTemplateSpec{}},
	}
	if agentProbe {
		vm.Spec.Template.Spec.ReadinessProbe = &virtv1.Probe{Handler: virtv1.Handler{GuestAgentPing: &virtv1.GuestAgentPing{}}}
	}
	return vm
}

func runningVMI(name, node string, conds ...virtv1.VirtualMachineInstanceCondition) *virtv1.VirtualMachineInstance {
	return &virtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: name, Labels: map[string]string{ControlPlaneLabel: ControlPlaneRole}},
		Status:     virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Running, NodeName: node, Conditions: conds},
	}
}

func cond(t virtv1.VirtualMachineInstanceConditionType, s corev1.ConditionStatus, msg string) virtv1.VirtualMachineInstanceCondition {
	return virtv1.VirtualMachineInstanceCondition{Type: t, Status: s, Message: msg}
}

func TestHealth(t *testing.T) {
	agentOK := cond(virtv1.VirtualMachineInstanceAgentConnected, corev1.ConditionTrue, "")
	tests := []struct {
		name       string
		m          Machine
		neighbours []*virtv1.VirtualMachineInstance
		health     string
		messages   []string
	}{
		{"off", Machine{VM: cpVM("cp-0", true)}, nil, "OK", nil},
		{"running, agent connected", Machine{VM: cpVM("cp-0", true), VMI: runningVMI("cp-0", "n1", agentOK)}, nil, "OK", nil},
		{"running without an agent probe: no agent expected", Machine{VM: cpVM("cp-0", false), VMI: runningVMI("cp-0", "n1")}, nil, "OK", nil},
		{"agent expected but not connected", Machine{VM: cpVM("cp-0", true), VMI: runningVMI("cp-0", "n1")}, nil, "Warning",
			[]string{"The QEMU guest agent is not connected."}},
		{"not ready", Machine{VM: cpVM("cp-0", false), VMI: runningVMI("cp-0", "n1", cond(virtv1.VirtualMachineInstanceReady, corev1.ConditionFalse, "probe failed"))}, nil, "Warning",
			[]string{"The virtual machine instance is not ready: probe failed"}},
		{"failed", Machine{VM: cpVM("cp-0", true), VMI: &virtv1.VirtualMachineInstance{
			ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "cp-0"},
			Status: virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Failed, Conditions: []virtv1.VirtualMachineInstanceCondition{
				cond(virtv1.VirtualMachineInstanceReady, corev1.ConditionFalse, "guest crashed")}}}}, nil, "Critical",
			[]string{"The virtual machine instance failed: guest crashed"}},
		{"two control-plane VMs on one node", Machine{VM: cpVM("cp-0", false), VMI: runningVMI("cp-0", "n1")},
			[]*virtv1.VirtualMachineInstance{runningVMI("cp-0", "n1"), runningVMI("cp-1", "n1")}, "Warning",
			[]string{"Placement violation: control-plane VM cp-0 shares hosting node n1 with cp-1; losing that node loses etcd quorum."}},
		{"a worker or another tenant on the node is fine", Machine{VM: cpVM("cp-0", false), VMI: runningVMI("cp-0", "n1")},
			[]*virtv1.VirtualMachineInstance{
				{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "worker-0"}},
				{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-b", Name: "cp-1", Labels: map[string]string{ControlPlaneLabel: ControlPlaneRole}}},
			}, "OK", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			health, conds := Health(tc.m, tc.neighbours)
			assert.Equal(t, tc.health, health)
			var msgs []string
			for _, c := range conds {
				msgs = append(msgs, c.Message)
				assert.Equal(t, tc.health, c.Severity)
			}
			assert.Equal(t, tc.messages, msgs)
		})
	}
}
