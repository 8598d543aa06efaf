package preflight

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	virtv1 "kubevirt.io/api/core/v1"
)

// hostnameKey is the topology key that makes every node its own domain.
const hostnameKey = corev1.LabelHostname

func result(vm string, rule Rule, v Verdict, msg, fix string) Result {
	if v == Pass {
		fix = ""
	}
	return Result{VM: vm, Rule: rule, Verdict: v, Message: msg, Remediation: fix}
}

// nodesOf renders "the node of a" / "the nodes of a and b".
func nodesOf(names []string) string {
	if len(names) == 1 {
		return "the node of " + names[0]
	}
	return "the nodes of " + list(names)
}

// ---- node-spread ----

// checkNodeSpread: for each VM, every other VM of the set must be kept off its node by a
// required pod anti-affinity term (topologyKey kubernetes.io/hostname) or a topology spread
// constraint (topologyKey kubernetes.io/hostname, maxSkew 1, whenUnsatisfiable DoNotSchedule)
// of the VM's template whose selector matches the other VM's virt-launcher pod. Preferred
// anti-affinity and looser spread constraints only earn a warning.
func checkNodeSpread(c *cluster) []Result {
	var out []Result
	for _, vm := range c.vms {
		others := c.others(vm.Name)
		if len(others) == 0 {
			out = append(out, result(vm.Name, RuleNodeSpread, Pass, "the only VM of the set: there is nothing to keep apart", ""))
			continue
		}
		spec := templateSpec(vm)
		own := launcherLabels(vm)
		strict := map[string][]string{} // other VM -> mechanisms that keep it apart
		weak := map[string][]string{}
		if aff := spec.Affinity; aff != nil && aff.PodAntiAffinity != nil {
			for _, t := range aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				for _, o := range c.selectedByTerm(vm, own, t, others) {
					strict[o] = appendOnce(strict[o], "required pod anti-affinity")
				}
			}
			for _, w := range aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
				for _, o := range c.selectedByTerm(vm, own, w.PodAffinityTerm, others) {
					weak[o] = appendOnce(weak[o], "preferred pod anti-affinity")
				}
			}
		}
		for _, tsc := range spec.TopologySpreadConstraints {
			if tsc.TopologyKey != hostnameKey {
				continue
			}
			sel := selectorFor(tsc.LabelSelector, own, tsc.MatchLabelKeys, nil)
			for _, o := range others {
				other := c.byName[o]
				if other.Namespace != vm.Namespace || !sel.Matches(launcherLabels(other)) {
					continue
				}
				if tsc.MaxSkew == 1 && tsc.WhenUnsatisfiable == corev1.DoNotSchedule {
					strict[o] = appendOnce(strict[o], "a topology spread constraint (maxSkew 1, DoNotSchedule)")
				} else {
					weak[o] = appendOnce(weak[o], fmt.Sprintf("a topology spread constraint with maxSkew %d and %s", tsc.MaxSkew, tsc.WhenUnsatisfiable))
				}
			}
		}
		var mechanisms, loose, missing, uncovered []string
		for _, o := range others {
			if m, ok := strict[o]; ok {
				for _, x := range m {
					mechanisms = appendOnce(mechanisms, x)
				}
				continue
			}
			missing = append(missing, o)
			if m, ok := weak[o]; ok {
				for _, x := range m {
					loose = appendOnce(loose, x)
				}
			} else {
				uncovered = append(uncovered, o)
			}
		}
		switch {
		case len(missing) == 0:
			verb := "keeps"
			if len(mechanisms) > 1 {
				verb = "keep"
			}
			out = append(out, result(vm.Name, RuleNodeSpread, Pass,
				fmt.Sprintf("%s on %s %s %s off %s", capitalize(list(mechanisms)), hostnameKey, verb, vm.Name, nodesOf(others)), ""))
		case len(uncovered) == 0:
			verb := "keeps"
			if len(loose) > 1 {
				verb = "keep"
			}
			out = append(out, result(vm.Name, RuleNodeSpread, Warn,
				fmt.Sprintf("only %s %s %s away from %s: the scheduler may still put them on one node", list(loose), verb, vm.Name, list(missing)),
				c.antiAffinitySnippet()))
		default:
			their := "their virt-launcher pods"
			if len(uncovered) == 1 {
				their = "its virt-launcher pod"
			}
			out = append(out, result(vm.Name, RuleNodeSpread, Fail,
				fmt.Sprintf("nothing keeps %s off %s: no required pod anti-affinity or topology spread constraint (maxSkew 1, DoNotSchedule) on %s selects %s",
					vm.Name, nodesOf(uncovered), hostnameKey, their),
				c.antiAffinitySnippet()))
		}
	}
	return out
}

