package preflight

import (
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// SuggestedLabelKey is the template label remediations propose when the VMs of the set share
// no template label that could select all of them.
const SuggestedLabelKey = "kubevirt-redfish.io/control-plane"

// commonLabels returns the template labels every VM of the set carries (same key and value),
// sorted by key; when there are none, it proposes SuggestedLabelKey=<namespace> and reports
// that the label must be added to the templates.
func (c *cluster) commonLabels() (kv [][2]string, mustAdd bool) {
	var common map[string]string
	for i, vm := range c.vms {
		var l map[string]string
		if vm.Spec.Template != nil {
			l = vm.Spec.Template.ObjectMeta.Labels
		}
		if i == 0 {
			common = map[string]string{}
			for k, v := range l {
				common[k] = v
			}
			continue
		}
		for k, v := range common {
			if l[k] != v {
				delete(common, k)
			}
		}
	}
	if len(common) == 0 {
		return [][2]string{{SuggestedLabelKey, c.namespace()}}, true
	}
	for k, v := range common {
		kv = append(kv, [2]string{k, v})
	}
	sort.Slice(kv, func(i, j int) bool { return kv[i][0] < kv[j][0] })
	return kv, false
}

func (c *cluster) namespace() string {
	if c.in.Namespace != "" {
		return c.in.Namespace
	}
	if len(c.vms) > 0 {
		return c.vms[0].Namespace
	}
	return "default"
}

// scalar renders s as a YAML scalar, quoting it when YAML would read it as something else.
func scalar(s string) string {
	b, err := yaml.Marshal(s)
	if err != nil {
		return fmt.Sprintf("%q", s)
	}
	return strings.TrimSpace(string(b))
}

// labelLines renders "key: value" lines at the given indent.
func labelLines(kv [][2]string, indent int) string {
	var b strings.Builder
	for _, p := range kv {
		fmt.Fprintf(&b, "%s%s: %s\n", strings.Repeat(" ", indent), scalar(p[0]), scalar(p[1]))
	}
	return b.String()
}

// templateLabelsSnippet is the spec.template.metadata.labels part of a VM snippet when the
// suggested label has to be added, else "".
func templateLabelsSnippet(kv [][2]string, mustAdd bool) string {
	if !mustAdd {
		return ""
	}
	return "    metadata:\n      labels:\n" + labelLines(kv, 8)
}

func (c *cluster) antiAffinitySnippet() string {
	kv, add := c.commonLabels()
	return "spec:\n  template:\n" + templateLabelsSnippet(kv, add) +
		"    spec:\n" +
		"      affinity:\n" +
		"        podAntiAffinity:\n" +
		"          requiredDuringSchedulingIgnoredDuringExecution:\n" +
		"          - labelSelector:\n" +
		"              matchLabels:\n" + labelLines(kv, 16) +
		"            topologyKey: kubernetes.io/hostname\n"
}

func (c *cluster) pdbSnippet(name string) string {
	kv, add := c.commonLabels()
	s := "apiVersion: policy/v1\n" +
		"kind: PodDisruptionBudget\n" +
		"metadata:\n" +
		"  name: " + scalar(name) + "\n" +
		"  namespace: " + scalar(c.namespace()) + "\n" +
		"spec:\n" +
		fmt.Sprintf("  minAvailable: %d\n", c.quorum()) +
		"  selector:\n" +
		"    matchLabels:\n" + labelLines(kv, 6)
	if add {
		s += "# and on every VM:\n" + "spec:\n  template:\n" + templateLabelsSnippet(kv, add)
	}
	return s
}

const evictionSnippet = "spec:\n  template:\n    spec:\n      evictionStrategy: None\n"

const probeSnippet = "spec:\n  template:\n    spec:\n" +
	"      readinessProbe:\n" +
	"        guestAgentPing: {}\n" +
	"        initialDelaySeconds: 120\n" +
	"        periodSeconds: 10\n" +
	"        timeoutSeconds: 5\n" +
	"        failureThreshold: 6\n"

func resourcesSnippet(cpu, memory string) string {
	return "spec:\n  template:\n    spec:\n      domain:\n        resources:\n" +
		"          requests:\n" +
		"            cpu: " + scalar(cpu) + "\n" +
		"            memory: " + scalar(memory) + "\n" +
		"          limits:\n" +
		"            cpu: " + scalar(cpu) + "\n" +
		"            memory: " + scalar(memory) + "\n"
}
