// Package preflight checks that the VirtualMachines backing one virtualized control plane (the
// three control-plane VMs of a target cluster, usually all in one namespace) can survive the
// maintenance of the hosting cluster: a drain takes down one node at a time, and etcd keeps
// quorum only while two of the three VMs run.
//
// The checks are pure functions over typed objects (Input in, one Result per rule per VM out),
// so each rule is a table test; Load reads those objects from a cluster, and Command is the
// `kubevirt-redfish preflight` command line. docs/preflight.md defines every rule.
package preflight

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	virtv1 "kubevirt.io/api/core/v1"
)

// Verdict is the outcome of one rule for one VM.
type Verdict string

// Verdicts, from good to bad. Only Fail makes the command exit non-zero.
const (
	Pass Verdict = "pass"
	Warn Verdict = "warn"
	Fail Verdict = "fail"
)

// Rule names a check. The names are part of the JSON output and stay stable.
type Rule string

// The rules, in the order they are reported for each VM.
const (
	// RuleNodeSpread: required pod anti-affinity or a strict topology spread constraint on
	// kubernetes.io/hostname keeps the VM off the nodes of the other VMs.
	RuleNodeSpread Rule = "node-spread"
	// RuleDisruptionBudget: exactly one PodDisruptionBudget selects the VM's virt-launcher pod,
	// selects all the VMs, and keeps a quorum of them running.
	RuleDisruptionBudget Rule = "disruption-budget"
	// RuleEvictionStrategy: spec.template.spec.evictionStrategy is None.
	RuleEvictionStrategy Rule = "eviction-strategy"
	// RuleGuestAgentProbe: the readiness probe pings the QEMU guest agent.
	RuleGuestAgentProbe Rule = "guest-agent-probe"
	// RuleGuestAgentConnected: the running VMI reports AgentConnected=True.
	RuleGuestAgentConnected Rule = "guest-agent-connected"
	// RuleGuaranteedResources: the virt-launcher pod gets the Guaranteed QoS class.
	RuleGuaranteedResources Rule = "guaranteed-resources"
	// RulePlacement: the running VMIs sit on distinct nodes.
	RulePlacement Rule = "placement"
	// RuleSpareCapacity: another node could take the VM if its node went away (N+1).
	RuleSpareCapacity Rule = "spare-capacity"
)

// Rules lists every rule in report order.
var Rules = []Rule{
	RuleNodeSpread, RuleDisruptionBudget, RuleEvictionStrategy, RuleGuestAgentProbe,
	RuleGuestAgentConnected, RuleGuaranteedResources, RulePlacement, RuleSpareCapacity,
}

// Result is the verdict of one rule for one VM.
type Result struct {
	VM      string  `json:"vm"`
	Rule    Rule    `json:"rule"`
	Verdict Verdict `json:"verdict"`
	// Message says what was found, naming the objects and nodes involved.
	Message string `json:"message"`
	// Remediation, for warn and fail ("" for pass), is the fix. Either a YAML snippet, which
	// ends with a newline: the fields to merge into the VM (starting at its root, "spec:"),
	// or a whole object to create (with apiVersion and kind); or, for state that no manifest
	// fixes, one sentence of advice without a trailing newline.
	Remediation string `json:"remediation"`
}

// Input is everything the rules look at.
type Input struct {
	// Namespace of the VMs (used in remediations).
	Namespace string
	// VMs are the VirtualMachines of one target cluster: the set the rules are about.
	VMs []virtv1.VirtualMachine
	// OtherVMs are the other VirtualMachines of the namespace (not selected): a
	// PodDisruptionBudget that also selects their pods spends its budget on them too.
	OtherVMs []virtv1.VirtualMachine
	// VMIs are the VirtualMachineInstances the loader could see, in any namespace: those
	// named like a VM of the set (same namespace and name) are its instances; all of them use
	// node capacity.
	VMIs []virtv1.VirtualMachineInstance
	// PDBs are the PodDisruptionBudgets of the namespace.
	PDBs []policyv1.PodDisruptionBudget
	// Nodes are the hosting cluster's nodes.
	Nodes []corev1.Node
	// Pods are the non-terminated pods the loader could see (optional). When a VMI's
	// virt-launcher pod is among them, its requests replace the estimate from the VMI spec,
	// and other pods count against their node's allocatable capacity too.
	Pods []corev1.Pod
}

// Check runs every rule against in and returns the results sorted by VM, then in rule order.
func Check(in Input) []Result {
	c := newCluster(in)
	var out []Result
	for _, check := range []func(*cluster) []Result{
		checkNodeSpread, checkDisruptionBudget, checkEvictionStrategy, checkGuestAgentProbe,
		checkGuestAgentConnected, checkGuaranteedResources, checkPlacement, checkSpareCapacity,
	} {
		out = append(out, check(c)...)
	}
	SortResults(out)
	return out
}

