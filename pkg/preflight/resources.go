package preflight

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	virtv1 "kubevirt.io/api/core/v1"
)

// defaultCPUAllocationRatio is KubeVirt's default developerConfiguration.cpuAllocationRatio: a
// VMI without a CPU request or limit asks for 1/10 CPU per vCPU.
const defaultCPUAllocationRatio = 10

// need is an amount of CPU (millicores) and memory (bytes).
type need struct {
	milliCPU int64
	memory   int64
}

func (n need) add(o need) need { return need{n.milliCPU + o.milliCPU, n.memory + o.memory} }
func (n need) sub(o need) need { return need{n.milliCPU - o.milliCPU, n.memory - o.memory} }
func (n need) fits(free need) bool {
	return n.milliCPU <= free.milliCPU && n.memory <= free.memory
}

// String renders "4 CPU, 16Gi".
func (n need) String() string { return fmtCPU(n.milliCPU) + " CPU, " + fmtMem(n.memory) }

// vcpus is the guest's vCPU count: sockets × cores × threads, each defaulting to 1; without a
// topology, the CPU limit or request rounded up (as KubeVirt does), else 1.
func vcpus(d *virtv1.DomainSpec) int64 {
	if c := d.CPU; c != nil && (c.Sockets > 0 || c.Cores > 0 || c.Threads > 0) {
		return int64(atLeast1(c.Sockets)) * int64(atLeast1(c.Cores)) * int64(atLeast1(c.Threads))
	}
	for _, rl := range []corev1.ResourceList{d.Resources.Limits, d.Resources.Requests} {
		if q, ok := rl[corev1.ResourceCPU]; ok && !q.IsZero() {
			return (q.MilliValue() + 999) / 1000
		}
	}
	return 1
}

func atLeast1(v uint32) uint32 {
	if v == 0 {
		return 1
	}
	return v
}

func dedicatedCPU(d *virtv1.DomainSpec) bool { return d.CPU != nil && d.CPU.DedicatedCPUPlacement }

// estimate approximates what the virt-launcher pod of a VMI with this domain requests from
// its node, without KubeVirt's per-VMI overhead:
//   - cpu: requests.cpu, else limits.cpu, else the vCPU count with dedicatedCpuPlacement,
//     else vCPUs / cpuAllocationRatio (KubeVirt's default 10);
//   - memory: requests.memory, else limits.memory, else memory.guest.
func estimate(d *virtv1.DomainSpec) need {
	var n need
	r := d.Resources
	switch {
	case has(r.Requests, corev1.ResourceCPU):
		q := r.Requests[corev1.ResourceCPU]
		n.milliCPU = q.MilliValue()
	case has(r.Limits, corev1.ResourceCPU):
		q := r.Limits[corev1.ResourceCPU]
		n.milliCPU = q.MilliValue()
	case dedicatedCPU(d):
		n.milliCPU = vcpus(d) * 1000
	default:
		n.milliCPU = vcpus(d) * 1000 / defaultCPUAllocationRatio
	}
	if q := guestMemory(d); q != nil {
		n.memory = q.Value()
	}
	return n
}

// guestMemory is requests.memory, else limits.memory, else memory.guest.
func guestMemory(d *virtv1.DomainSpec) *resource.Quantity {
	r := d.Resources
	for _, rl := range []corev1.ResourceList{r.Requests, r.Limits} {
		if has(rl, corev1.ResourceMemory) {
			q := rl[corev1.ResourceMemory]
			return &q
		}
	}
	if d.Memory != nil && d.Memory.Guest != nil && !d.Memory.Guest.IsZero() {
		return d.Memory.Guest
	}
	return nil
}

func has(rl corev1.ResourceList, name corev1.ResourceName) bool {
	q, ok := rl[name]
	return ok && !q.IsZero()
}

// podRequests is what the scheduler reserves for a pod: the larger of the sum of its
// containers' requests and its largest init container request, plus the pod overhead.
func podRequests(p *corev1.Pod) need {
	var sum, initMax need
	for _, c := range p.Spec.Containers {
		sum = sum.add(containerNeed(c))
	}
	for _, c := range p.Spec.InitContainers {
		n := containerNeed(c)
		initMax.milliCPU = max(initMax.milliCPU, n.milliCPU)
		initMax.memory = max(initMax.memory, n.memory)
	}
	out := need{max(sum.milliCPU, initMax.milliCPU), max(sum.memory, initMax.memory)}
	if o := p.Spec.Overhead; o != nil {
		out.milliCPU += o.Cpu().MilliValue()
		out.memory += o.Memory().Value()
	}
	return out
}