// selectedByTerm returns the VMs among others whose launcher pods an anti-affinity term of vm
// (with topologyKey kubernetes.io/hostname) selects.
func (c *cluster) selectedByTerm(vm *virtv1.VirtualMachine, own labels.Set, t corev1.PodAffinityTerm, others []string) []string {
	if t.TopologyKey != hostnameKey {
		return nil
	}
	sel := selectorFor(t.LabelSelector, own, t.MatchLabelKeys, t.MismatchLabelKeys)
	var out []string
	for _, o := range others {
		other := c.byName[o]
		if termNamespaceCovers(t, vm.Namespace, other.Namespace) && sel.Matches(launcherLabels(other)) {
			out = append(out, o)
		}
	}
	return out
}

// termNamespaceCovers: with neither namespaces nor a namespaceSelector a term looks at its own
// namespace; an empty namespaceSelector means all namespaces. A non-empty namespaceSelector
// is not evaluated (namespace labels are not read), so only the listed namespaces count.
func termNamespaceCovers(t corev1.PodAffinityTerm, own, ns string) bool {
	if len(t.Namespaces) == 0 && t.NamespaceSelector == nil {
		return ns == own
	}
	for _, n := range t.Namespaces {
		if n == ns {
			return true
		}
	}
	s := t.NamespaceSelector
	return s != nil && len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0
}

// ---- disruption-budget ----

