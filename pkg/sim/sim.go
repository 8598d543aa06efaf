// Package sim simulates what virt-controller and virt-handler do with VirtualMachines, so the
// demo and the tests run without KVM: it honours run strategies, walks VMIs through their
// phases, gives every boot a new VMI UID, places VMIs on nodes, and lets tests shut down or
// reboot a guest from inside. It talks to any apiserver (real, or the fake clientset of the
// demo) through the dynamic client. Production code never imports it.
package sim

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	virtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
)

// Options tune the simulation.
type Options struct {
	// Nodes VMIs are placed on (least loaded first). Default: node-1..node-3.
	Nodes []string
	// BootDelay is how long a new VMI takes from Pending to Running.
	BootDelay time.Duration
	// ShutdownDelay is how long a guest takes to shut down when asked to stop gracefully.
	ShutdownDelay time.Duration
	// DeclarativeHotplug plays KubeVirt's DeclarativeHotplugVolumes feature gate: a
	// hotpluggable volume added to or removed from a running VM's CD-ROM reaches its VMI.
	DeclarativeHotplug bool
	// CDI tunes the CDI importer and garbage collector simulation (cdi.go, gc.go).
	CDI CDIOptions
}

// Simulator plays virt-controller for every VM it can see.
type Simulator struct {
	dyn       dynamic.Interface
	opts      Options
	vms, vmis cache.SharedIndexInformer
	queue     workqueue.TypedRateLimitingInterface[string]

	mu sync.Mutex
	// stopping records when a graceful stop of a VMI (by UID) began.
	stopping map[types.UID]time.Time
	// booting records when the simulator first saw each live VMI (the boot delay counts from
	// there: creation timestamps have only second precision); placed records the node of every
	// VMI it started, so a VMI is started once and concurrent boots spread over the nodes even
	// before the cache shows them.
	booting map[types.UID]time.Time
	placed  map[types.UID]string
	// vmiStatusSub caches whether the VMI CRD has a status subresource.
	vmiStatusSub *bool

	cdi *cdiSim
	gc  *gcSim
}

const simAnnotation = "sim.kubevirt-redfish.io/"

// New prepares a simulator; Run starts it.
func New(dyn dynamic.Interface, opts Options) *Simulator {
	if len(opts.Nodes) == 0 {
		opts.Nodes = []string{"node-1", "node-2", "node-3"}
	}
	if opts.BootDelay == 0 {
		opts.BootDelay = 200 * time.Millisecond
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	s := &Simulator{
		dyn:      dyn,
		opts:     opts,
		vms:      f.ForResource(kubevirt.VMResource).Informer(),
		vmis:     f.ForResource(kubevirt.VMIResource).Informer(),
		queue:    workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		stopping: map[types.UID]time.Time{},
		booting:  map[types.UID]time.Time{},
		placed:   map[types.UID]string{},
	}
	_ = s.vms.SetTransform(typed[virtv1.VirtualMachine])
	_ = s.vmis.SetTransform(typed[virtv1.VirtualMachineInstance])
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    s.enqueue,
		UpdateFunc: func(_, o any) { s.enqueue(o) },
		DeleteFunc: s.enqueue,
	}
	_, _ = s.vms.AddEventHandler(h)
	_, _ = s.vmis.AddEventHandler(h)
	_, _ = s.vmis.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: s.forget})
	s.cdi = newCDI(s, f, opts.CDI)
	s.gc = newGC(s, s.cdi.opts.GCInterval)
	return s
}

func typed[T any](obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := new(T)
	err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out)
	return out, err
}

func (s *Simulator) enqueue(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if o, ok := obj.(metav1.Object); ok {
		s.queue.Add(o.GetNamespace() + "/" + o.GetName())
	}
}

