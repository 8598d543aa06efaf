// Package preflight_test runs `kubevirt-redfish preflight` end to end against a real
// kube-apiserver with the real KubeVirt CRDs: Nodes with allocatable capacity, the example
// control-plane VMs of examples/vms and their PodDisruptionBudget, the simulator placing the
// VMIs on nodes, and deliberately broken copies of the examples.
package preflight_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/preflight"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/testenv"
)

var pdbGVR = schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}

// examples reads the VirtualMachines and PodDisruptionBudgets of examples/vms (other kinds,
// such as the NetworkAttachmentDefinition, have no CRD here and are not needed).
func examples(t *testing.T) (vms, pdbs []*unstructured.Unstructured) {
	t.Helper()
	files, err := filepath.Glob("../../examples/vms/*.yaml")
	require.NoError(t, err)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			u := &unstructured.Unstructured{}
			err := dec.Decode(&u.Object)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, f)
			switch u.GetKind() {
			case "VirtualMachine":
				vms = append(vms, u)
			case "PodDisruptionBudget":
				pdbs = append(pdbs, u)
			}
		}
	}
	require.Len(t, vms, 3, "examples/vms must hold the three control-plane VMs")
	require.Len(t, pdbs, 1, "examples/vms must hold their PodDisruptionBudget")
	sort.Slice(vms, func(i, j int) bool { return vms[i].GetName() < vms[j].GetName() })
	return vms, pdbs
}

// expect gives the verdict and exact message one rule must produce for vm; others are the
// other VMs of the set (sorted).
type expect func(vm string, others []string) (preflight.Verdict, string)

type scenario struct {
	name string
	// simNodes are the nodes the simulator places VMIs on (default node-1..node-4).
	simNodes []string
	// cordon marks node-4 unschedulable.
	cordon bool
	// noPDB skips the example PodDisruptionBudget.
	noPDB bool
	// noAgent leaves the VMIs without the AgentConnected condition.
	noAgent bool
	// mutate edits spec.template.spec of every VM.
	mutate func(t *testing.T, spec map[string]any)
	// broken rules and what they must say; all other rules must pass.
	broken map[preflight.Rule]expect
	// loose checks the results of a broken rule whose expect is nil, for messages that
	// depend on where the simulator placed the VMs.
	loose map[preflight.Rule]func(t *testing.T, r preflight.Result)
}