// checkDisruptionBudget: exactly one PodDisruptionBudget must select the VM's virt-launcher
// pod; it must select the pods of all the VMs of the set, and use an integer minAvailable of
// at least a quorum (2 of 3) and less than the number of VMs.
func checkDisruptionBudget(c *cluster) []Result {
	n := len(c.vms)
	type budget struct {
		pdb     *policyv1.PodDisruptionBudget
		selects []string // VMs of the set
		extra   []string // other VMs of the namespace
	}
	var budgets []budget
	for i := range c.in.PDBs {
		p := &c.in.PDBs[i]
		b := budget{pdb: p}
		// A nil selector selects nothing; an empty one every pod of the namespace.
		if p.Spec.Selector != nil {
			if sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector); err == nil {
				for _, vm := range c.vms {
					if vm.Namespace == p.Namespace && sel.Matches(launcherLabels(vm)) {
						b.selects = append(b.selects, vm.Name)
					}
				}
				for i := range c.in.OtherVMs {
					vm := &c.in.OtherVMs[i]
					if vm.Namespace == p.Namespace && sel.Matches(launcherLabels(vm)) {
						b.extra = append(b.extra, vm.Name)
					}
				}
				sort.Strings(b.extra)
			}
		}
		budgets = append(budgets, b)
	}
	sort.Slice(budgets, func(i, j int) bool { return budgets[i].pdb.Name < budgets[j].pdb.Name })

	var out []Result
	for _, vm := range c.vms {
		var mine []budget
		for _, b := range budgets {
			if contains(b.selects, vm.Name) {
				mine = append(mine, b)
			}
		}
		if len(mine) == 0 {
			out = append(out, result(vm.Name, RuleDisruptionBudget, Fail,
				fmt.Sprintf("no PodDisruptionBudget selects the virt-launcher pod of %s: a drain may evict it while other VMs of the set are down", vm.Name),
				c.pdbSnippet("control-plane")))
			continue
		}
		if len(mine) > 1 {
			var names []string
			for _, b := range mine {
				names = append(names, b.pdb.Name)
			}
			out = append(out, result(vm.Name, RuleDisruptionBudget, Warn,
				fmt.Sprintf("PodDisruptionBudgets %s all select the virt-launcher pod of %s: the eviction API refuses pods with more than one budget, so drains hang", list(names), vm.Name),
				"Keep one PodDisruptionBudget for the VMs of the set and delete the others, or narrow their selectors."))
			continue
		}
		b := mine[0]
		p := b.pdb
		if len(b.selects) < n {
			var missing []string
			for _, name := range c.names {
				if !contains(b.selects, name) {
					missing = append(missing, name)
				}
			}
			out = append(out, result(vm.Name, RuleDisruptionBudget, Fail,
				fmt.Sprintf("PodDisruptionBudget %s selects %s but not %s: it cannot keep %d of the %d VMs running",
					p.Name, list(b.selects), list(missing), c.quorum(), n),
				c.pdbSnippet(p.Name)))
			continue
		}
		minA, maxU := p.Spec.MinAvailable, p.Spec.MaxUnavailable
		// The budget counts every pod it selects: other VMs' pods use up evictions too.
		total := n + len(b.extra)
		also := ""
		if len(b.extra) > 0 {
			also = fmt.Sprintf(" also selects %s, so it", list(b.extra))
		}
		switch {
		case minA != nil && minA.Type == intstr.Int:
			m := int(minA.IntVal)
			allowed := total - m
			switch {
			case allowed > n-c.quorum() && also == "":
				out = append(out, result(vm.Name, RuleDisruptionBudget, Fail,
					fmt.Sprintf("PodDisruptionBudget %s (minAvailable %d) lets %d of the %d VMs be evicted at once: etcd needs %d running for quorum",
						p.Name, m, allowed, n, c.quorum()),
					c.pdbSnippet(p.Name)))
			case allowed > n-c.quorum():
				out = append(out, result(vm.Name, RuleDisruptionBudget, Fail,
					fmt.Sprintf("PodDisruptionBudget %s (minAvailable %d)%s lets %d of its %d pods be evicted at once, as many as %d of the %d VMs: etcd needs %d running for quorum",
						p.Name, m, also, allowed, total, min(allowed, n), n, c.quorum()),
					c.pdbSnippet(p.Name)))
			case allowed <= 0:
				out = append(out, result(vm.Name, RuleDisruptionBudget, Warn,
					fmt.Sprintf("PodDisruptionBudget %s (minAvailable %d) allows no eviction of the %d VMs: every drain of their nodes hangs", p.Name, m, total),
					c.pdbSnippet(p.Name)))
			default:
				msg := fmt.Sprintf("PodDisruptionBudget %s (minAvailable %d) selects all %d VMs: a drain evicts at most %d at a time", p.Name, m, n, allowed)
				if also != "" {
					msg = fmt.Sprintf("PodDisruptionBudget %s (minAvailable %d) selects all %d VMs and %s: a drain evicts at most %d of them at a time",
						p.Name, m, n, list(b.extra), allowed)
				}
				out = append(out, result(vm.Name, RuleDisruptionBudget, Pass, msg, ""))
			}
		case minA == nil && maxU == nil:
			out = append(out, result(vm.Name, RuleDisruptionBudget, Fail,
				fmt.Sprintf("PodDisruptionBudget %s sets neither minAvailable nor maxUnavailable: it lets every VM be evicted", p.Name),
				c.pdbSnippet(p.Name)))
		default:
			what := fmt.Sprintf("maxUnavailable %s", intOrString(maxU))
			if minA != nil {
				what = fmt.Sprintf("minAvailable %s", intOrString(minA))
			}
			out = append(out, result(vm.Name, RuleDisruptionBudget, Warn,
				fmt.Sprintf("PodDisruptionBudget %s uses %s, which the disruption controller cannot compute for virt-launcher pods (their controller, the VMI, has no scale subresource): it allows no eviction and drains hang; use an integer minAvailable",
					p.Name, what),
				c.pdbSnippet(p.Name)))
		}
	}
	return out
}

