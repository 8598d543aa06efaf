package preflight

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	virtv1 "kubevirt.io/api/core/v1"
)

const ns = "tenant-a"

var cpLabels = map[string]string{"cluster": "tenant-a", "role": "control-plane"}

func rl(cpu, mem string) corev1.ResourceList {
	out := corev1.ResourceList{}
	if cpu != "" {
		out[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		out[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// goodVM follows every rule: anti-affinity, eviction None, guest agent probe, Guaranteed.
func goodVM(name string) virtv1.VirtualMachine {
	labels := map[string]string{"kubevirt.io/vm": name}
	for k, v := range cpLabels {
		labels[k] = v
	}
	return virtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("vm-" + name)},
		Spec: virtv1.VirtualMachineSpec{
			RunStrategy: ptr(virtv1.RunStrategyOnce),
			Template: &virtv1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: virtv1.VirtualMachineInstanceSpec{
					Domain: virtv1.DomainSpec{
						Resources: virtv1.ResourceRequirements{Requests: rl("4", "16Gi"), Limits: rl("4", "16Gi")},
					},
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
							LabelSelector: &metav1.LabelSelector{MatchLabels: cpLabels},
							TopologyKey:   "kubernetes.io/hostname",
						}},
					}},
					EvictionStrategy: ptr(virtv1.EvictionStrategyNone),
					ReadinessProbe: &virtv1.Probe{
						Handler:             virtv1.Handler{GuestAgentPing: &virtv1.GuestAgentPing{}},
						InitialDelaySeconds: 120, PeriodSeconds: 10,
					},
				},
			},
		},
	}
}

func runningVMI(vm virtv1.VirtualMachine, node string) virtv1.VirtualMachineInstance {
	return virtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name: vm.Name, Namespace: vm.Namespace, UID: types.UID("vmi-" + vm.Name),
			Labels: map[string]string{virtv1.NodeNameLabel: node},
		},
		Spec: *vm.Spec.Template.Spec.DeepCopy(),
		Status: virtv1.VirtualMachineInstanceStatus{
			Phase: virtv1.Running, NodeName: node,
			Conditions: []virtv1.VirtualMachineInstanceCondition{
				{Type: virtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue},
				{Type: virtv1.VirtualMachineInstanceAgentConnected, Status: corev1.ConditionTrue},
			},
		},
	}
}

func node(name, cpu, mem string) corev1.Node {
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name, virtv1.NodeSchedulable: "true",
		}},
		Status: corev1.NodeStatus{
			Allocatable: rl(cpu, mem), Capacity: rl(cpu, mem),
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

func pdb(name string, minAvailable *intstr.IntOrString, maxUnavailable *intstr.IntOrString, sel map[string]string) policyv1.PodDisruptionBudget {
	return policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: minAvailable, MaxUnavailable: maxUnavailable,
			Selector: &metav1.LabelSelector{MatchLabels: sel},
		},
	}
}

func intOr(i int) *intstr.IntOrString { v := intstr.FromInt32(int32(i)); return &v }

// good is a healthy cluster: cp-0..2 on node-1..3, node-4 spare, one PDB minAvailable 2.
func good() Input {
	in := Input{Namespace: ns}
	for i, name := range []string{"cp-0", "cp-1", "cp-2"} {
		vm := goodVM(name)
		in.VMs = append(in.VMs, vm)
		in.VMIs = append(in.VMIs, runningVMI(vm, []string{"node-1", "node-2", "node-3"}[i]))
	}
	for _, n := range []string{"node-1", "node-2", "node-3", "node-4"} {
		in.Nodes = append(in.Nodes, node(n, "16", "64Gi"))
	}
	in.PDBs = []policyv1.PodDisruptionBudget{pdb("control-plane", intOr(2), nil, cpLabels)}
	return in
}

func each(in *Input, f func(vm *virtv1.VirtualMachine)) {
	for i := range in.VMs {
		f(&in.VMs[i])
	}
}

// evictionStrategy sets the evictionStrategy of every VM (nil unsets it).
func evictionStrategy(e *virtv1.EvictionStrategy) func(*Input) {
	return func(in *Input) {
		each(in, func(vm *virtv1.VirtualMachine) { vm.Spec.Template.Spec.EvictionStrategy = e })
	}
}

// pdbSelectsWorkers adds two worker VMs of the same cluster and widens the PDB's selector to
// select them too.
func pdbSelectsWorkers(in *Input) {
	for _, name := range []string{"worker-0", "worker-1"} {
		w := goodVM(name)
		w.Spec.Template.ObjectMeta.Labels = map[string]string{"cluster": "tenant-a", "role": "worker"}
		in.OtherVMs = append(in.OtherVMs, w)
	}
	in.PDBs[0].Spec.Selector.MatchLabels = map[string]string{"cluster": "tenant-a"}
}

func eachVMI(in *Input, f func(vmi *virtv1.VirtualMachineInstance)) {
	for i := range in.VMIs {
		f(&in.VMIs[i])
	}
}

type want struct {
	vm      string
	verdict Verdict
	message string
}

// byKey indexes results by "vm/rule".
func byKey(rs []Result) map[string]Result {
	out := map[string]Result{}
	for _, r := range rs {
		out[r.VM+"/"+string(r.Rule)] = r
	}
	return out
}

const goodSpare = "(4 CPU, 16Gi) can restart on node-4 (16 CPU, 64Gi free)"