func containerNeed(c corev1.Container) need {
	n := need{milliCPU: c.Resources.Requests.Cpu().MilliValue(), memory: c.Resources.Requests.Memory().Value()}
	// Kubernetes defaults a missing request to the limit.
	if !has(c.Resources.Requests, corev1.ResourceCPU) {
		n.milliCPU = c.Resources.Limits.Cpu().MilliValue()
	}
	if !has(c.Resources.Requests, corev1.ResourceMemory) {
		n.memory = c.Resources.Limits.Memory().Value()
	}
	return n
}

// qos is the outcome of the Guaranteed resources rule for one domain.
type qos struct {
	guaranteed bool
	// how explains a pass; problems list what makes it Burstable.
	how      string
	problems []string
}

// guaranteedQoS decides whether KubeVirt gives the virt-launcher pod of a VMI with this
// domain the Guaranteed QoS class:
//
//	(a) cpu: requests.cpu and limits.cpu are both set and equal; and memory: limits.memory is
//	    set and requests.memory is either unset (KubeVirt copies the limit) or equal to it.
//	    This is KubeVirt's own VirtualMachineInstance.WantsToHaveQOSGuaranteed test.
//	(b) or cpu.dedicatedCpuPlacement is true, the guest memory is sized (requests.memory,
//	    limits.memory or memory.guest) and requests.memory and limits.memory do not differ:
//	    for dedicated CPUs KubeVirt sets CPU requests = limits = vCPUs and the memory limit to
//	    the request, so the pod is Guaranteed by construction.
func guaranteedQoS(d *virtv1.DomainSpec) qos {
	r := d.Resources
	req, lim := r.Requests, r.Limits
	memDiffers := has(req, corev1.ResourceMemory) && has(lim, corev1.ResourceMemory) &&
		cmp(req, lim, corev1.ResourceMemory) != 0
	if dedicatedCPU(d) {
		mem := guestMemory(d)
		switch {
		case memDiffers:
			return qos{problems: []string{fmt.Sprintf("requests.memory %s differs from limits.memory %s",
				qstr(req, corev1.ResourceMemory), qstr(lim, corev1.ResourceMemory))}}
		case mem == nil:
			return qos{problems: []string{"dedicatedCpuPlacement is set but no memory size is"}}
		}
		return qos{guaranteed: true, how: fmt.Sprintf("dedicatedCpuPlacement with %d vCPUs and memory %s: KubeVirt sets the virt-launcher pod's requests equal to its limits",
			vcpus(d), mem.String())}
	}
	var problems []string
	switch {
	case !has(lim, corev1.ResourceCPU):
		problems = append(problems, "limits.cpu is not set")
	case !has(req, corev1.ResourceCPU):
		problems = append(problems, "requests.cpu is not set")
	case cmp(req, lim, corev1.ResourceCPU) != 0:
		problems = append(problems, fmt.Sprintf("requests.cpu %s differs from limits.cpu %s",
			qstr(req, corev1.ResourceCPU), qstr(lim, corev1.ResourceCPU)))
	}
	switch {
	case !has(lim, corev1.ResourceMemory):
		problems = append(problems, "limits.memory is not set")
	case memDiffers:
		problems = append(problems, fmt.Sprintf("requests.memory %s differs from limits.memory %s",
			qstr(req, corev1.ResourceMemory), qstr(lim, corev1.ResourceMemory)))
	}
	if len(problems) > 0 {
		return qos{problems: problems}
	}
	return qos{guaranteed: true, how: fmt.Sprintf("requests equal limits (cpu %s, memory %s)",
		qstr(lim, corev1.ResourceCPU), qstr(lim, corev1.ResourceMemory))}
}

func cmp(a, b corev1.ResourceList, name corev1.ResourceName) int {
	qa, qb := a[name], b[name]
	return qa.Cmp(qb)
}

func qstr(rl corev1.ResourceList, name corev1.ResourceName) string {
	q := rl[name]
	return q.String()
}

// guaranteedSize is the cpu and memory a Guaranteed remediation should ask for: the largest
// of what the domain already says anywhere.
func guaranteedSize(d *virtv1.DomainSpec) (cpu, memory resource.Quantity) {
	cpu = *resource.NewQuantity(vcpus(d), resource.DecimalSI)
	for _, rl := range []corev1.ResourceList{d.Resources.Requests, d.Resources.Limits} {
		if q, ok := rl[corev1.ResourceCPU]; ok && q.Cmp(cpu) > 0 {
			cpu = q.DeepCopy()
		}
	}
	memory = resource.MustParse("0")
	cands := []corev1.ResourceList{d.Resources.Requests, d.Resources.Limits}
	for _, rl := range cands {
		if q, ok := rl[corev1.ResourceMemory]; ok && q.Cmp(memory) > 0 {
			memory = q.DeepCopy()
		}
	}
	if d.Memory != nil && d.Memory.Guest != nil && d.Memory.Guest.Cmp(memory) > 0 {
		memory = d.Memory.Guest.DeepCopy()
	}
	return cpu, memory
}