func intOrString(v *intstr.IntOrString) string {
	if v == nil {
		return ""
	}
	return v.String()
}

// ---- eviction-strategy ----

// checkEvictionStrategy: spec.template.spec.evictionStrategy must be None. Unset is a warning
// because the cluster-wide default of the KubeVirt CR then applies.
func checkEvictionStrategy(c *cluster) []Result {
	var out []Result
	for _, vm := range c.vms {
		es := templateSpec(vm).EvictionStrategy
		switch {
		case es == nil:
			out = append(out, result(vm.Name, RuleEvictionStrategy, Warn,
				"evictionStrategy is not set: the cluster-wide default (KubeVirt CR spec.configuration.evictionStrategy) applies, which may be LiveMigrate",
				evictionSnippet))
		case *es == virtv1.EvictionStrategyNone:
			out = append(out, result(vm.Name, RuleEvictionStrategy, Pass,
				"evictionStrategy is None: a drain shuts the VM down, as the PodDisruptionBudget allows, instead of migrating it", ""))
		case *es == virtv1.EvictionStrategyLiveMigrate, *es == virtv1.EvictionStrategyLiveMigrateIfPossible:
			out = append(out, result(vm.Name, RuleEvictionStrategy, Fail,
				fmt.Sprintf("evictionStrategy is %s: a drain live-migrates the VM, and live migration is not supported for control-plane VMs", *es),
				evictionSnippet))
		case *es == virtv1.EvictionStrategyExternal:
			out = append(out, result(vm.Name, RuleEvictionStrategy, Fail,
				"evictionStrategy is External: a drain waits for an external controller to act on the VM, and none does for control-plane VMs",
				evictionSnippet))
		default:
			out = append(out, result(vm.Name, RuleEvictionStrategy, Fail,
				fmt.Sprintf("evictionStrategy is %s, not None", *es), evictionSnippet))
		}
	}
	return out
}

// ---- guest agent ----

// checkGuestAgentProbe: spec.template.spec.readinessProbe.guestAgentPing must be set.
func checkGuestAgentProbe(c *cluster) []Result {
	var out []Result
	for _, vm := range c.vms {
		p := templateSpec(vm).ReadinessProbe
		switch {
		case p != nil && p.GuestAgentPing != nil:
			out = append(out, result(vm.Name, RuleGuestAgentProbe, Pass, "the readiness probe pings the QEMU guest agent (guestAgentPing)", ""))
		case p != nil:
			out = append(out, result(vm.Name, RuleGuestAgentProbe, Fail,
				fmt.Sprintf("the readiness probe uses %s, not guestAgentPing: it does not tell whether the QEMU guest agent runs", probeKind(p)),
				probeSnippet))
		default:
			out = append(out, result(vm.Name, RuleGuestAgentProbe, Fail,
				"no readiness probe: nothing checks that the QEMU guest agent runs (readinessProbe.guestAgentPing)", probeSnippet))
		}
	}
	return out
}

func probeKind(p *virtv1.Probe) string {
	switch {
	case p.Exec != nil:
		return "exec"
	case p.HTTPGet != nil:
		return "httpGet"
	case p.TCPSocket != nil:
		return "tcpSocket"
	}
	return "no handler"
}