// Run starts the simulator; it returns when its caches have synced and keeps working until
// ctx ends.
func (s *Simulator) Run(ctx context.Context) error {
	go s.vms.Run(ctx.Done())
	go s.vmis.Run(ctx.Done())
	s.cdi.start(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), s.vms.HasSynced, s.vmis.HasSynced, s.cdi.hasSynced) {
		return errors.New("simulator caches did not sync")
	}
	s.cdi.runWorkers(ctx)
	go s.gc.run(ctx)
	go func() { <-ctx.Done(); s.queue.ShutDown() }()
	for i := 0; i < 2; i++ {
		go s.worker(ctx)
	}
	return nil
}

func (s *Simulator) worker(ctx context.Context) {
	for {
		key, quit := s.queue.Get()
		if quit {
			return
		}
		if err := s.sync(ctx, key); err != nil && ctx.Err() == nil {
			s.queue.AddRateLimited(key)
		} else {
			s.queue.Forget(key)
		}
		s.queue.Done(key)
	}
}

func (s *Simulator) get(key string) (*virtv1.VirtualMachine, *virtv1.VirtualMachineInstance) {
	var vm *virtv1.VirtualMachine
	var vmi *virtv1.VirtualMachineInstance
	if o, ok, _ := s.vms.GetIndexer().GetByKey(key); ok {
		vm = o.(*virtv1.VirtualMachine)
	}
	if o, ok, _ := s.vmis.GetIndexer().GetByKey(key); ok {
		vmi = o.(*virtv1.VirtualMachineInstance)
	}
	return vm, vmi
}

// sync is one pass of the VM controller for key, following KubeVirt's run strategy rules.
func (s *Simulator) sync(ctx context.Context, key string) error {
	vm, vmi := s.get(key)
	if vm == nil {
		// Like the real controller, a VMI whose VM is gone is garbage.
		if vmi != nil && vmi.DeletionTimestamp == nil && metav1.GetControllerOf(vmi) != nil {
			return s.deleteVMI(ctx, vmi)
		}
		return nil
	}
	rs := kubevirt.RunStrategy(vm)
	if vmi != nil && isFinal(vmi) {
		s.forget(vmi) // a stopped guest holds no node
	}
	var err error
	switch rs {
	case virtv1.RunStrategyAlways:
		err = s.keepRunning(ctx, vm, vmi, true)
	case virtv1.RunStrategyRerunOnFailure:
		// A finished VMI is removed; a failed one also leaves a start request behind, and a
		// missing VMI starts only on a start request or when the strategy just changed.
		switch {
		case vmi != nil && vmi.DeletionTimestamp == nil && isFinal(vmi):
			if err = s.deleteVMI(ctx, vmi); err == nil && vmi.Status.Phase == virtv1.Failed {
				err = s.setStartRequest(ctx, vm, true)
			}
		case vmi == nil && (vm.Status.RunStrategy != rs || hasStartRequest(vm)):
			if err = s.createVMI(ctx, vm); err == nil && hasStartRequest(vm) {
				err = s.setStartRequest(ctx, vm, false)
			}
		}
	case virtv1.RunStrategyOnce:
		if vmi == nil {
			err = s.createVMI(ctx, vm)
		}
	case virtv1.RunStrategyHalted:
		if vmi != nil {
			err = s.stop(ctx, key, vmi)
		}
	case virtv1.RunStrategyManual:
		// Starting and stopping a Manual VM goes through virt-api subresources, which the
		// simulated cluster does not have.
	}
	if err != nil {
		return err
	}
	if vmi != nil && !isFinal(vmi) && vmi.DeletionTimestamp == nil {
		if err := s.advance(ctx, key, vm, vmi); err != nil {
			return err
		}
		if s.opts.DeclarativeHotplug {
			if err := s.hotplugCDROMs(ctx, vm, vmi); err != nil {
				return err
			}
		}
	}
	return s.updateVMStatus(ctx, vm, vmi, rs)
}

func isFinal(vmi *virtv1.VirtualMachineInstance) bool {
	return vmi.Status.Phase == virtv1.Succeeded || vmi.Status.Phase == virtv1.Failed
}

// keepRunning restarts a finished VMI and starts a missing one.
func (s *Simulator) keepRunning(ctx context.Context, vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance, restartFinal bool) error {
	if vmi == nil {
		return s.createVMI(ctx, vm)
	}
	if restartFinal && isFinal(vmi) && vmi.DeletionTimestamp == nil {
		return s.deleteVMI(ctx, vmi)
	}
	return nil
}