var goodMessages = map[Rule]map[string]string{
	RuleNodeSpread: {
		"cp-0": "Required pod anti-affinity on kubernetes.io/hostname keeps cp-0 off the nodes of cp-1 and cp-2",
		"cp-1": "Required pod anti-affinity on kubernetes.io/hostname keeps cp-1 off the nodes of cp-0 and cp-2",
		"cp-2": "Required pod anti-affinity on kubernetes.io/hostname keeps cp-2 off the nodes of cp-0 and cp-1",
	},
	RuleDisruptionBudget:    {"*": "PodDisruptionBudget control-plane (minAvailable 2) selects all 3 VMs: a drain evicts at most 1 at a time"},
	RuleEvictionStrategy:    {"*": "evictionStrategy is None: a drain shuts the VM down, as the PodDisruptionBudget allows, instead of migrating it"},
	RuleGuestAgentProbe:     {"*": "the readiness probe pings the QEMU guest agent (guestAgentPing)"},
	RuleGuestAgentConnected: {"*": "the running VMI reports AgentConnected=True"},
	RuleGuaranteedResources: {"*": "Guaranteed: requests equal limits (cpu 4, memory 16Gi)"},
	RulePlacement: {
		"cp-0": "runs on node node-1, where no other VM of the set runs (cp-1 on node-2, cp-2 on node-3)",
		"cp-1": "runs on node node-2, where no other VM of the set runs (cp-0 on node-1, cp-2 on node-3)",
		"cp-2": "runs on node node-3, where no other VM of the set runs (cp-0 on node-1, cp-1 on node-2)",
	},
	RuleSpareCapacity: {
		"cp-0": "if node node-1 is drained or lost, cp-0 " + goodSpare,
		"cp-1": "if node node-2 is drained or lost, cp-1 " + goodSpare,
		"cp-2": "if node node-3 is drained or lost, cp-2 " + goodSpare,
	},
}

func TestGoodCluster(t *testing.T) {
	rs := Check(good())
	require.Len(t, rs, 3*len(Rules))
	i := 0
	for _, vm := range []string{"cp-0", "cp-1", "cp-2"} {
		for _, rule := range Rules {
			r := rs[i]
			i++
			assert.Equal(t, vm, r.VM)
			assert.Equal(t, rule, r.Rule)
			assert.Equal(t, Pass, r.Verdict, "%s %s: %s", vm, rule, r.Message)
			msg := goodMessages[rule][vm]
			if msg == "" {
				msg = goodMessages[rule]["*"]
			}
			assert.Equal(t, msg, r.Message, "%s %s", vm, rule)
			assert.Empty(t, r.Remediation)
		}
	}
	assert.Equal(t, Summary{Pass: 24, Verdict: Pass}, Summarize(rs))
}