// checkGuestAgentConnected: a running VMI must have the condition AgentConnected=True. A VM
// that is not running earns a warning, since nothing can be checked.
func checkGuestAgentConnected(c *cluster) []Result {
	var out []Result
	for _, vm := range c.vms {
		vmi := c.vmi[vm.Name]
		switch {
		case vmi == nil || vmi.Status.Phase == virtv1.Succeeded || vmi.Status.Phase == virtv1.Failed:
			out = append(out, result(vm.Name, RuleGuestAgentConnected, Warn,
				fmt.Sprintf("%s is not running, so the guest agent connection cannot be checked", vm.Name),
				fmt.Sprintf("Power %s on (Redfish ComputerSystem.Reset On) and run preflight again.", vm.Name)))
		case vmi.Status.Phase != virtv1.Running:
			out = append(out, result(vm.Name, RuleGuestAgentConnected, Warn,
				fmt.Sprintf("the VMI is %s, not Running yet, so the guest agent connection cannot be checked", phase(vmi)),
				"Run preflight again once the VMI is Running."))
		default:
			cond := condition(vmi, virtv1.VirtualMachineInstanceAgentConnected)
			if cond != nil && cond.Status == corev1.ConditionTrue {
				out = append(out, result(vm.Name, RuleGuestAgentConnected, Pass, "the running VMI reports AgentConnected=True", ""))
				continue
			}
			msg := "the running VMI has no AgentConnected condition: the QEMU guest agent is not running in the guest, or has not connected yet"
			if cond != nil {
				msg = fmt.Sprintf("the running VMI reports AgentConnected=%s", cond.Status)
				if cond.Reason != "" {
					msg += " (" + cond.Reason + ")"
				}
				msg += ": the QEMU guest agent is not running in the guest, or has not connected yet"
			}
			out = append(out, result(vm.Name, RuleGuestAgentConnected, Fail, msg,
				"Run qemu-guest-agent in the guest (RHCOS ships it enabled) and keep KubeVirt's default guest agent channel."))
		}
	}
	return out
}

func phase(vmi *virtv1.VirtualMachineInstance) string {
	if vmi.Status.Phase == "" {
		return string(virtv1.Pending)
	}
	return string(vmi.Status.Phase)
}

func condition(vmi *virtv1.VirtualMachineInstance, t virtv1.VirtualMachineInstanceConditionType) *virtv1.VirtualMachineInstanceCondition {
	for i := range vmi.Status.Conditions {
		if vmi.Status.Conditions[i].Type == t {
			return &vmi.Status.Conditions[i]
		}
	}
	return nil
}

// ---- guaranteed-resources ----

// checkGuaranteedResources: the VM template's domain must make KubeVirt create a Guaranteed
// virt-launcher pod (see guaranteedQoS). A VM whose template leaves sizing to an instancetype
// is judged by its running VMI, which carries the expanded domain, or warned about.
func checkGuaranteedResources(c *cluster) []Result {
	var out []Result
	for _, vm := range c.vms {
		d := &templateSpec(vm).Domain
		source := ""
		if it := vm.Spec.Instancetype; it != nil && !sized(d) {
			vmi := c.vmi[vm.Name]
			if vmi == nil {
				out = append(out, result(vm.Name, RuleGuaranteedResources, Warn,
					fmt.Sprintf("cpu and memory come from instancetype %s, which preflight does not read, and the VM is not running", it.Name),
					"# Use an instancetype with dedicatedCPUPlacement: true, or size the VM in its template:\n"+resourcesSnippet("4", "16Gi")))
				continue
			}
			d = &vmi.Spec.Domain
			source = fmt.Sprintf(" (as expanded from instancetype %s in the running VMI)", it.Name)
		}
		q := guaranteedQoS(d)
		if q.guaranteed {
			out = append(out, result(vm.Name, RuleGuaranteedResources, Pass, "Guaranteed: "+q.how+source, ""))
			continue
		}
		cpu, mem := guaranteedSize(d)
		memStr := mem.String()
		if mem.IsZero() {
			memStr = "16Gi"
		}
		out = append(out, result(vm.Name, RuleGuaranteedResources, Fail,
			"Burstable, not Guaranteed: "+strings.Join(q.problems, "; ")+source,
			resourcesSnippet(cpu.String(), memStr)))
	}
	return out
}

func sized(d *virtv1.DomainSpec) bool {
	return len(d.Resources.Requests) > 0 || len(d.Resources.Limits) > 0 || (d.Memory != nil && d.Memory.Guest != nil)
}

// ---- placement ----