// stop shuts a VMI down the way virt-handler does for a Halted VM: a running guest gets
// ShutdownDelay to power off (PoweringOff meanwhile), then the VMI is deleted.
func (s *Simulator) stop(ctx context.Context, key string, vmi *virtv1.VirtualMachineInstance) error {
	if vmi.DeletionTimestamp != nil {
		return nil
	}
	if vmi.Status.Phase != virtv1.Running && s.opts.ShutdownDelay > 0 {
		// The cache may not show yet the boot this simulator has just finished: a guest that
		// runs must get its shutdown time, so ask the cluster.
		if fresh, err := s.freshVMI(ctx, vmi); err != nil {
			return err
		} else if fresh != nil {
			vmi = fresh
		}
	}
	if vmi.Status.Phase == virtv1.Running && s.opts.ShutdownDelay > 0 {
		s.mu.Lock()
		began, ok := s.stopping[vmi.UID]
		if !ok {
			began = time.Now()
			s.stopping[vmi.UID] = began
		}
		s.mu.Unlock()
		if left := s.opts.ShutdownDelay - time.Since(began); left > 0 {
			s.queue.AddAfter(key, left)
			return nil
		}
	}
	s.mu.Lock()
	delete(s.stopping, vmi.UID)
	s.mu.Unlock()
	return s.deleteVMI(ctx, vmi)
}

// freshVMI reads vmi from the cluster; nil when it is gone or replaced.
func (s *Simulator) freshVMI(ctx context.Context, vmi *virtv1.VirtualMachineInstance) (*virtv1.VirtualMachineInstance, error) {
	u, err := s.dyn.Resource(kubevirt.VMIResource).Namespace(vmi.Namespace).Get(ctx, vmi.Name, metav1.GetOptions{})
	if err != nil {
		return nil, ignoreNotFound(err)
	}
	fresh := &virtv1.VirtualMachineInstance{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, fresh); err != nil {
		return nil, err
	}
	if fresh.UID != vmi.UID {
		return nil, nil
	}
	return fresh, nil
}

func (s *Simulator) deleteVMI(ctx context.Context, vmi *virtv1.VirtualMachineInstance) error {
	err := s.dyn.Resource(kubevirt.VMIResource).Namespace(vmi.Namespace).Delete(ctx, vmi.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &vmi.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// createVMI starts a boot: a VMI from the VM template, owned by the VM, Pending.
func (s *Simulator) createVMI(ctx context.Context, vm *virtv1.VirtualMachine) error {
	// The VM cache may lag the VMI cache (say, a stop wrote Halted and deleted the VMI): like
	// virt-controller's expectations, confirm with a fresh read before starting anything.
	u, err := s.dyn.Resource(kubevirt.VMResource).Namespace(vm.Namespace).Get(ctx, vm.Name, metav1.GetOptions{})
	if err != nil {
		return ignoreNotFound(err)
	}
	fresh := &virtv1.VirtualMachine{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, fresh); err != nil {
		return err
	}
	if kubevirt.RunStrategy(fresh) != kubevirt.RunStrategy(vm) {
		s.queue.Add(vm.Namespace + "/" + vm.Name)
		return nil
	}
	if vm.Spec.Template == nil {
		return nil
	}
	if err := s.ensureTemplateDataVolumes(ctx, vm); err != nil {
		return err
	}
	spec := vm.Spec.Template.Spec.DeepCopy()
	if spec.Domain.Firmware == nil {
		spec.Domain.Firmware = &virtv1.Firmware{}
	}
	if spec.Domain.Firmware.UUID == "" {
		// virt-controller gives every VMI of a VM the same stable firmware UUID.
		spec.Domain.Firmware.UUID = types.UID(kubevirt.DerivedFirmwareUUID(vm.Name))
	}
	vmi := &virtv1.VirtualMachineInstance{
		TypeMeta: metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance"},
		ObjectMeta: metav1.ObjectMeta{
			Name: vm.Name, Namespace: vm.Namespace,
			// The real apiserver assigns its own UID and creation time; the fake clientset of
			// the demo keeps these.
			UID:               types.UID(uuid.NewUUID()),
			CreationTimestamp: metav1.Now(),
			Labels:            vm.Spec.Template.ObjectMeta.Labels,
			Annotations:       vm.Spec.Template.ObjectMeta.Annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm,
				virtv1.VirtualMachineGroupVersionKind)},
		},
		Spec:   *spec,
		Status: virtv1.VirtualMachineInstanceStatus{Phase: virtv1.Pending},
	}
	obj, err := ToUnstructured(vmi)
	if err != nil {
		return err
	}
	_, err = s.dyn.Resource(kubevirt.VMIResource).Namespace(vm.Namespace).Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return err
	}
	s.queue.AddAfter(vm.Namespace+"/"+vm.Name, s.opts.BootDelay)
	return nil
}