// TestRules breaks a good cluster one way at a time and checks the verdicts and messages of
// the rule concerned; every other rule must still pass.
func TestRules(t *testing.T) {
	all := func(v Verdict, msg func(vm string) string) []want {
		var out []want
		for _, vm := range []string{"cp-0", "cp-1", "cp-2"} {
			out = append(out, want{vm, v, msg(vm)})
		}
		return out
	}
	same := func(v Verdict, msg string) []want { return all(v, func(string) string { return msg }) }
	others := map[string]string{"cp-0": "cp-1 and cp-2", "cp-1": "cp-0 and cp-2", "cp-2": "cp-0 and cp-1"}
	cases := []struct {
		name   string
		break_ func(in *Input)
		// want lists the results of these rules; all others must pass.
		want map[Rule][]want
	}{
		// ---- node-spread ----
		{
			name:   "no anti-affinity",
			break_: func(in *Input) { each(in, func(vm *virtv1.VirtualMachine) { vm.Spec.Template.Spec.Affinity = nil }) },
			want: map[Rule][]want{RuleNodeSpread: all(Fail, func(vm string) string {
				return "nothing keeps " + vm + " off the nodes of " + others[vm] + ": no required pod anti-affinity or topology spread constraint (maxSkew 1, DoNotSchedule) on kubernetes.io/hostname selects their virt-launcher pods"
			})},
		},
		{
			name: "preferred anti-affinity only",
			break_: func(in *Input) {
				each(in, func(vm *virtv1.VirtualMachine) {
					a := vm.Spec.Template.Spec.Affinity.PodAntiAffinity
					a.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: a.RequiredDuringSchedulingIgnoredDuringExecution[0]}}
					a.RequiredDuringSchedulingIgnoredDuringExecution = nil
				})
			},
			want: map[Rule][]want{RuleNodeSpread: all(Warn, func(vm string) string {
				return "only preferred pod anti-affinity keeps " + vm + " away from " + others[vm] + ": the scheduler may still put them on one node"
			})},
		},
		{
			name: "anti-affinity on zones does not keep nodes apart",
			break_: func(in *Input) {
				each(in, func(vm *virtv1.VirtualMachine) {
					vm.Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey = "topology.kubernetes.io/zone"
				})
			},
			want: map[Rule][]want{RuleNodeSpread: all(Fail, func(vm string) string {
				return "nothing keeps " + vm + " off the nodes of " + others[vm] + ": no required pod anti-affinity or topology spread constraint (maxSkew 1, DoNotSchedule) on kubernetes.io/hostname selects their virt-launcher pods"
			})},
		},
		{
			name: "anti-affinity selector misses one VM",
			break_: func(in *Input) {
				in.VMs[2].Spec.Template.ObjectMeta.Labels["role"] = "spare"
			},
			want: map[Rule][]want{
				RuleNodeSpread: {
					{"cp-0", Fail, "nothing keeps cp-0 off the node of cp-2: no required pod anti-affinity or topology spread constraint (maxSkew 1, DoNotSchedule) on kubernetes.io/hostname selects its virt-launcher pod"},
					{"cp-1", Fail, "nothing keeps cp-1 off the node of cp-2: no required pod anti-affinity or topology spread constraint (maxSkew 1, DoNotSchedule) on kubernetes.io/hostname selects its virt-launcher pod"},
					{"cp-2", Pass, "Required pod anti-affinity on kubernetes.io/hostname keeps cp-2 off the nodes of cp-0 and cp-1"},
				},
				RuleDisruptionBudget: {
					{"cp-0", Fail, "PodDisruptionBudget control-plane selects cp-0 and cp-1 but not cp-2: it cannot keep 2 of the 3 VMs running"},
					{"cp-1", Fail, "PodDisruptionBudget control-plane selects cp-0 and cp-1 but not cp-2: it cannot keep 2 of the 3 VMs running"},
					{"cp-2", Fail, "no PodDisruptionBudget selects the virt-launcher pod of cp-2: a drain may evict it while other VMs of the set are down"},
				},
			},
		},
		{
			name: "strict topology spread instead of anti-affinity",
			break_: func(in *Input) {
				each(in, func(vm *virtv1.VirtualMachine) {
					vm.Spec.Template.Spec.Affinity = nil
					vm.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule,
						LabelSelector: &metav1.LabelSelector{MatchLabels: cpLabels},
					}}
				})
			},
			want: map[Rule][]want{RuleNodeSpread: all(Pass, func(vm string) string {
				return "A topology spread constraint (maxSkew 1, DoNotSchedule) on kubernetes.io/hostname keeps " + vm + " off the nodes of " + others[vm]
			})},
		},
		{
			name: "loose topology spread",
			break_: func(in *Input) {
				each(in, func(vm *virtv1.VirtualMachine) {
					vm.Spec.Template.Spec.Affinity = nil
					vm.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway,
						LabelSelector: &metav1.LabelSelector{MatchLabels: cpLabels},
					}}
				})
			},
			want: map[Rule][]want{RuleNodeSpread: all(Warn, func(vm string) string {
				return "only a topology spread constraint with maxSkew 1 and ScheduleAnyway keeps " + vm + " away from " + others[vm] + ": the scheduler may still put them on one node"
			})},
		},
		// ---- disruption-budget ----
		{
			name:   "no PDB",
			break_: func(in *Input) { in.PDBs = nil },
			want: map[Rule][]want{RuleDisruptionBudget: all(Fail, func(vm string) string {
				return "no PodDisruptionBudget selects the virt-launcher pod of " + vm + ": a drain may evict it while other VMs of the set are down"
			})},
		},
		{
			name:   "PDB minAvailable 1",
			break_: func(in *Input) { in.PDBs[0].Spec.MinAvailable = intOr(1) },
			want: map[Rule][]want{RuleDisruptionBudget: same(Fail,
				"PodDisruptionBudget control-plane (minAvailable 1) lets 2 of the 3 VMs be evicted at once: etcd needs 2 running for quorum")},
		},
		{
			name:   "PDB minAvailable 3 blocks drains",
			break_: func(in *Input) { in.PDBs[0].Spec.MinAvailable = intOr(3) },
			want: map[Rule][]want{RuleDisruptionBudget: same(Warn,
				"PodDisruptionBudget control-plane (minAvailable 3) allows no eviction of the 3 VMs: every drain of their nodes hangs")},
		},
		{
			name:   "PDB maxUnavailable 1",
			break_: func(in *Input) { in.PDBs[0].Spec.MinAvailable, in.PDBs[0].Spec.MaxUnavailable = nil, intOr(1) },
			want: map[Rule][]want{RuleDisruptionBudget: same(Warn,
				"PodDisruptionBudget control-plane uses maxUnavailable 1, which the disruption controller cannot compute for virt-launcher pods (their controller, the VMI, has no scale subresource): it allows no eviction and drains hang; use an integer minAvailable")},
		},
		{
			name: "two PDBs",
			break_: func(in *Input) {
				in.PDBs = append(in.PDBs, pdb("extra", intOr(2), nil, map[string]string{"cluster": "tenant-a"}))
			},
			want: map[Rule][]want{RuleDisruptionBudget: all(Warn, func(vm string) string {
				return "PodDisruptionBudgets control-plane and extra all select the virt-launcher pod of " + vm + ": the eviction API refuses pods with more than one budget, so drains hang"
			})},
		},
		{
			name: "PDB selecting on the launcher label",
			break_: func(in *Input) {
				in.PDBs[0].Spec.Selector.MatchLabels = map[string]string{"kubevirt.io": "virt-launcher"}
			},
			want: nil,
		},
		{
			name:   "PDB also selects the worker VMs",
			break_: pdbSelectsWorkers,
			want: map[Rule][]want{RuleDisruptionBudget: same(Fail,
				"PodDisruptionBudget control-plane (minAvailable 2) also selects worker-0 and worker-1, so it lets 3 of its 5 pods be evicted at once, as many as 3 of the 3 VMs: etcd needs 2 running for quorum")},
		},
		{
			name: "PDB selecting the workers too, sized for it",
			break_: func(in *Input) {
				pdbSelectsWorkers(in)
				in.PDBs[0].Spec.MinAvailable = intOr(4)
			},
			want: map[Rule][]want{RuleDisruptionBudget: same(Pass,
				"PodDisruptionBudget control-plane (minAvailable 4) selects all 3 VMs and worker-0 and worker-1: a drain evicts at most 1 of them at a time")},
		},
		{
			name:   "PDB without a budget",
			break_: func(in *Input) { in.PDBs[0].Spec.MinAvailable = nil },
			want: map[Rule][]want{RuleDisruptionBudget: same(Fail,
				"PodDisruptionBudget control-plane sets neither minAvailable nor maxUnavailable: it lets every VM be evicted")},
		},
		// ---- eviction-strategy ----
		{
			name:   "eviction LiveMigrate",
			break_: evictionStrategy(ptr(virtv1.EvictionStrategyLiveMigrate)),
			want: map[Rule][]want{RuleEvictionStrategy: same(Fail,
				"evictionStrategy is LiveMigrate: a drain live-migrates the VM, and live migration is not supported for control-plane VMs")},
		},
		{
			name:   "eviction LiveMigrateIfPossible",
			break_: evictionStrategy(ptr(virtv1.EvictionStrategyLiveMigrateIfPossible)),
			want: map[Rule][]want{RuleEvictionStrategy: same(Fail,
				"evictionStrategy is LiveMigrateIfPossible: a drain live-migrates the VM, and live migration is not supported for control-plane VMs")},
		},
		{
			name:   "eviction External",
			break_: evictionStrategy(ptr(virtv1.EvictionStrategyExternal)),
			want: map[Rule][]want{RuleEvictionStrategy: same(Fail,
				"evictionStrategy is External: a drain waits for an external controller to act on the VM, and none does for control-plane VMs")},
		},
		{
			name:   "eviction unset",
			break_: evictionStrategy(nil),
			want: map[Rule][]want{RuleEvictionStrategy: same(Warn,
				"evictionStrategy is not set: the cluster-wide default (KubeVirt CR spec.configuration.evictionStrategy) applies, which may be LiveMigrate")},
		},
		// ---- guest agent ----
		{
			name: "no guest agent",
			break_: func(in *Input) {
				each(in, func(vm *virtv1.VirtualMachine) { vm.Spec.Template.Spec.ReadinessProbe = nil })
				eachVMI(in, func(vmi *virtv1.VirtualMachineInstance) { vmi.Status.Conditions = vmi.Status.Conditions[:1] })
			},
			want: map[Rule][]want{
				RuleGuestAgentProbe: same(Fail, "no readiness probe: nothing checks that the QEMU guest agent runs (readinessProbe.guestAgentPing)"),
				RuleGuestAgentConnected: same(Fail,
					"the running VMI has no AgentConnected condition: the QEMU guest agent is not running in the guest, or has not connected yet"),
			},
		},
		{
			name: "probe without guest agent, agent disconnected",
			break_: func(in *Input) {
				each(in, func(vm *virtv1.VirtualMachine) {
					vm.Spec.Template.Spec.ReadinessProbe.Handler = virtv1.Handler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(6443)}}
				})
				eachVMI(in, func(vmi *virtv1.VirtualMachineInstance) {
					vmi.Status.Conditions[1].Status, vmi.Status.Conditions[1].Reason = corev1.ConditionFalse, "AgentDisconnected"
				})
			},
			want: map[Rule][]want{
				RuleGuestAgentProbe: same(Fail, "the readiness probe uses tcpSocket, not guestAgentPing: it does not tell whether the QEMU guest agent runs"),
				RuleGuestAgentConnected: same(Fail,
					"the running VMI reports AgentConnected=False (AgentDisconnected): the QEMU guest agent is not running in the guest, or has not connected yet"),
			},
		},
		// ---- guaranteed-resources ----
		{
			name: "Burstable resources",
			break_: func(in *Input) {
				each(in, func(vm *virtv1.VirtualMachine) {
					vm.Spec.Template.Spec.Domain.Resources.Requests = rl("1", "16Gi")
				})
			},
			want: map[Rule][]want{RuleGuaranteedResources: same(Fail, "Burstable, not Guaranteed: requests.cpu 1 differs from limits.cpu 4")},
		},
		{
			name: "no limits",
			break_: func(in *Input) {
				each(in, func(vm *virtv1.VirtualMachine) { vm.Spec.Template.Spec.Domain.Resources.Limits = nil })
			},
			want: map[Rule][]want{RuleGuaranteedResources: same(Fail, "Burstable, not Guaranteed: limits.cpu is not set; limits.memory is not set")},
		},
		{
			name: "memory request differs",
			break_: func(in *Input) {
				each(in, func(vm *virtv1.VirtualMachine) { vm.Spec.Template.Spec.Domain.Resources.Requests = rl("4", "8Gi") })
			},
			want: map[Rule][]want{RuleGuaranteedResources: same(Fail, "Burstable, not Guaranteed: requests.memory 8Gi differs from limits.memory 16Gi")},
		},
		{
			name: "dedicated CPUs with guest memory",
			break_: func(in *Input) {
				each(in, func(vm *virtv1.VirtualMachine) {
					d := &vm.Spec.Template.Spec.Domain
					d.Resources = virtv1.ResourceRequirements{}
					d.CPU = &virtv1.CPU{Cores: 4, DedicatedCPUPlacement: true}
					d.Memory = &virtv1.Memory{Guest: ptr(resource.MustParse("16Gi"))}
				})
			},
			want: map[Rule][]want{RuleGuaranteedResources: same(Pass,
				"Guaranteed: dedicatedCpuPlacement with 4 vCPUs and memory 16Gi: KubeVirt sets the virt-launcher pod's requests equal to its limits")},
		},
		// ---- placement ----
		{
			name: "all three VMs on one node",
			break_: func(in *Input) {
				eachVMI(in, func(vmi *virtv1.VirtualMachineInstance) { vmi.Status.NodeName = "node-1" })
			},
			want: map[Rule][]want{
				RulePlacement: all(Fail, func(vm string) string {
					return "runs on node node-1 together with " + others[vm] + ": losing or draining node-1 stops 3 of the 3 VMs and etcd loses quorum"
				}),
				RuleSpareCapacity: all(Pass, func(vm string) string {
					return "if node node-1 is drained or lost, " + vm + " (4 CPU, 16Gi) can restart on 3 nodes: node-2 (16 CPU, 64Gi free), node-3 (16 CPU, 64Gi free), node-4 (16 CPU, 64Gi free)"
				}),
			},
		},
		{
			name:   "two VMs on one node",
			break_: func(in *Input) { in.VMIs[1].Status.NodeName = "node-1" },
			want: map[Rule][]want{
				RulePlacement: {
					{"cp-0", Fail, "runs on node node-1 together with cp-1: losing or draining node-1 stops 2 of the 3 VMs and etcd loses quorum"},
					{"cp-1", Fail, "runs on node node-1 together with cp-0: losing or draining node-1 stops 2 of the 3 VMs and etcd loses quorum"},
					{"cp-2", Pass, "runs on node node-3, where no other VM of the set runs (cp-0 on node-1, cp-1 on node-1)"},
				},
				RuleSpareCapacity: {
					{"cp-0", Pass, "if node node-1 is drained or lost, cp-0 (4 CPU, 16Gi) can restart on 2 nodes: node-2 (16 CPU, 64Gi free), node-4 (16 CPU, 64Gi free)"},
					{"cp-1", Pass, "if node node-1 is drained or lost, cp-1 (4 CPU, 16Gi) can restart on 2 nodes: node-2 (16 CPU, 64Gi free), node-4 (16 CPU, 64Gi free)"},
					{"cp-2", Pass, "if node node-3 is drained or lost, cp-2 (4 CPU, 16Gi) can restart on 2 nodes: node-2 (16 CPU, 64Gi free), node-4 (16 CPU, 64Gi free)"},
				},
			},
		},
		{
			name:   "VM not running",
			break_: func(in *Input) { in.VMIs = in.VMIs[:2] },
			want: map[Rule][]want{
				RuleGuestAgentConnected: {{"cp-0", Pass, "the running VMI reports AgentConnected=True"}, {"cp-1", Pass, "the running VMI reports AgentConnected=True"},
					{"cp-2", Warn, "cp-2 is not running, so the guest agent connection cannot be checked"}},
				RulePlacement: {
					{"cp-0", Pass, "runs on node node-1, where no other VM of the set runs (cp-1 on node-2)"},
					{"cp-1", Pass, "runs on node node-2, where no other VM of the set runs (cp-0 on node-1)"},
					{"cp-2", Warn, "cp-2 is not running, so it holds no place and no etcd member"},
				},
				RuleSpareCapacity: {
					{"cp-0", Pass, "if node node-1 is drained or lost, cp-0 (4 CPU, 16Gi) can restart on 2 nodes: node-3 (16 CPU, 64Gi free), node-4 (16 CPU, 64Gi free)"},
					{"cp-1", Pass, "if node node-2 is drained or lost, cp-1 (4 CPU, 16Gi) can restart on 2 nodes: node-3 (16 CPU, 64Gi free), node-4 (16 CPU, 64Gi free)"},
					{"cp-2", Pass, "cp-2 (4 CPU, 16Gi) is not running; it can start on 2 nodes: node-3 (16 CPU, 64Gi free), node-4 (16 CPU, 64Gi free)"},
				},
			},
		},
		{
			name: "VMI pending",
			break_: func(in *Input) {
				v := &in.VMIs[2]
				v.Status = virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Pending}
				delete(v.Labels, virtv1.NodeNameLabel)
			},
			want: map[Rule][]want{
				RuleGuestAgentConnected: {{"cp-0", Pass, "the running VMI reports AgentConnected=True"}, {"cp-1", Pass, "the running VMI reports AgentConnected=True"},
					{"cp-2", Warn, "the VMI is Pending, not Running yet, so the guest agent connection cannot be checked"}},
				RulePlacement: {
					{"cp-0", Pass, "runs on node node-1, where no other VM of the set runs (cp-1 on node-2)"},
					{"cp-1", Pass, "runs on node node-2, where no other VM of the set runs (cp-0 on node-1)"},
					{"cp-2", Warn, "the VMI is Pending and not on a node yet"},
				},
				RuleSpareCapacity: {
					{"cp-0", Pass, "if node node-1 is drained or lost, cp-0 (4 CPU, 16Gi) can restart on 2 nodes: node-3 (16 CPU, 64Gi free), node-4 (16 CPU, 64Gi free)"},
					{"cp-1", Pass, "if node node-2 is drained or lost, cp-1 (4 CPU, 16Gi) can restart on 2 nodes: node-3 (16 CPU, 64Gi free), node-4 (16 CPU, 64Gi free)"},
					{"cp-2", Pass, "cp-2 (4 CPU, 16Gi) is not running; it can start on 2 nodes: node-3 (16 CPU, 64Gi free), node-4 (16 CPU, 64Gi free)"},
				},
			},
		},
		// ---- spare-capacity ----
		{
			name:   "insufficient spare capacity",
			break_: func(in *Input) { in.Nodes[3] = node("node-4", "2", "64Gi") },
			want: map[Rule][]want{RuleSpareCapacity: {
				{"cp-0", Fail, "if node node-1 is drained or lost, cp-0 (4 CPU, 16Gi) has no node to restart on: node-2 hosts cp-1; node-3 hosts cp-2; node-4 has only 2 CPU, 64Gi free"},
				{"cp-1", Fail, "if node node-2 is drained or lost, cp-1 (4 CPU, 16Gi) has no node to restart on: node-1 hosts cp-0; node-3 hosts cp-2; node-4 has only 2 CPU, 64Gi free"},
				{"cp-2", Fail, "if node node-3 is drained or lost, cp-2 (4 CPU, 16Gi) has no node to restart on: node-1 hosts cp-0; node-2 hosts cp-1; node-4 has only 2 CPU, 64Gi free"},
			}},
		},
		{
			name: "spare node full of another tenant's VMs",
			break_: func(in *Input) {
				other := goodVM("big")
				other.Namespace = "tenant-b"
				other.Spec.Template.Spec.Domain.Resources = virtv1.ResourceRequirements{Requests: rl("14", "32Gi"), Limits: rl("14", "32Gi")}
				in.VMIs = append(in.VMIs, runningVMI(other, "node-4"))
			},
			want: map[Rule][]want{RuleSpareCapacity: {
				{"cp-0", Fail, "if node node-1 is drained or lost, cp-0 (4 CPU, 16Gi) has no node to restart on: node-2 hosts cp-1; node-3 hosts cp-2; node-4 has only 2 CPU, 32Gi free"},
				{"cp-1", Fail, "if node node-2 is drained or lost, cp-1 (4 CPU, 16Gi) has no node to restart on: node-1 hosts cp-0; node-3 hosts cp-2; node-4 has only 2 CPU, 32Gi free"},
				{"cp-2", Fail, "if node node-3 is drained or lost, cp-2 (4 CPU, 16Gi) has no node to restart on: node-1 hosts cp-0; node-2 hosts cp-1; node-4 has only 2 CPU, 32Gi free"},
			}},
		},
		{
			name: "launcher pods count with their real requests, other pods too",
			break_: func(in *Input) {
				// cp-0's launcher pod asks for more than its spec (overhead); a daemon pod
				// takes 12 CPU of node-4.
				in.Pods = []corev1.Pod{
					{
						ObjectMeta: metav1.ObjectMeta{Name: "virt-launcher-cp-0-abcde", Namespace: ns, Labels: map[string]string{
							virtv1.AppLabel: "virt-launcher", virtv1.CreatedByLabel: "vmi-cp-0",
						}},
						Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{
							Name: "compute", Resources: corev1.ResourceRequirements{Requests: rl("5", "17Gi"), Limits: rl("5", "17Gi")},
						}}},
						Status: corev1.PodStatus{Phase: corev1.PodRunning},
					},
					{
						ObjectMeta: metav1.ObjectMeta{Name: "daemon", Namespace: "kube-system"},
						Spec: corev1.PodSpec{NodeName: "node-4", Containers: []corev1.Container{{
							Name: "d", Resources: corev1.ResourceRequirements{Requests: rl("12", "1Gi")},
						}}},
						Status: corev1.PodStatus{Phase: corev1.PodRunning},
					},
				}
			},
			want: map[Rule][]want{RuleSpareCapacity: {
				{"cp-0", Fail, "if node node-1 is drained or lost, cp-0 (5 CPU, 17Gi) has no node to restart on: node-2 hosts cp-1; node-3 hosts cp-2; node-4 has only 4 CPU, 63Gi free"},
				{"cp-1", Pass, "if node node-2 is drained or lost, cp-1 (4 CPU, 16Gi) can restart on node-4 (4 CPU, 63Gi free)"},
				{"cp-2", Pass, "if node node-3 is drained or lost, cp-2 (4 CPU, 16Gi) can restart on node-4 (4 CPU, 63Gi free)"},
			}},
		},
		{
			name: "spare node cordoned, tainted or not for VMs",
			break_: func(in *Input) {
				in.Nodes[3].Spec.Unschedulable = true
				in.Nodes = append(in.Nodes, node("node-5", "16", "64Gi"), node("node-6", "16", "64Gi"), node("node-7", "16", "64Gi"))
				in.Nodes[4].Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}}
				delete(in.Nodes[5].Labels, virtv1.NodeSchedulable)
				in.Nodes[6].Status.Conditions[0].Status = corev1.ConditionUnknown
			},
			want: map[Rule][]want{RuleSpareCapacity: all(Fail, func(vm string) string {
				cur := map[string]string{"cp-0": "node-1", "cp-1": "node-2", "cp-2": "node-3"}[vm]
				var hosts []string
				for _, o := range []string{"cp-0", "cp-1", "cp-2"} {
					if o != vm {
						n := map[string]string{"cp-0": "node-1", "cp-1": "node-2", "cp-2": "node-3"}[o]
						hosts = append(hosts, n+" hosts "+o)
					}
				}
				return "if node " + cur + " is drained or lost, " + vm + " (4 CPU, 16Gi) has no node to restart on: " +
					strings.Join(hosts, "; ") + "; node-4 is cordoned; node-5 has the untolerated taint dedicated=infra:NoSchedule; " +
					"node-6 is not schedulable for VMs (label kubevirt.io/schedulable is not \"true\"); node-7 is not Ready"
			})},
		},
		{
			name: "tolerated taint and matching nodeSelector keep a spare node",
			break_: func(in *Input) {
				in.Nodes[3].Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "cp", Effect: corev1.TaintEffectNoSchedule}}
				in.Nodes[3].Labels["pool"] = "cp"
				for _, n := range in.Nodes[:3] {
					n.Labels["pool"] = "cp"
				}
				each(in, func(vm *virtv1.VirtualMachine) {
					vm.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "cp", Effect: corev1.TaintEffectNoSchedule}}
					vm.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "cp"}
				})
			},
			want: nil,
		},
		{
			name: "nodeSelector excludes the spare node",
			break_: func(in *Input) {
				for _, n := range in.Nodes[:3] {
					n.Labels["pool"] = "cp"
				}
				each(in, func(vm *virtv1.VirtualMachine) { vm.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "cp"} })
			},
			want: map[Rule][]want{RuleSpareCapacity: {
				{"cp-0", Fail, "if node node-1 is drained or lost, cp-0 (4 CPU, 16Gi) has no node to restart on: node-2 hosts cp-1; node-3 hosts cp-2; node-4 does not match nodeSelector pool=cp"},
				{"cp-1", Fail, "if node node-2 is drained or lost, cp-1 (4 CPU, 16Gi) has no node to restart on: node-1 hosts cp-0; node-3 hosts cp-2; node-4 does not match nodeSelector pool=cp"},
				{"cp-2", Fail, "if node node-3 is drained or lost, cp-2 (4 CPU, 16Gi) has no node to restart on: node-1 hosts cp-0; node-2 hosts cp-1; node-4 does not match nodeSelector pool=cp"},
			}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := good()
			tc.break_(&in)
			got := byKey(Check(in))
			require.Len(t, got, 3*len(Rules))
			for _, rule := range Rules {
				ws, broken := tc.want[rule]
				if !broken {
					for _, vm := range []string{"cp-0", "cp-1", "cp-2"} {
						r := got[vm+"/"+string(rule)]
						assert.Equal(t, Pass, r.Verdict, "%s %s should still pass: %s", vm, rule, r.Message)
					}
					continue
				}
				require.Len(t, ws, 3, "%s", rule)
				for _, w := range ws {
					r := got[w.vm+"/"+string(rule)]
					assert.Equal(t, w.verdict, r.Verdict, "%s %s: %s", w.vm, rule, r.Message)
					assert.Equal(t, w.message, r.Message, "%s %s", w.vm, rule)
					if w.verdict == Pass {
						assert.Empty(t, r.Remediation)
					} else {
						assert.NotEmpty(t, r.Remediation, "%s %s", w.vm, rule)
					}
				}
			}
		})
	}
}