// checkPlacement: the placed VMIs (Scheduled or Running, with a node) of the set must sit on
// distinct nodes.
func checkPlacement(c *cluster) []Result {
	on := map[string][]string{} // node -> VMs of the set placed there
	for _, name := range c.names {
		if _, node := c.placed(name); node != "" {
			on[node] = append(on[node], name)
		}
	}
	var out []Result
	for _, vm := range c.vms {
		vmi, node := c.placed(vm.Name)
		if vmi == nil {
			msg := fmt.Sprintf("%s is not running, so it holds no place and no etcd member", vm.Name)
			if v := c.vmi[vm.Name]; v != nil && v.Status.Phase != virtv1.Succeeded && v.Status.Phase != virtv1.Failed {
				msg = fmt.Sprintf("the VMI is %s and not on a node yet", phase(v))
			}
			out = append(out, result(vm.Name, RulePlacement, Warn, msg,
				fmt.Sprintf("Power %s on (Redfish ComputerSystem.Reset On) and run preflight again.", vm.Name)))
			continue
		}
		here := on[node]
		if len(here) == 1 {
			var elsewhere []string
			for _, o := range c.others(vm.Name) {
				if _, n := c.placed(o); n != "" {
					elsewhere = append(elsewhere, fmt.Sprintf("%s on %s", o, n))
				}
			}
			msg := fmt.Sprintf("runs on node %s, where no other VM of the set runs", node)
			if len(elsewhere) > 0 {
				msg += " (" + strings.Join(elsewhere, ", ") + ")"
			}
			out = append(out, result(vm.Name, RulePlacement, Pass, msg, ""))
			continue
		}
		var with []string
		for _, o := range here {
			if o != vm.Name {
				with = append(with, o)
			}
		}
		msg := fmt.Sprintf("runs on node %s together with %s: losing or draining %s stops %d of the %d VMs",
			node, list(with), node, len(here), len(c.vms))
		if len(c.vms)-len(here) < c.quorum() {
			msg += " and etcd loses quorum"
		}
		out = append(out, result(vm.Name, RulePlacement, Fail, msg,
			fmt.Sprintf("Make sure %s passes (anti-affinity acts only at scheduling), then restart %s one at a time (Redfish ComputerSystem.Reset ForceRestart) so the scheduler moves them to other nodes.",
				RuleNodeSpread, list(without(here, here[0])))))
	}
	return out
}

// ---- spare-capacity ----

// checkSpareCapacity (N+1): for each VM there must be a node other than its own that it could
// restart on if its node were drained or lost: schedulable (not cordoned, Ready, labelled
// kubevirt.io/schedulable=true, no untolerated NoSchedule/NoExecute taint, matching the VM's
// nodeSelector and required node affinity), hosting no other VM of the set, and with enough
// allocatable CPU and memory left once the requests of what already runs there are
// subtracted. A VM that is not running is checked the same way: could it start somewhere?
func checkSpareCapacity(c *cluster) []Result {
	used := c.usage()
	hosting := map[string][]string{} // node -> VMs of the set placed there
	for _, name := range c.names {
		if _, node := c.placed(name); node != "" {
			hosting[node] = append(hosting[node], name)
		}
	}
	nodes := make([]*corev1.Node, 0, len(c.in.Nodes))
	for i := range c.in.Nodes {
		nodes = append(nodes, &c.in.Nodes[i])
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })

	var out []Result
	for _, vm := range c.vms {
		spec := templateSpec(vm)
		vmi, current := c.placed(vm.Name)
		req := c.requestOf(vm)
		var fits, reasons []string
		for _, node := range nodes {
			if node.Name == current {
				continue
			}
			free := allocatable(node).sub(used[node.Name])
			why := ""
			switch ok, nodeWhy := nodeMatches(spec, node); {
			case len(hosting[node.Name]) > 0:
				why = "hosts " + list(hosting[node.Name])
			case node.Spec.Unschedulable:
				why = "is cordoned"
			case !nodeReady(node):
				why = "is not Ready"
			case node.Labels[virtv1.NodeSchedulable] != "true":
				why = fmt.Sprintf("is not schedulable for VMs (label %s is not \"true\")", virtv1.NodeSchedulable)
			case untoleratedTaint(spec.Tolerations, node) != nil:
				why = "has the untolerated taint " + untoleratedTaint(spec.Tolerations, node).ToString()
			case !ok:
				why = nodeWhy
			case !req.fits(free):
				why = fmt.Sprintf("has only %s free", free)
			default:
				fits = append(fits, fmt.Sprintf("%s (%s free)", node.Name, free))
				continue
			}
			reasons = append(reasons, node.Name+" "+why)
		}
		if len(fits) > 0 {
			where := fits[0]
			if len(fits) > 1 {
				where = fmt.Sprintf("%d nodes: %s", len(fits), strings.Join(firstN(fits, 3), ", "))
				if len(fits) > 3 {
					where += ", …"
				}
			}
			msg := fmt.Sprintf("if node %s is drained or lost, %s (%s) can restart on %s", current, vm.Name, req, where)
			if vmi == nil {
				msg = fmt.Sprintf("%s (%s) is not running; it can start on %s", vm.Name, req, where)
			}
			out = append(out, result(vm.Name, RuleSpareCapacity, Pass, msg, ""))
			continue
		}
		msg := fmt.Sprintf("if node %s is drained or lost, %s (%s) has no node to restart on", current, vm.Name, req)
		if vmi == nil {
			msg = fmt.Sprintf("%s (%s) is not running and has no node to start on", vm.Name, req)
		}
		switch {
		case len(nodes) == 0:
			msg += ": no nodes were found"
		case len(reasons) == 0:
			msg += ": there is no other node"
		default:
			msg += ": " + strings.Join(firstN(reasons, 8), "; ")
			if len(reasons) > 8 {
				msg += fmt.Sprintf("; and %d more", len(reasons)-8)
			}
		}
		out = append(out, result(vm.Name, RuleSpareCapacity, Fail, msg,
			fmt.Sprintf("Free at least %s on a schedulable node that hosts no other VM of the set: uncordon or add a node, or move other workloads away.", req)))
	}
	return out
}