// hotplugCDROMs brings a running VMI's CD-ROM volumes in line with the VM's hotpluggable ones:
// media swapped into or out of a CD-ROM the VMI booted with.
func (s *Simulator) hotplugCDROMs(ctx context.Context, vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance) error {
	cdroms := map[string]bool{}
	for _, d := range vmi.Spec.Domain.Devices.Disks {
		if d.CDRom != nil {
			cdroms[d.Name] = true
		}
	}
	want := map[string]virtv1.Volume{}
	for _, v := range vm.Spec.Template.Spec.Volumes {
		if cdroms[v.Name] && v.DataVolume != nil && v.DataVolume.Hotpluggable {
			want[v.Name] = v
		}
	}
	var vols []virtv1.Volume
	changed := false
	for _, v := range vmi.Spec.Volumes {
		w, ok := want[v.Name]
		switch {
		case !cdroms[v.Name]:
			vols = append(vols, v)
		case ok:
			changed = changed || !equality.Semantic.DeepEqual(v, w)
			vols = append(vols, w)
			delete(want, v.Name)
		case v.DataVolume != nil && v.DataVolume.Hotpluggable:
			changed = true // ejected
		default:
			vols = append(vols, v)
		}
	}
	for _, w := range want {
		vols, changed = append(vols, w), true // inserted into an empty tray
	}
	if !changed {
		return nil
	}
	return s.patchVMI(ctx, vmi, map[string]any{"spec": map[string]any{"volumes": vols}}, false)
}