func TestRemediations(t *testing.T) {
	t.Run("node-spread with common labels", func(t *testing.T) {
		in := good()
		each(&in, func(vm *virtv1.VirtualMachine) { vm.Spec.Template.Spec.Affinity = nil })
		r := byKey(CheckNodeSpread(in))["cp-0/node-spread"]
		assert.Equal(t, `spec:
  template:
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector:
              matchLabels:
                cluster: tenant-a
                role: control-plane
            topologyKey: kubernetes.io/hostname
`, r.Remediation)
	})
	t.Run("node-spread and PDB without common labels", func(t *testing.T) {
		in := good()
		each(&in, func(vm *virtv1.VirtualMachine) {
			vm.Spec.Template.Spec.Affinity = nil
			vm.Spec.Template.ObjectMeta.Labels = map[string]string{"kubevirt.io/vm": vm.Name}
		})
		in.PDBs = nil
		assert.Equal(t, `spec:
  template:
    metadata:
      labels:
        kubevirt-redfish.io/control-plane: tenant-a
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector:
              matchLabels:
                kubevirt-redfish.io/control-plane: tenant-a
            topologyKey: kubernetes.io/hostname
`, byKey(CheckNodeSpread(in))["cp-1/node-spread"].Remediation)
		assert.Equal(t, `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: control-plane
  namespace: tenant-a
spec:
  minAvailable: 2
  selector:
    matchLabels:
      kubevirt-redfish.io/control-plane: tenant-a
# and on every VM:
spec:
  template:
    metadata:
      labels:
        kubevirt-redfish.io/control-plane: tenant-a
`, byKey(CheckDisruptionBudget(in))["cp-1/disruption-budget"].Remediation)
	})
	t.Run("PDB keeps its name", func(t *testing.T) {
		in := good()
		in.PDBs[0].Spec.MinAvailable = intOr(1)
		assert.Equal(t, `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: control-plane
  namespace: tenant-a
spec:
  minAvailable: 2
  selector:
    matchLabels:
      cluster: tenant-a
      role: control-plane
`, byKey(CheckDisruptionBudget(in))["cp-2/disruption-budget"].Remediation)
	})
	t.Run("eviction, probe, resources", func(t *testing.T) {
		in := good()
		each(&in, func(vm *virtv1.VirtualMachine) {
			s := &vm.Spec.Template.Spec
			s.EvictionStrategy = ptr(virtv1.EvictionStrategyLiveMigrate)
			s.ReadinessProbe = nil
			s.Domain.Resources = virtv1.ResourceRequirements{Requests: rl("2", "12Gi")}
			s.Domain.CPU = &virtv1.CPU{Sockets: 1, Cores: 6}
		})
		got := byKey(Check(in))
		assert.Equal(t, "spec:\n  template:\n    spec:\n      evictionStrategy: None\n", got["cp-0/eviction-strategy"].Remediation)
		assert.Equal(t, `spec:
  template:
    spec:
      readinessProbe:
        guestAgentPing: {}
        initialDelaySeconds: 120
        periodSeconds: 10
        timeoutSeconds: 5
        failureThreshold: 6
`, got["cp-0/guest-agent-probe"].Remediation)
		assert.Equal(t, `spec:
  template:
    spec:
      domain:
        resources:
          requests:
            cpu: "6"
            memory: 12Gi
          limits:
            cpu: "6"
            memory: 12Gi
`, got["cp-0/guaranteed-resources"].Remediation)
	})
	t.Run("advice", func(t *testing.T) {
		in := good()
		eachVMI(&in, func(vmi *virtv1.VirtualMachineInstance) { vmi.Status.NodeName = "node-2" })
		in.Nodes = in.Nodes[1:2]
		got := byKey(Check(in))
		assert.Equal(t, "if node node-2 is drained or lost, cp-0 (4 CPU, 16Gi) has no node to restart on: there is no other node", got["cp-0/spare-capacity"].Message)
		assert.Equal(t, "Make sure node-spread passes (anti-affinity acts only at scheduling), then restart cp-1 and cp-2 one at a time (Redfish ComputerSystem.Reset ForceRestart) so the scheduler moves them to other nodes.",
			got["cp-0/placement"].Remediation)
		assert.Equal(t, "Free at least 4 CPU, 16Gi on a schedulable node that hosts no other VM of the set: uncordon or add a node, or move other workloads away.",
			got["cp-0/spare-capacity"].Remediation)
	})
}