// usage sums, per node, the requests of the non-terminated pods and of the placed VMIs whose
// virt-launcher pod is not among the pods.
func (c *cluster) usage() map[string]need {
	used := map[string]need{}
	launcher := map[string]bool{} // VMI UIDs whose launcher pod is counted
	for i := range c.in.Pods {
		p := &c.in.Pods[i]
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		used[p.Spec.NodeName] = used[p.Spec.NodeName].add(podRequests(p))
		if uid := launcherOf(p); uid != "" {
			launcher[uid] = true
		}
	}
	for i := range c.in.VMIs {
		vmi := &c.in.VMIs[i]
		if vmi.Status.Phase == virtv1.Succeeded || vmi.Status.Phase == virtv1.Failed || launcher[string(vmi.UID)] {
			continue
		}
		if node := nodeOf(vmi); node != "" {
			used[node] = used[node].add(estimate(&vmi.Spec.Domain))
		}
	}
	return used
}

// launcherOf returns the UID of the VMI a virt-launcher pod runs, or "".
func launcherOf(p *corev1.Pod) string {
	if uid := p.Labels[virtv1.CreatedByLabel]; uid != "" && p.Labels[virtv1.AppLabel] == "virt-launcher" {
		return uid
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "VirtualMachineInstance" && o.Controller != nil && *o.Controller {
			return string(o.UID)
		}
	}
	return ""
}

// requestOf is what the VM needs on a node: its virt-launcher pod's requests when that pod is
// known, else the estimate from its VMI's domain, else from its template's.
func (c *cluster) requestOf(vm *virtv1.VirtualMachine) need {
	if vmi := c.vmi[vm.Name]; vmi != nil {
		for i := range c.in.Pods {
			p := &c.in.Pods[i]
			if launcherOf(p) == string(vmi.UID) && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				return podRequests(p)
			}
		}
		return estimate(&vmi.Spec.Domain)
	}
	return estimate(&templateSpec(vm).Domain)
}

// ---- helpers ----

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func appendOnce(s []string, v string) []string {
	if contains(s, v) {
		return s
	}
	return append(s, v)
}

func without(s []string, v string) []string {
	var out []string
	for _, x := range s {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
