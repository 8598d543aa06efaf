package preflight

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
)

// RESTConfig finds the cluster: the kubeconfig file given, else $KUBECONFIG, else the
// in-cluster service account.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	if kubeconfig != "" {
		// Honour the kubeconfig's current context, like kubectl.
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}
		return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	}
	rc, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig, no $KUBECONFIG and not in a cluster: %w", err)
	}
	return rc, nil
}

// Load reads what the rules need: the VirtualMachines of namespace, split into those that
// match selector (a label selector on the VMs' own labels, "" for all) and the others, the VMIs and non-terminated pods of
// all namespaces (falling back to the namespace when cluster-wide reads are forbidden, which
// the returned notes then say), the namespace's PodDisruptionBudgets and the nodes.
func Load(ctx context.Context, rc *rest.Config, namespace, selector string) (Input, []string, error) {
	in := Input{Namespace: namespace}
	var notes []string
	sel, err := labels.Parse(selector)
	if err != nil {
		return in, nil, fmt.Errorf("invalid selector %q: %w", selector, err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return in, nil, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return in, nil, err
	}

	// All VMs of the namespace: the selected ones are the set, the others matter when a
	// PodDisruptionBudget selects their pods too.
	vms, err := dyn.Resource(kubevirt.VMResource).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, nil, fmt.Errorf("listing VirtualMachines in %s: %w", namespace, err)
	}
	for _, u := range vms.Items {
		var vm virtv1.VirtualMachine
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &vm); err != nil {
			return in, nil, fmt.Errorf("VirtualMachine %s/%s: %w", namespace, u.GetName(), err)
		}
		if sel.Matches(labels.Set(vm.Labels)) {
			in.VMs = append(in.VMs, vm)
		} else {
			in.OtherVMs = append(in.OtherVMs, vm)
		}
	}

	vmis, err := dyn.Resource(kubevirt.VMIResource).List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		notes = append(notes, fmt.Sprintf("VirtualMachineInstances outside namespace %s are not readable: spare-capacity does not subtract them from their nodes", namespace))
		vmis, err = dyn.Resource(kubevirt.VMIResource).Namespace(namespace).List(ctx, metav1.ListOptions{})
	}
	if err != nil {
		return in, nil, fmt.Errorf("listing VirtualMachineInstances: %w", err)
	}
	for _, u := range vmis.Items {
		var vmi virtv1.VirtualMachineInstance
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &vmi); err != nil {
			return in, nil, fmt.Errorf("VirtualMachineInstance %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		in.VMIs = append(in.VMIs, vmi)
	}

	pdbs, err := cs.PolicyV1().PodDisruptionBudgets(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, nil, fmt.Errorf("listing PodDisruptionBudgets in %s: %w", namespace, err)
	}
	in.PDBs = pdbs.Items

	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, nil, fmt.Errorf("listing nodes: %w", err)
	}
	in.Nodes = nodes.Items

	live := metav1.ListOptions{FieldSelector: "status.phase!=Succeeded,status.phase!=Failed"}
	pods, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, live)
	if apierrors.IsForbidden(err) {
		notes = append(notes, fmt.Sprintf("pods outside namespace %s are not readable: spare-capacity counts only the VMIs and the pods of %s against node capacity", namespace, namespace))
		pods, err = cs.CoreV1().Pods(namespace).List(ctx, live)
	}
	switch {
	case apierrors.IsForbidden(err):
		notes = append(notes, "pods are not readable: spare-capacity estimates VMI requests from their specs and ignores other workloads")
	case err != nil:
		return in, nil, fmt.Errorf("listing pods: %w", err)
	default:
		in.Pods = keepScheduled(pods.Items)
	}
	return in, notes, nil
}

func keepScheduled(pods []corev1.Pod) []corev1.Pod {
	out := pods[:0]
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			out = append(out, p)
		}
	}
	return out
}