func TestEstimate(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    virtv1.DomainSpec
		want need
	}{
		{"requests", virtv1.DomainSpec{Resources: virtv1.ResourceRequirements{Requests: rl("2", "8Gi"), Limits: rl("4", "16Gi")}}, need{2000, 8 << 30}},
		{"limits only", virtv1.DomainSpec{Resources: virtv1.ResourceRequirements{Limits: rl("4", "16Gi")}}, need{4000, 16 << 30}},
		{"guest memory, topology, no CPU request", virtv1.DomainSpec{CPU: &virtv1.CPU{Sockets: 2, Cores: 2}, Memory: &virtv1.Memory{Guest: ptr(resource.MustParse("8Gi"))}}, need{400, 8 << 30}},
		{"dedicated CPUs", virtv1.DomainSpec{CPU: &virtv1.CPU{Cores: 6, DedicatedCPUPlacement: true}, Memory: &virtv1.Memory{Guest: ptr(resource.MustParse("8Gi"))}}, need{6000, 8 << 30}},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, estimate(&tc.d)) })
	}
	assert.Equal(t, "2.5", fmtCPU(2500))
	assert.Equal(t, "0.1", fmtCPU(100))
	assert.Equal(t, "1.5Gi", fmtMem(3<<29))
	assert.Equal(t, "512Mi", fmtMem(512<<20))
}