// fmtCPU renders millicores as "4", "2.5" or "0.1".
func fmtCPU(m int64) string {
	if m%1000 == 0 {
		return strconv.FormatInt(m/1000, 10)
	}
	return strings.TrimRight(strings.TrimRight(strconv.FormatFloat(float64(m)/1000, 'f', 3, 64), "0"), ".")
}

// fmtMem renders bytes in the largest binary unit that keeps one decimal: "16Gi", "1.5Gi",
// "512Mi".
func fmtMem(b int64) string {
	neg := ""
	if b < 0 {
		neg, b = "-", -b
	}
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if b >= u.size {
			v := strconv.FormatFloat(float64(b)/float64(u.size), 'f', 1, 64)
			return neg + strings.TrimSuffix(v, ".0") + u.suffix
		}
	}
	return neg + strconv.FormatInt(b, 10)
}

// ---- nodes ----

// nodeMatches reports whether a VM with this spec may be scheduled onto node by its
// nodeSelector and required node affinity, and if not, why.
func nodeMatches(spec *virtv1.VirtualMachineInstanceSpec, node *corev1.Node) (bool, string) {
	for k, v := range spec.NodeSelector {
		if node.Labels[k] != v {
			return false, fmt.Sprintf("does not match nodeSelector %s=%s", k, v)
		}
	}
	if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil ||
		spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true, ""
	}
	for _, term := range spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if termMatches(term, node) {
			return true, ""
		}
	}
	return false, "does not match the required node affinity"
}

func termMatches(term corev1.NodeSelectorTerm, node *corev1.Node) bool {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return false // an empty term matches nothing
	}
	if !requirementsMatch(term.MatchExpressions, labels.Set(node.Labels)) {
		return false
	}
	return requirementsMatch(term.MatchFields, labels.Set{"metadata.name": node.Name})
}

func requirementsMatch(reqs []corev1.NodeSelectorRequirement, set labels.Set) bool {
	ops := map[corev1.NodeSelectorOperator]selection.Operator{
		corev1.NodeSelectorOpIn: selection.In, corev1.NodeSelectorOpNotIn: selection.NotIn,
		corev1.NodeSelectorOpExists: selection.Exists, corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
		corev1.NodeSelectorOpGt: selection.GreaterThan, corev1.NodeSelectorOpLt: selection.LessThan,
	}
	for _, r := range reqs {
		op, ok := ops[r.Operator]
		if !ok {
			return false
		}
		req, err := labels.NewRequirement(r.Key, op, r.Values)
		if err != nil || !req.Matches(set) {
			return false
		}
	}
	return true
}

// untoleratedTaint returns the first NoSchedule or NoExecute taint of node that tolerations do
// not tolerate (the cordon taint is reported as cordoned elsewhere).
func untoleratedTaint(tolerations []corev1.Toleration, node *corev1.Node) *corev1.Taint {
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule || t.Key == corev1.TaintNodeUnschedulable {
			continue
		}
		tolerated := false
		for j := range tolerations {
			if tolerations[j].ToleratesTaint(t) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return t
		}
	}
	return nil
}

// nodeReady is false only when the node has a Ready condition that is not True.
func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return true
}

func allocatable(node *corev1.Node) need {
	return need{milliCPU: node.Status.Allocatable.Cpu().MilliValue(), memory: node.Status.Allocatable.Memory().Value()}
}

// ---- selectors ----

// launcherLabels are the labels of a VM's virt-launcher pod: the VM template's labels (copied
// to the VMI and from there to the pod) plus the ones KubeVirt adds to every launcher pod.
func launcherLabels(vm *virtv1.VirtualMachine) labels.Set {
	set := labels.Set{}
	if vm.Spec.Template != nil {
		for k, v := range vm.Spec.Template.ObjectMeta.Labels {
			set[k] = v
		}
	}
	set[virtv1.AppLabel] = "virt-launcher"
	set[virtv1.DeprecatedVirtualMachineNameLabel] = vm.Name
	return set
}

// selectorFor converts a label selector, adding matchLabelKeys / mismatchLabelKeys taken from
// the incoming pod's own labels. A nil selector matches nothing.
func selectorFor(ls *metav1.LabelSelector, own labels.Set, matchKeys, mismatchKeys []string) labels.Selector {
	if ls == nil {
		return labels.Nothing()
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return labels.Nothing()
	}
	for _, k := range matchKeys {
		if v, ok := own[k]; ok {
			if r, err := labels.NewRequirement(k, selection.Equals, []string{v}); err == nil {
				sel = sel.Add(*r)
			}
		}
	}
	for _, k := range mismatchKeys {
		if v, ok := own[k]; ok {
			if r, err := labels.NewRequirement(k, selection.NotEquals, []string{v}); err == nil {
				sel = sel.Add(*r)
			}
		}
	}
	return sel
}
