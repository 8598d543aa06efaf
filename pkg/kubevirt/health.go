package kubevirt

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// ControlPlaneLabel marks the control-plane VMs of a target cluster (one target cluster per
// namespace): two of them on one hosting node is a placement violation, since losing that node
// loses etcd quorum.
const ControlPlaneLabel = "role"

// ControlPlaneRole is ControlPlaneLabel's value on control-plane VMs.
const ControlPlaneRole = "control-plane"

// nodeIndex indexes VMIs by the hosting node they run on.
const nodeIndex = "node"

func vmiNode(obj any) ([]string, error) {
	if vmi, ok := obj.(*virtv1.VirtualMachineInstance); ok && vmi.Status.NodeName != "" {
		return []string{vmi.Status.NodeName}, nil
	}
	return nil, nil
}

// vmiIndexers are the indexes of every VMI cache.
var vmiIndexers = cache.Indexers{nodeIndex: vmiNode}

// Node is the hosting node of the machine's running VMI, or "".
func (m Machine) Node() string {
	if m.VMI == nil || isFinal(m.VMI) {
		return ""
	}
	return m.VMI.Status.NodeName
}

// Neighbours returns what the machine's health depends on beyond its VM and VMI: the live
// VMIs of its namespace on its hosting node, when it is a control-plane VM (for the placement
// check), else nil.
func (m Machine) Neighbours() []*virtv1.VirtualMachineInstance {
	if m.Peers == nil || m.VM.Labels[ControlPlaneLabel] != ControlPlaneRole {
		return nil
	}
	if node := m.Node(); node != "" {
		return m.Peers(node)
	}
	return nil
}

// onNode lists the namespace's live VMIs the cache places on node, by name. Placement checks
// compare control-plane VMs of one namespace, so other namespaces need not be looked at: the
// cost of a GET stays that of a node's few VMs of one tenant.
func (nc *nsCache) onNode(node string) []*virtv1.VirtualMachineInstance {
	objs, _ := nc.vmis.GetIndexer().ByIndex(nodeIndex, node)
	out := make([]*virtv1.VirtualMachineInstance, 0, len(objs))
	for _, o := range objs {
		if vmi := o.(*virtv1.VirtualMachineInstance); !isFinal(vmi) {
			out = append(out, vmi)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Health refines a machine's status from its VMI: a failed VMI is Critical; a VMI that is not
// Ready, or whose guest agent is expected (a guest-agent readiness probe) but not connected, is
// a Warning; and so is a control-plane VM sharing its hosting node with another control-plane
// VM of its namespace (neighbours: the live VMIs on the same node). Each problem comes with a
// condition that says what is wrong.
func Health(m Machine, neighbours []*virtv1.VirtualMachineInstance) (string, []redfish.Condition) {
	vmi := m.VMI
	if vmi == nil {
		return "OK", nil
	}
	if vmi.Status.Phase == virtv1.Failed {
		return "Critical", []redfish.Condition{redfish.Critical("The virtual machine instance failed: " + failureReason(vmi))}
	}
	if vmi.Status.Phase != virtv1.Running || vmi.DeletionTimestamp != nil {
		return "OK", nil
	}
	var conds []redfish.Condition
	if c := vmiCondition(vmi, virtv1.VirtualMachineInstanceReady); c != nil && c.Status == corev1.ConditionFalse {
		conds = append(conds, redfish.Warning("The virtual machine instance is not ready: "+orReason(c.Message, string(c.Reason))))
	}
	if expectsAgent(m.VM) {
		if c := vmiCondition(vmi, virtv1.VirtualMachineInstanceAgentConnected); c == nil || c.Status != corev1.ConditionTrue {
			conds = append(conds, redfish.Warning("The QEMU guest agent is not connected."))
		}
	}
	if peers := sharingNode(m, neighbours); len(peers) > 0 {
		conds = append(conds, redfish.Warning("Placement violation: control-plane VM "+m.VM.Name+" shares hosting node "+
			m.Node()+" with "+strings.Join(peers, ", ")+"; losing that node loses etcd quorum."))
	}
	if len(conds) > 0 {
		return "Warning", conds
	}
	return "OK", nil
}

// sharingNode names the other control-plane VMs of the namespace on the machine's node.
func sharingNode(m Machine, neighbours []*virtv1.VirtualMachineInstance) []string {
	if m.VM.Labels[ControlPlaneLabel] != ControlPlaneRole || m.Node() == "" {
		return nil
	}
	var out []string
	for _, n := range neighbours {
		if n.Namespace == m.VM.Namespace && n.Name != m.VM.Name && n.Labels[ControlPlaneLabel] == ControlPlaneRole {
			out = append(out, n.Name)
		}
	}
	return out
}

func expectsAgent(vm *virtv1.VirtualMachine) bool {
	t := vm.Spec.Template
	return t != nil && t.Spec.ReadinessProbe != nil && t.Spec.ReadinessProbe.GuestAgentPing != nil
}

func vmiCondition(vmi *virtv1.VirtualMachineInstance, t virtv1.VirtualMachineInstanceConditionType) *virtv1.VirtualMachineInstanceCondition {
	for i := range vmi.Status.Conditions {
		if vmi.Status.Conditions[i].Type == t {
			return &vmi.Status.Conditions[i]
		}
	}
	return nil
}

func failureReason(vmi *virtv1.VirtualMachineInstance) string {
	for _, c := range vmi.Status.Conditions {
		if c.Status == corev1.ConditionFalse && (c.Message != "" || c.Reason != "") {
			return orReason(c.Message, c.Reason)
		}
	}
	return "see VirtualMachineInstance " + vmi.Namespace + "/" + vmi.Name
}

func orReason(msg, reason string) string {
	if msg != "" {
		return msg
	}
	return reason
}