func TestReportOutput(t *testing.T) {
	in := good()
	in.PDBs = nil
	in.VMs[1].Spec.Template.Spec.EvictionStrategy = nil
	r := NewReport(in, "", []string{"example note"})
	assert.Equal(t, Summary{Pass: 20, Warn: 1, Fail: 3, Verdict: Fail}, r.Summary)

	var js bytes.Buffer
	require.NoError(t, r.WriteJSON(&js))
	var doc map[string]any
	require.NoError(t, json.Unmarshal(js.Bytes(), &doc))
	assert.Equal(t, "preflight.kubevirt-redfish.io/v1", doc["apiVersion"])
	assert.Equal(t, "PreflightReport", doc["kind"])
	assert.Equal(t, "tenant-a", doc["namespace"])
	assert.Equal(t, "", doc["selector"])
	assert.Equal(t, []any{"cp-0", "cp-1", "cp-2"}, doc["vms"])
	assert.Equal(t, []any{"example note"}, doc["notes"])
	assert.Equal(t, map[string]any{"pass": 20.0, "warn": 1.0, "fail": 3.0, "verdict": "fail"}, doc["summary"])
	results := doc["results"].([]any)
	require.Len(t, results, 24)
	first := results[0].(map[string]any)
	assert.Equal(t, map[string]any{
		"vm": "cp-0", "rule": "node-spread", "verdict": "pass",
		"message":     "Required pod anti-affinity on kubernetes.io/hostname keeps cp-0 off the nodes of cp-1 and cp-2",
		"remediation": "",
	}, first)
	// Keys come in a fixed order.
	assert.True(t, strings.HasPrefix(js.String(), "{\n  \"apiVersion\": \"preflight.kubevirt-redfish.io/v1\",\n  \"kind\": \"PreflightReport\",\n  \"namespace\": \"tenant-a\","), js.String())

	var tb bytes.Buffer
	require.NoError(t, r.WriteTable(&tb))
	out := tb.String()
	t.Log("\n" + out)
	lines := strings.Split(out, "\n")
	assert.Equal(t, "Preflight of the control-plane VMs in namespace tenant-a: cp-0, cp-1 and cp-2", lines[0])
	assert.Equal(t, "VM    RULE                   RESULT  MESSAGE", lines[2])
	assert.Equal(t, "cp-0  node-spread            PASS    Required pod anti-affinity on kubernetes.io/hostname keeps cp-0 off the nodes of cp-1 and cp-2", lines[3])
	assert.Equal(t, "cp-0  disruption-budget      FAIL    no PodDisruptionBudget selects the virt-launcher pod of cp-0: a drain may evict it while other VMs of the set are down", lines[4])
	assert.Equal(t, "    remediation (YAML to add):", lines[5])
	assert.Equal(t, "      apiVersion: policy/v1", lines[6])
	assert.Contains(t, out, "cp-1  disruption-budget      FAIL    no PodDisruptionBudget selects the virt-launcher pod of cp-1: a drain may evict it while other VMs of the set are down\n    remediation: as for cp-0 disruption-budget above\n")
	assert.Contains(t, out, "cp-1  eviction-strategy      WARN    evictionStrategy is not set")
	assert.Contains(t, out, "\nNote: example note\n")
	assert.True(t, strings.HasSuffix(out, "Summary: 3 VMs, 24 checks: 20 pass, 1 warn, 3 fail: FAIL\n"), out)
}
