package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim"
)

// fleet is the set of VMs loaded into the cluster.
type fleet struct {
	namespaces []string
	ids        []string // every system id, "<ns>.<vm>", by index
	running    []string // ids of the VMs with a running VMI
	halted     []string // ids of the VMs without one
}

// vmName is the name of VM i; it lives in namespace i mod M.
func vmName(i int) string { return fmt.Sprintf("vm-%05d", i) }

func namespaceName(j int) string { return fmt.Sprintf("bench-%d", j) }

// runningVM reports whether VM i is running: every other one.
func runningVM(i int) bool { return i%2 == 0 }

// vmsPerNode is the density of the simulated hosting cluster: the running VMIs are spread
// over one node per vmsPerNode VMs (at least 3). A node holds a bounded number of VMs
// whatever the size of the fleet, so the fleet grows by nodes.
const vmsPerNode = 100

func nodesFor(n int) int { return max(3, (n+vmsPerNode-1)/vmsPerNode) }

// benchVM is VM i of a fleet of n in m namespaces, shaped like a virtualized OpenShift node
// (sim.ControlPlaneVM: 4 cores, 16 GiB, UEFI, a root disk and a pod network interface with a
// pinned MAC), running (runStrategy Always) or halted. Each namespace is a target cluster
// with 3 control-plane VMs, the others workers.
func benchVM(ns string, i, m int) *virtv1.VirtualMachine {
	vm := sim.ControlPlaneVM(ns, vmName(i), i)
	vm.UID = "" // the apiserver assigns it
	vm.Spec.Template.Spec.Domain.Devices.Interfaces[0].MacAddress = fmt.Sprintf("02:00:%02x:%02x:%02x:%02x", byte(i>>24), byte(i>>16), byte(i>>8), byte(i))
	if i/m >= 3 {
		labels := map[string]string{"cluster": ns, "role": "worker"}
		vm.Labels, vm.Spec.Template.ObjectMeta.Labels = labels, labels
	}
	if runningVM(i) {
		always := virtv1.RunStrategyAlways
		vm.Spec.RunStrategy = &always
	}
	return vm
}

// benchVMI is the running instance of vm, as virt-controller and virt-handler would have left
// it: owned by the VM, scheduled on a node, phase Running, Ready, with its interfaces'
// addresses. The VMI CRD has no status subresource, so the status is stored as created.
func benchVMI(vm *virtv1.VirtualMachine, i, m, nodes int) *virtv1.VirtualMachineInstance {
	spec := vm.Spec.Template.Spec.DeepCopy()
	if spec.Domain.Firmware == nil {
		spec.Domain.Firmware = &virtv1.Firmware{}
	}
	if spec.Domain.Firmware.UUID == "" {
		sum := sha256.Sum256([]byte(vm.UID))
		spec.Domain.Firmware.UUID = types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16]))
	}
	// VM k of namespace j runs on node j+k: the control-plane VMs of a cluster on distinct
	// nodes, as a correct placement has them.
	node := fmt.Sprintf("node-%d", (i%m+i/m)%nodes+1)
	labels := map[string]string{virtv1.NodeNameLabel: node}
	for k, v := range vm.Spec.Template.ObjectMeta.Labels {
		labels[k] = v
	}
	now := metav1.Now()
	var ifaces []virtv1.VirtualMachineInstanceNetworkInterface
	for j, iface := range spec.Domain.Devices.Interfaces {
		ifaces = append(ifaces, virtv1.VirtualMachineInstanceNetworkInterface{
			Name: iface.Name, MAC: iface.MacAddress,
			IP:  fmt.Sprintf("10.128.%d.%d", (i/250)%250, i%250+j+1),
			IPs: []string{fmt.Sprintf("10.128.%d.%d", (i/250)%250, i%250+j+1)},
		})
	}
	return &virtv1.VirtualMachineInstance{
		TypeMeta: metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance"},
		ObjectMeta: metav1.ObjectMeta{
			Name: vm.Name, Namespace: vm.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, virtv1.VirtualMachineGroupVersionKind)},
		},
		Spec: *spec,
		Status: virtv1.VirtualMachineInstanceStatus{
			Phase:      virtv1.Running,
			NodeName:   node,
			Interfaces: ifaces,
			Conditions: []virtv1.VirtualMachineInstanceCondition{{Type: virtv1.VirtualMachineInstanceReady, Status: "True"}},
			PhaseTransitionTimestamps: []virtv1.VirtualMachineInstancePhaseTransitionTimestamp{
				{Phase: virtv1.Running, PhaseTransitionTimestamp: now},
			},
		},
	}
}

// loadFleet creates n VMs across m namespaces (and a VMI for every running one) with workers
// parallel creates and no client-side rate limit.
func loadFleet(ctx context.Context, cfg *rest.Config, n, m, workers int, logf func(string, ...any)) (*fleet, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit: the apiserver is the limit
	cfg.WarningHandler = rest.NoWarnings{}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	f := &fleet{}
	for j := range m {
		f.namespaces = append(f.namespaces, namespaceName(j))
	}
	for i := range n {
		id := kubevirt.SystemID(namespaceName(i%m), vmName(i))
		f.ids = append(f.ids, id)
		if runningVM(i) {
			f.running = append(f.running, id)
		} else {
			f.halted = append(f.halted, id)
		}
	}
	start := time.Now()
	var next, done atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := createOne(ctx, dyn, namespaceName(i%m), i, m, nodesFor(n)); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					return
				}
				if d := done.Add(1); d%2000 == 0 {
					logf("loaded %d/%d VMs (%.0f/s)", d, n, float64(d)/time.Since(start).Seconds())
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return f, nil
}

func createOne(ctx context.Context, dyn dynamic.Interface, ns string, i, m, nodes int) error {
	vm := benchVM(ns, i, m)
	u, err := kubevirt.ToUnstructured(vm)
	if err != nil {
		return err
	}
	created, err := dyn.Resource(kubevirt.VMResource).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating VM %s/%s: %w", ns, vm.Name, err)
	}
	if !runningVM(i) {
		return nil
	}
	vm.UID = created.GetUID()
	vmi, err := kubevirt.ToUnstructured(benchVMI(vm, i, m, nodes))
	if err != nil {
		return err
	}
	if _, err := dyn.Resource(kubevirt.VMIResource).Namespace(ns).Create(ctx, vmi, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating VMI %s/%s: %w", ns, vm.Name, err)
	}
	return nil
}