func join(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

func TestPreflight(t *testing.T) {
	env := testenv.StartForTest(t)
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(env.Config)
	require.NoError(t, err)
	exampleVMs, examplePDBs := examples(t)

	scenarios := []scenario{
		{name: "examples"},
		{
			name:     "all three VMs on one node",
			simNodes: []string{"node-1"},
			broken: map[preflight.Rule]expect{preflight.RulePlacement: func(vm string, others []string) (preflight.Verdict, string) {
				return preflight.Fail, "runs on node node-1 together with " + join(others) + ": losing or draining node-1 stops 3 of the 3 VMs and etcd loses quorum"
			}},
		},
		{
			name:  "no PDB",
			noPDB: true,
			broken: map[preflight.Rule]expect{preflight.RuleDisruptionBudget: func(vm string, _ []string) (preflight.Verdict, string) {
				return preflight.Fail, "no PodDisruptionBudget selects the virt-launcher pod of " + vm + ": a drain may evict it while other VMs of the set are down"
			}},
		},
		{
			name:   "eviction LiveMigrate",
			mutate: func(t *testing.T, spec map[string]any) { spec["evictionStrategy"] = "LiveMigrate" },
			broken: map[preflight.Rule]expect{preflight.RuleEvictionStrategy: func(string, []string) (preflight.Verdict, string) {
				return preflight.Fail, "evictionStrategy is LiveMigrate: a drain live-migrates the VM, and live migration is not supported for control-plane VMs"
			}},
		},
		{
			name:    "no guest agent",
			noAgent: true,
			mutate:  func(t *testing.T, spec map[string]any) { delete(spec, "readinessProbe") },
			broken: map[preflight.Rule]expect{
				preflight.RuleGuestAgentProbe: func(string, []string) (preflight.Verdict, string) {
					return preflight.Fail, "no readiness probe: nothing checks that the QEMU guest agent runs (readinessProbe.guestAgentPing)"
				},
				preflight.RuleGuestAgentConnected: func(string, []string) (preflight.Verdict, string) {
					return preflight.Fail, "the running VMI has no AgentConnected condition: the QEMU guest agent is not running in the guest, or has not connected yet"
				},
			},
		},
		{
			name: "Burstable resources",
			mutate: func(t *testing.T, spec map[string]any) {
				require.NoError(t, unstructured.SetNestedField(spec, "1", "domain", "resources", "requests", "cpu"))
			},
			broken: map[preflight.Rule]expect{preflight.RuleGuaranteedResources: func(string, []string) (preflight.Verdict, string) {
				return preflight.Fail, "Burstable, not Guaranteed: requests.cpu 1 differs from limits.cpu 4"
			}},
		},
		{
			name:   "no spare node",
			cordon: true,
			broken: map[preflight.Rule]expect{preflight.RuleSpareCapacity: nil},
			loose: map[preflight.Rule]func(t *testing.T, r preflight.Result){preflight.RuleSpareCapacity: func(t *testing.T, r preflight.Result) {
				assert.Equal(t, preflight.Fail, r.Verdict, r.Message)
				assert.Contains(t, r.Message, " (4 CPU, 16Gi) has no node to restart on: ")
				assert.True(t, strings.HasSuffix(r.Message, "; node-4 is cordoned"), r.Message)
			}},
		},
	}

	for i, sc := range scenarios {
		ok := t.Run(sc.name, func(t *testing.T) {
			ns := fmt.Sprintf("preflight-%d", i)
			require.NoError(t, env.CreateNamespace(ctx, ns))
			names := runCluster(t, ctx, cs, dyn, ns, sc, exampleVMs, examplePDBs)

			args := []string{"--namespace", ns, "--kubeconfig", env.KubeconfigPath, "-o", "json"}
			var stdout, stderr bytes.Buffer
			code := preflight.Command(ctx, args, &stdout, &stderr)
			require.Empty(t, stderr.String())
			var report preflight.Report
			require.NoError(t, json.Unmarshal(stdout.Bytes(), &report), stdout.String())
			assert.Equal(t, names, report.VMs)
			assert.Empty(t, report.Notes)
			require.Len(t, report.Results, len(names)*len(preflight.Rules))

			wantExit := preflight.ExitOK
			for _, r := range report.Results {
				others := without(names, r.VM)
				exp, broken := sc.broken[r.Rule]
				switch {
				case !broken:
					assert.Equal(t, preflight.Pass, r.Verdict, "%s %s: %s", r.VM, r.Rule, r.Message)
				case exp != nil:
					v, msg := exp(r.VM, others)
					assert.Equal(t, v, r.Verdict, "%s %s: %s", r.VM, r.Rule, r.Message)
					assert.Equal(t, msg, r.Message, "%s %s", r.VM, r.Rule)
					assert.NotEmpty(t, r.Remediation, "%s %s", r.VM, r.Rule)
				default:
					sc.loose[r.Rule](t, r)
				}
				if r.Verdict == preflight.Fail {
					wantExit = preflight.ExitFail
				}
			}
			if len(sc.broken) > 0 {
				assert.Equal(t, preflight.ExitFail, wantExit, "a broken copy must fail")
				assert.Equal(t, preflight.Fail, report.Summary.Verdict)
			} else {
				assert.Equal(t, preflight.Summary{Pass: 24, Verdict: preflight.Pass}, report.Summary)
			}
			assert.Equal(t, wantExit, code, "exit code")

			// Selecting the VMs by their labels checks the same set.
			var sel bytes.Buffer
			assert.Equal(t, code, preflight.Command(ctx, append(args, "--selector", "role=control-plane"), &sel, &stderr))
			var selected preflight.Report
			require.NoError(t, json.Unmarshal(sel.Bytes(), &selected))
			assert.Equal(t, "role=control-plane", selected.Selector)
			selected.Selector = ""
			assert.Equal(t, report, selected)

			// The table output of the same cluster, for the record.
			stdout.Reset()
			tableCode := preflight.Command(ctx, args[:4], &stdout, &stderr)
			assert.Equal(t, code, tableCode)
			assert.Contains(t, stdout.String(), "\nVM    RULE                   RESULT  MESSAGE\n")
			t.Logf("kubevirt-redfish preflight --namespace %s (exit %d):\n%s", ns, tableCode, stdout.String())
		})
		if !ok {
			// The next scenario needs this one's cleanup; stop rather than cascade.
			t.FailNow()
		}
	}

	t.Run("usage and empty namespace", func(t *testing.T) {
		require.NoError(t, env.CreateNamespace(ctx, "preflight-empty"))
		var stdout, stderr bytes.Buffer
		code := preflight.Command(ctx, []string{"--namespace", "preflight-empty", "--kubeconfig", env.KubeconfigPath}, &stdout, &stderr)
		assert.Equal(t, preflight.ExitUsage, code)
		assert.Empty(t, stdout.String())
		assert.Equal(t, "kubevirt-redfish preflight: no VirtualMachines in namespace preflight-empty: nothing to check\n", stderr.String())

		stderr.Reset()
		t.Setenv("KUBECONFIG", env.KubeconfigPath)
		code = preflight.Command(ctx, []string{"-n", "preflight-empty", "-l", "cluster=nope"}, &stdout, &stderr)
		assert.Equal(t, preflight.ExitUsage, code)
		assert.Equal(t, "kubevirt-redfish preflight: no VirtualMachines in namespace preflight-empty match selector cluster=nope: nothing to check\n", stderr.String())
	})
}

func without(names []string, name string) []string {
	var out []string
	for _, n := range names {
		if n != name {
			out = append(out, n)
		}
	}
	return out
}

// runCluster builds one scenario's hosting cluster: four nodes with capacity, the (possibly
// broken) example VMs and PDB in ns, the simulator placing their VMIs once they are powered
// on, and the guest agent connecting. It returns the VM names; cleanup removes it all again
// so the next scenario starts from an empty cluster (the simulator watches every namespace).
func runCluster(t *testing.T, ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, ns string, sc scenario,
	exampleVMs, examplePDBs []*unstructured.Unstructured) []string {
	t.Helper()
	nodeNames := []string{"node-1", "node-2", "node-3", "node-4"}
	for _, name := range nodeNames {
		createNode(t, ctx, cs, name, sc.cordon && name == "node-4")
	}
	t.Cleanup(func() {
		for _, name := range nodeNames {
			_ = cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})

	vmClient := dyn.Resource(kubevirt.VMResource).Namespace(ns)
	vmiClient := dyn.Resource(kubevirt.VMIResource).Namespace(ns)
	var names []string
	for _, ex := range exampleVMs {
		vm := ex.DeepCopy()
		vm.SetNamespace(ns)
		spec, found, err := unstructured.NestedMap(vm.Object, "spec", "template", "spec")
		require.True(t, found && err == nil, "spec.template.spec of %s", vm.GetName())
		if sc.mutate != nil {
			sc.mutate(t, spec)
		}
		require.NoError(t, unstructured.SetNestedMap(vm.Object, spec, "spec", "template", "spec"))
		require.NoError(t, unstructured.SetNestedField(vm.Object, "Halted", "spec", "runStrategy"))
		created, err := vmClient.Create(ctx, vm, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
		require.NoError(t, err, "creating VM %s", vm.GetName())
		createDataVolumes(t, ctx, dyn, created)
		names = append(names, vm.GetName())
	}
	if !sc.noPDB {
		for _, ex := range examplePDBs {
			p := ex.DeepCopy()
			p.SetNamespace(ns)
			_, err := dyn.Resource(pdbGVR).Namespace(ns).Create(ctx, p, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
			require.NoError(t, err)
		}
	}

	simNodes := sc.simNodes
	if simNodes == nil {
		simNodes = nodeNames
	}
	simCtx, stopSim := context.WithCancel(ctx)
	require.NoError(t, sim.New(dyn, sim.Options{Nodes: simNodes, BootDelay: 50 * time.Millisecond}).Run(simCtx))
	t.Cleanup(func() {
		stopSim()
		bg := context.Background()
		_ = vmClient.DeleteCollection(bg, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = vmiClient.DeleteCollection(bg, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = dyn.Resource(pdbGVR).Namespace(ns).DeleteCollection(bg, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = dyn.Resource(kubevirt.DataVolumeResource).Namespace(ns).DeleteCollection(bg, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = cs.CoreV1().PersistentVolumeClaims(ns).DeleteCollection(bg, metav1.DeleteOptions{}, metav1.ListOptions{})
	})

	// Power on as Redfish does (runStrategy Once), one VM at a time: the simulator picks the
	// least loaded node from its cache, so concurrent boots could race onto one node.
	for _, name := range names {
		_, err := vmClient.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"runStrategy":"Once"}}`), metav1.PatchOptions{})
		require.NoError(t, err)
		var vmi *unstructured.Unstructured
		err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
			vmi, err = vmiClient.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			phase, _, _ := unstructured.NestedString(vmi.Object, "status", "phase")
			node, _, _ := unstructured.NestedString(vmi.Object, "status", "nodeName")
			return phase == "Running" && node != "", nil
		})
		require.NoError(t, err, "VMI %s/%s did not start", ns, name)
	}

	// Preflight only reads; stop the simulator before playing the guest agent, so that no
	// sync from a stale cache rewrites the VMI status (and its conditions) afterwards. Wait
	// until the VMIs stop changing, in case a write was already under way.
	stopSim()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 150*time.Millisecond, 10*time.Second, false, func(ctx context.Context) (bool, error) {
		list, err := vmiClient.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var rvs []string
		for _, v := range list.Items {
			rvs = append(rvs, v.GetName()+"@"+v.GetResourceVersion())
		}
		cur := strings.Join(rvs, ",")
		done := cur == last
		last = cur
		return done, nil
	})
	require.NoError(t, err, "VMIs kept changing after the simulator stopped")
	if !sc.noAgent {
		for _, name := range names {
			agentConnected(t, ctx, vmiClient, name)
		}
	}
	return names
}

// createDataVolumes plays virt-controller for the VM's dataVolumeTemplates: one DataVolume
// each, owned by the VM. The simulator's CDI part populates them, and boots no VMI before.
func createDataVolumes(t *testing.T, ctx context.Context, dyn dynamic.Interface, vm *unstructured.Unstructured) {
	t.Helper()
	templates, _, err := unstructured.NestedSlice(vm.Object, "spec", "dataVolumeTemplates")
	require.NoError(t, err)
	for _, tmpl := range templates {
		tm, _ := tmpl.(map[string]any)
		name, _, _ := unstructured.NestedString(tm, "metadata", "name")
		spec, _, _ := unstructured.NestedMap(tm, "spec")
		dv := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cdi.kubevirt.io/v1beta1",
			"kind":       "DataVolume",
			"metadata": map[string]any{
				"name": name, "namespace": vm.GetNamespace(),
				"ownerReferences": []any{map[string]any{
					"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "name": vm.GetName(),
					"uid": string(vm.GetUID()), "controller": true, "blockOwnerDeletion": true,
				}},
			},
			"spec": spec,
		}}
		_, err := dyn.Resource(kubevirt.DataVolumeResource).Namespace(vm.GetNamespace()).Create(ctx, dv, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) { // a simulator that does this itself got there first
			require.NoError(t, err, "creating DataVolume %s", name)
		}
	}
}

// createNode creates a hosting node able to run VMs, with 32 CPUs and 128Gi allocatable.
func createNode(t *testing.T, ctx context.Context, cs kubernetes.Interface, name string, cordoned bool) {
	t.Helper()
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name, "kubevirt.io/schedulable": "true",
		}},
		Spec: corev1.NodeSpec{Unschedulable: cordoned},
	}
	created, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	require.NoError(t, err)
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("128Gi"), corev1.ResourcePods: resource.MustParse("110")}
	created.Status = corev1.NodeStatus{
		Capacity: res, Allocatable: res,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
	}
	updated, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	require.NoError(t, err)
	// The TaintNodesByCondition admission plugin created the node with the not-ready taint;
	// play the node lifecycle controller, which lifts it once the node is Ready.
	var taints []corev1.Taint
	for _, taint := range updated.Spec.Taints {
		if taint.Key != corev1.TaintNodeNotReady {
			taints = append(taints, taint)
		}
	}
	updated.Spec.Taints = taints
	_, err = cs.CoreV1().Nodes().Update(ctx, updated, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// agentConnected plays virt-handler seeing the QEMU guest agent: AgentConnected=True.
func agentConnected(t *testing.T, ctx context.Context, vmis dynamic.ResourceInterface, name string) {
	t.Helper()
	patch := []byte(`{"status":{"conditions":[{"type":"Ready","status":"True"},{"type":"AgentConnected","status":"True"}]}}`)
	_, err := vmis.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) { // the VMI CRD has no status subresource
		_, err = vmis.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	require.NoError(t, err)
}