// ensureTemplateDataVolumes creates the DataVolumes of the VM's dataVolumeTemplates, owned by
// the VM, as virt-controller does before it starts the VM.
func (s *Simulator) ensureTemplateDataVolumes(ctx context.Context, vm *virtv1.VirtualMachine) error {
	for _, tpl := range vm.Spec.DataVolumeTemplates {
		dv := &cdiv1.DataVolume{
			TypeMeta: metav1.TypeMeta{APIVersion: "cdi.kubevirt.io/v1beta1", Kind: "DataVolume"},
			ObjectMeta: metav1.ObjectMeta{
				Name: tpl.Name, Namespace: vm.Namespace, Labels: tpl.Labels, Annotations: tpl.Annotations,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, virtv1.VirtualMachineGroupVersionKind)},
			},
			Spec: tpl.Spec,
		}
		u, err := ToUnstructured(dv)
		if err != nil {
			return err
		}
		_, err = s.dyn.Resource(kubevirt.DataVolumeResource).Namespace(vm.Namespace).Create(ctx, u, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// advance walks a live VMI from Pending through Scheduled to Running once BootDelay passed.
func (s *Simulator) advance(ctx context.Context, key string, vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance) error {
	s.mu.Lock()
	_, started := s.placed[vmi.UID]
	seen, ok := s.booting[vmi.UID]
	if !ok {
		seen = time.Now()
		s.booting[vmi.UID] = seen
	}
	s.mu.Unlock()
	if vmi.Status.Phase == virtv1.Running || started {
		return nil
	}
	// Like virt-controller, start no VMI before its DataVolumes are populated (DataVolume
	// events requeue it too).
	if s.dataVolumesPending(vmi) {
		s.queue.AddAfter(key, time.Second)
		return nil
	}
	if left := s.opts.BootDelay - time.Since(seen); left > 0 {
		s.queue.AddAfter(key, left)
		return nil
	}
	node := s.pickNode(vmi)
	status := map[string]any{
		"phase":      string(virtv1.Running),
		"nodeName":   node,
		"interfaces": interfaceStatus(vmi),
		"phaseTransitionTimestamps": []map[string]any{
			{"phase": string(virtv1.Running), "phaseTransitionTimestamp": metav1.Now().UTC().Format(time.RFC3339)},
		},
		"conditions": []map[string]any{{"type": "Ready", "status": "True"}},
	}
	labels := map[string]any{virtv1.NodeNameLabel: node}
	if err := s.patchVMI(ctx, vmi, map[string]any{"metadata": map[string]any{"labels": labels}}, false); err != nil {
		return err
	}
	if err := s.patchVMI(ctx, vmi, map[string]any{"status": status}, true); err != nil {
		return err
	}
	s.mu.Lock()
	s.placed[vmi.UID] = node
	s.mu.Unlock()
	return nil
}

// forget drops what the simulator remembers of a deleted VMI.
func (s *Simulator) forget(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if vmi, ok := obj.(*virtv1.VirtualMachineInstance); ok {
		s.mu.Lock()
		delete(s.booting, vmi.UID)
		delete(s.placed, vmi.UID)
		delete(s.stopping, vmi.UID)
		s.mu.Unlock()
	}
}

// pickNode places a VMI on the least loaded node (ties: first in the list).
func (s *Simulator) pickNode(vmi *virtv1.VirtualMachineInstance) string {
	if vmi.Status.NodeName != "" {
		return vmi.Status.NodeName
	}
	load := map[string]int{}
	s.mu.Lock()
	for uid, node := range s.placed {
		if uid != vmi.UID {
			load[node]++
		}
	}
	s.mu.Unlock()
	nodes := append([]string(nil), s.opts.Nodes...)
	sort.SliceStable(nodes, func(i, j int) bool { return load[nodes[i]] < load[nodes[j]] })
	return nodes[0]
}

// interfaceStatus reports every interface with its MAC: the pinned one, else a stable
// locally administered MAC derived from the VM and interface name.
func interfaceStatus(vmi *virtv1.VirtualMachineInstance) []map[string]any {
	var out []map[string]any
	for _, iface := range vmi.Spec.Domain.Devices.Interfaces {
		mac := iface.MacAddress
		if mac == "" {
			mac = DerivedMAC(vmi.Namespace, vmi.Name, iface.Name)
		}
		out = append(out, map[string]any{"name": iface.Name, "mac": mac})
	}
	return out
}

// DerivedMAC is the MAC the simulator gives an interface without a pinned one.
func DerivedMAC(ns, vm, iface string) string {
	sum := sha256.Sum256([]byte(ns + "/" + vm + "/" + iface))
	return fmt.Sprintf("02:%02x:%02x:%02x:%02x:%02x", sum[0], sum[1], sum[2], sum[3], sum[4])
}

// updateVMStatus records the run strategy the controller acted on and a printable status, as
// virt-controller does.
func (s *Simulator) updateVMStatus(ctx context.Context, vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance, rs virtv1.VirtualMachineRunStrategy) error {
	printable := virtv1.VirtualMachineStatusStopped
	ready := false
	if vmi != nil && !isFinal(vmi) {
		printable = virtv1.VirtualMachineStatusStarting
		if vmi.DeletionTimestamp != nil || rs == virtv1.RunStrategyHalted {
			printable = virtv1.VirtualMachineStatusStopping
		} else if vmi.Status.Phase == virtv1.Running {
			printable, ready = virtv1.VirtualMachineStatusRunning, true
		}
	}
	if vm.Status.RunStrategy == rs && vm.Status.PrintableStatus == printable && vm.Status.Ready == ready && vm.Status.Created == (vmi != nil) {
		return nil
	}
	status := map[string]any{"runStrategy": string(rs), "printableStatus": string(printable), "ready": ready, "created": vmi != nil}
	return s.patchVM(ctx, vm, map[string]any{"status": status}, "status")
}

func hasStartRequest(vm *virtv1.VirtualMachine) bool {
	r := vm.Status.StateChangeRequests
	return len(r) > 0 && r[0].Action == virtv1.StartRequest
}

// setStartRequest adds or clears the start request virt-controller leaves after a failure.
func (s *Simulator) setStartRequest(ctx context.Context, vm *virtv1.VirtualMachine, on bool) error {
	var reqs any
	if on {
		reqs = []map[string]any{{"action": string(virtv1.StartRequest)}}
	}
	return s.patchVM(ctx, vm, map[string]any{"status": map[string]any{"stateChangeRequests": reqs}}, "status")
}

func (s *Simulator) patchVM(ctx context.Context, vm *virtv1.VirtualMachine, patch map[string]any, sub string) error {
	body, _ := json.Marshal(patch)
	var subs []string
	if sub != "" {
		subs = []string{sub}
	}
	_, err := s.dyn.Resource(kubevirt.VMResource).Namespace(vm.Namespace).Patch(ctx, vm.Name, types.MergePatchType, body, metav1.PatchOptions{}, subs...)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// patchVMI merge-patches a VMI, through the status subresource when the CRD has one.
func (s *Simulator) patchVMI(ctx context.Context, vmi *virtv1.VirtualMachineInstance, patch map[string]any, status bool) error {
	body, _ := json.Marshal(patch)
	res := s.dyn.Resource(kubevirt.VMIResource).Namespace(vmi.Namespace)
	if status {
		s.mu.Lock()
		useSub := s.vmiStatusSub == nil || *s.vmiStatusSub
		s.mu.Unlock()
		if useSub {
			_, err := res.Patch(ctx, vmi.Name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
			if err == nil {
				s.rememberStatusSub(true)
				return nil
			}
			if !apierrors.IsNotFound(err) || !s.vmiExists(vmi) {
				return ignoreNotFound(err)
			}
			s.rememberStatusSub(false)
		}
	}
	_, err := res.Patch(ctx, vmi.Name, types.MergePatchType, body, metav1.PatchOptions{})
	return ignoreNotFound(err)
}

func (s *Simulator) rememberStatusSub(v bool) {
	s.mu.Lock()
	s.vmiStatusSub = &v
	s.mu.Unlock()
}

func (s *Simulator) vmiExists(vmi *virtv1.VirtualMachineInstance) bool {
	_, ok, _ := s.vmis.GetIndexer().GetByKey(vmi.Namespace + "/" + vmi.Name)
	return ok
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// GuestShutdown powers the guest off from inside (as `poweroff` in the guest would): the VMI
// ends Succeeded and the run strategy decides what happens next.
func (s *Simulator) GuestShutdown(ctx context.Context, ns, name string) error {
	_, vmi := s.get(ns + "/" + name)
	if vmi == nil || isFinal(vmi) {
		return fmt.Errorf("%s/%s has no running VMI", ns, name)
	}
	return s.patchVMI(ctx, vmi, map[string]any{"status": map[string]any{"phase": string(virtv1.Succeeded)}}, true)
}

// GuestReboot reboots the guest from inside. KubeVirt keeps the same VMI (rebootPolicy
// Reboot), so nothing changes in the cluster but a reboot counter the tests can read.
func (s *Simulator) GuestReboot(ctx context.Context, ns, name string) error {
	_, vmi := s.get(ns + "/" + name)
	if vmi == nil || isFinal(vmi) {
		return fmt.Errorf("%s/%s has no running VMI", ns, name)
	}
	n := 0
	fmt.Sscan(vmi.Annotations[simAnnotation+"reboots"], &n)
	return s.patchVMI(ctx, vmi, map[string]any{"metadata": map[string]any{"annotations": map[string]any{simAnnotation + "reboots": fmt.Sprint(n + 1)}}}, false)
}