// Individual rules, for callers (and tests) that want one of them.
func CheckNodeSpread(in Input) []Result          { return checkNodeSpread(newCluster(in)) }
func CheckDisruptionBudget(in Input) []Result    { return checkDisruptionBudget(newCluster(in)) }
func CheckEvictionStrategy(in Input) []Result    { return checkEvictionStrategy(newCluster(in)) }
func CheckGuestAgentProbe(in Input) []Result     { return checkGuestAgentProbe(newCluster(in)) }
func CheckGuestAgentConnected(in Input) []Result { return checkGuestAgentConnected(newCluster(in)) }
func CheckGuaranteedResources(in Input) []Result { return checkGuaranteedResources(newCluster(in)) }
func CheckPlacement(in Input) []Result           { return checkPlacement(newCluster(in)) }
func CheckSpareCapacity(in Input) []Result       { return checkSpareCapacity(newCluster(in)) }

// SortResults orders results by VM name, then in the order of Rules.
func SortResults(rs []Result) {
	order := map[Rule]int{}
	for i, r := range Rules {
		order[r] = i
	}
	sort.SliceStable(rs, func(i, j int) bool {
		if rs[i].VM != rs[j].VM {
			return rs[i].VM < rs[j].VM
		}
		return order[rs[i].Rule] < order[rs[j].Rule]
	})
}

// Summary counts verdicts.
type Summary struct {
	Pass int `json:"pass"`
	Warn int `json:"warn"`
	Fail int `json:"fail"`
	// Verdict is the worst verdict of all results (pass when there are none).
	Verdict Verdict `json:"verdict"`
}

// Summarize counts the verdicts of rs.
func Summarize(rs []Result) Summary {
	s := Summary{Verdict: Pass}
	for _, r := range rs {
		switch r.Verdict {
		case Pass:
			s.Pass++
		case Warn:
			s.Warn++
			if s.Verdict == Pass {
				s.Verdict = Warn
			}
		case Fail:
			s.Fail++
			s.Verdict = Fail
		}
	}
	return s
}

// cluster is Input indexed for the rules.
type cluster struct {
	in     Input
	vms    []*virtv1.VirtualMachine // sorted by name
	names  []string                 // of vms, sorted
	byName map[string]*virtv1.VirtualMachine
	// vmi of each VM (by name), when one exists in the VM's namespace.
	vmi map[string]*virtv1.VirtualMachineInstance
}

func newCluster(in Input) *cluster {
	c := &cluster{in: in, vmi: map[string]*virtv1.VirtualMachineInstance{}, byName: map[string]*virtv1.VirtualMachine{}}
	for i := range in.VMs {
		c.vms = append(c.vms, &in.VMs[i])
	}
	sort.Slice(c.vms, func(i, j int) bool { return c.vms[i].Name < c.vms[j].Name })
	members := map[string]bool{}
	for _, vm := range c.vms {
		c.names = append(c.names, vm.Name)
		c.byName[vm.Name] = vm
		members[vm.Namespace+"/"+vm.Name] = true
	}
	for i := range in.VMIs {
		vmi := &in.VMIs[i]
		if members[vmi.Namespace+"/"+vmi.Name] {
			c.vmi[vmi.Name] = vmi
		}
	}
	return c
}

// others returns the names of the VMs other than name.
func (c *cluster) others(name string) []string {
	var out []string
	for _, n := range c.names {
		if n != name {
			out = append(out, n)
		}
	}
	return out
}

// quorum is how many of the VMs must run for etcd to keep quorum.
func (c *cluster) quorum() int { return len(c.vms)/2 + 1 }

// placed returns the VM's VMI and its node when the VMI it is placed on a node and not finished: Scheduled,
// Running, or anything else with a node and no final phase.
func (c *cluster) placed(name string) (*virtv1.VirtualMachineInstance, string) {
	vmi := c.vmi[name]
	if vmi == nil || vmi.Status.Phase == virtv1.Succeeded || vmi.Status.Phase == virtv1.Failed {
		return nil, ""
	}
	node := nodeOf(vmi)
	if node == "" {
		return nil, ""
	}
	return vmi, node
}

// nodeOf is the node a VMI runs on: status.nodeName, else the kubevirt.io/nodeName label.
func nodeOf(vmi *virtv1.VirtualMachineInstance) string {
	if vmi.Status.NodeName != "" {
		return vmi.Status.NodeName
	}
	return vmi.Labels[virtv1.NodeNameLabel]
}

func templateSpec(vm *virtv1.VirtualMachine) *virtv1.VirtualMachineInstanceSpec {
	if vm.Spec.Template == nil {
		return &virtv1.VirtualMachineInstanceSpec{}
	}
	return &vm.Spec.Template.Spec
}

// list joins names as "a", "a and b", "a, b and c".
func list(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
