package kubevirt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	virtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/informer"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/metrics"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// Resources kubevirt-redfish reads and writes.
var (
	VMResource  = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}
	VMIResource = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}
)

// ErrNotFound means the VM does not exist (or is not in a watched namespace).
var ErrNotFound = errors.New("virtual machine not found")

// ErrBusy means a change kept losing to concurrent writers.
var ErrBusy = errors.New("the virtual machine kept changing under concurrent updates")

// maxAttempts bounds the optimistic-concurrency retries of one change (about 10 s of backoff).
const maxAttempts = 12

// cacheWait bounds how long a write waits for the informer to show its result, so the next
// GET (served from the cache) reflects the change.
const cacheWait = 3 * time.Second

// Client reads VMs and VMIs from informer caches limited to the allowlisted namespaces and
// writes guarded JSON patches. A GET never reaches the apiserver.
type Client struct {
	dyn        dynamic.Interface
	log        *zap.Logger
	namespaces map[string]*nsCache
	queue      workqueue.TypedRateLimitingInterface[string]
	metrics    *metrics.Metrics
	// CacheRetention is how long an unused image cache DataVolume is kept, and SweepInterval
	// how often unused ones are looked for.
	CacheRetention, SweepInterval time.Duration
	// MediaOrphanGrace is how old a per-VM media DataVolume its VM does not reference must be
	// before the sweep deletes it (DefaultMediaOrphanGrace).
	MediaOrphanGrace time.Duration
	// CDROMHotplug uses KubeVirt's declarative volume hotplug for virtual media, so a running
	// VM sees an insert or eject at once (the cluster must enable DeclarativeHotplugVolumes).
	CDROMHotplug bool
}

type nsCache struct {
	vms, vmis, dvs cache.SharedIndexInformer
}

// NewClient prepares informers for the namespaces; Start runs them.
func NewClient(dyn dynamic.Interface, namespaces []string, log *zap.Logger) *Client {
	c := &Client{
		dyn:            dyn,
		log:            log,
		metrics:        metrics.New(),
		CacheRetention: DefaultCacheRetention,
		SweepInterval:  DefaultSweepInterval,
		namespaces:     map[string]*nsCache{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "boot-once"}),
	}
	c.MediaOrphanGrace = DefaultMediaOrphanGrace
	for _, ns := range namespaces {
		f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, nil)
		nc := &nsCache{
			vms:  f.ForResource(VMResource).Informer(),
			vmis: f.ForResource(VMIResource).Informer(),
			dvs:  f.ForResource(DataVolumeResource).Informer(),
		}
		_ = nc.vms.SetTransform(informer.Typed[virtv1.VirtualMachine])
		_ = nc.vmis.SetTransform(informer.Typed[virtv1.VirtualMachineInstance])
		_ = nc.vmis.AddIndexers(vmiIndexers)
		_ = nc.dvs.SetTransform(informer.Typed[cdiv1.DataVolume])
		_, _ = nc.dvs.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: c.observeImport})
		_, _ = nc.vmis.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueue,
			UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		})
		_, _ = nc.vms.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueue,
			UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		})
		c.namespaces[ns] = nc
	}
	return c
}

// UseMetrics records apiserver errors and import durations into m (before Start).
func (c *Client) UseMetrics(m *metrics.Metrics) { c.metrics = m }

// Start runs the informers until ctx ends. It returns once the caches have synced, or with an
// error if ctx ends first. Background reconciliation runs separately (RunBackground), so that
// with several replicas only the leader does it.
func (c *Client) Start(ctx context.Context) error {
	var synced []cache.InformerSynced
	for _, nc := range c.namespaces {
		go nc.vms.Run(ctx.Done())
		go nc.vmis.Run(ctx.Done())
		go nc.dvs.Run(ctx.Done())
		synced = append(synced, nc.vms.HasSynced, nc.vmis.HasSynced, nc.dvs.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return errors.New("informer caches did not sync")
	}
	return nil
}

// RunBackground restores boot orders after one-time overrides and deletes unused image
// caches and unreferenced media DataVolumes until ctx ends. Every change
// it makes is guarded like a request's, so two replicas running it at once would still be
// safe, only wasteful.
//
// It may run again after it returned: a replica that lost the leader Lease (an apiserver
// outage longer than the renew deadline) runs it anew when it wins the Lease back. The work
// queue outlives each run, so VMs enqueued meanwhile are handled then.
func (c *Client) RunBackground(ctx context.Context) {
	go c.sweepImageCaches(ctx)
	stop := context.AfterFunc(ctx, func() { c.queue.Add(wakeKey) })
	defer stop()
	c.runBootOnceWorker(ctx)
}

// wakeKey wakes the boot-once worker up when its run ends; it names no VM.
const wakeKey = "/"

// Synced reports whether every informer has synced.
func (c *Client) Synced() bool {
	for _, nc := range c.namespaces {
		if !nc.vms.HasSynced() || !nc.vmis.HasSynced() || !nc.dvs.HasSynced() {
			return false
		}
	}
	return true
}

// Get returns the machine ns/name from the cache.
func (c *Client) Get(ns, name string) (Machine, bool) {
	nc := c.namespaces[ns]
	if nc == nil {
		return Machine{}, false
	}
	obj, ok, _ := nc.vms.GetIndexer().GetByKey(ns + "/" + name)
	if !ok {
		return Machine{}, false
	}
	m := Machine{VM: obj.(*virtv1.VirtualMachine), Peers: nc.onNode}
	if obj, ok, _ := nc.vmis.GetIndexer().GetByKey(ns + "/" + name); ok {
		m.VMI = obj.(*virtv1.VirtualMachineInstance)
	}
	return m, true
}

// List returns every cached machine for which keep is true, sorted by id.
//
// It costs one VMI cache lookup per VM and no string building while sorting: ids sort as
// their namespace (a DNS label, so without dots) and then their name, which is the order of
// "<namespace>.<name>" because no "<namespace>." is a prefix of another.
func (c *Client) List(keep func(*virtv1.VirtualMachine) bool) []Machine {
	nss := make([]string, 0, len(c.namespaces))
	for ns := range c.namespaces {
		nss = append(nss, ns)
	}
	sort.Slice(nss, func(i, j int) bool { return nss[i]+"." < nss[j]+"." })
	var out []Machine
	for _, ns := range nss {
		nc := c.namespaces[ns]
		peers := nc.onNode // one method value for the namespace's machines
		vmis := nc.vmis.GetIndexer()
		start := len(out)
		for _, obj := range nc.vms.GetIndexer().List() {
			vm := obj.(*virtv1.VirtualMachine)
			if !keep(vm) {
				continue
			}
			m := Machine{VM: vm, Peers: peers}
			if obj, ok, _ := vmis.GetByKey(ns + "/" + vm.Name); ok {
				m.VMI = obj.(*virtv1.VirtualMachineInstance)
			}
			out = append(out, m)
		}
		slices.SortFunc(out[start:], func(a, b Machine) int { return strings.Compare(a.VM.Name, b.VM.Name) })
	}
	return out
}

// Reset carries out a Redfish reset.
func (c *Client) Reset(ctx context.Context, ns, name string, rt redfish.ResetType) error {
	var plan PowerPlan
	var m Machine
	err := c.mutate(ctx, ns, name, func(cur Machine) jsonPatch {
		m, plan = cur, PlanReset(rt, cur.VM, cur.VMI)
		p := newVMPatch(cur.VM)
		if plan.RunStrategy != nil {
			p.setRunStrategy(cur.VM, *plan.RunStrategy)
		}
		return p
	})
	if err != nil || !plan.DeleteVMI {
		return err
	}
	return c.deleteVMI(ctx, m.VMI, plan.Force)
}

// SetBoot applies a boot override PATCH.
func (c *Client) SetBoot(ctx context.Context, ns, name string, req BootRequest) error {
	return c.mutate(ctx, ns, name, func(cur Machine) jsonPatch {
		p := newVMPatch(cur.VM)
		p.applyBoot(cur.VM, PlanBoot(cur.VM, cur.VMIUID(), req))
		return p
	})
}

// Settings is a validated change of a machine's settings, applied as one guarded patch; nil
// fields are left alone.
type Settings struct {
	Boot         *BootRequest
	SecureBoot   *bool
	IndicatorLED *redfish.IndicatorLED
}

// ErrSecureBootNeedsUEFI refuses turning UEFI Secure Boot on for a VM that boots with BIOS.
var ErrSecureBootNeedsUEFI = errors.New("UEFI Secure Boot needs the UEFI boot mode")

// SetSettings applies settings: a boot override or boot mode, UEFI Secure Boot (with the SMM
// feature it needs) and the indicator LED. Firmware changes apply at the next start of the VM.
// Secure Boot is refused (ErrSecureBootNeedsUEFI) unless the VM boots, or is switched in the
// same request to boot, with UEFI.
func (c *Client) SetSettings(ctx context.Context, ns, name string, s Settings) error {
	refused := false
	err := c.mutate(ctx, ns, name, func(cur Machine) jsonPatch {
		p := newVMPatch(cur.VM)
		// The boot mode after this change: a mode switch in the same request counts.
		uefi := FirmwareMode(cur.VM) == redfish.BootUEFI
		if s.Boot != nil && s.Boot.Mode != nil {
			uefi = *s.Boot.Mode == redfish.BootUEFI
		}
		refused = s.SecureBoot != nil && *s.SecureBoot && !uefi
		if refused {
			return p
		}
		vm := cur.VM
		if s.Boot != nil {
			p.applyBoot(vm, PlanBoot(vm, cur.VMIUID(), *s.Boot))
		}
		if s.SecureBoot != nil && uefi {
			p.setSecureBoot(vm, *s.SecureBoot)
		}
		if s.IndicatorLED != nil {
			p.setIndicatorLED(vm, *s.IndicatorLED)
		}
		return p
	})
	if err == nil && refused {
		return ErrSecureBootNeedsUEFI
	}
	return err
}

// mutate computes a patch from the cached machine and applies it. Reads come from the cache,
// so a change costs one apiserver write when nobody races it. On a conflict (someone else,
// often virt-controller updating status, wrote first) it re-reads that one VM from the
// apiserver, recomputes and retries with a jittered backoff.
func (c *Client) mutate(ctx context.Context, ns, name string, plan func(Machine) jsonPatch) error {
	m, ok := c.Get(ns, name)
	if !ok {
		return ErrNotFound
	}
	backoff := wait.Backoff{Duration: 5 * time.Millisecond, Factor: 2, Jitter: 1, Steps: maxAttempts}
	for {
		p := plan(m)
		if !p.Changes() {
			return nil
		}
		out, err := c.dyn.Resource(VMResource).Namespace(ns).Patch(ctx, name, types.JSONPatchType, p.Bytes(), metav1.PatchOptions{})
		c.apiError("patch_vm", err)
		switch {
		case err == nil:
			if written, err := informer.Typed[virtv1.VirtualMachine](out); err == nil {
				c.waitForVM(ctx, ns, name, func(vm *virtv1.VirtualMachine) bool { return showsWrite(vm, written.(*virtv1.VirtualMachine)) })
			}
			return nil
		case apierrors.IsNotFound(err):
			return ErrNotFound
		case apierrors.IsConflict(err):
		case (apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)) && c.moved(ctx, ns, name, m.VM):
			// Computed from an older VM, the patch did not even apply to the newer one (a list
			// member it addresses by index is gone) before the resourceVersion guard could
			// answer 409: that is a conflict too.
		default:
			return err
		}
		if backoff.Steps <= 1 {
			return ErrBusy
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff.Step()):
		}
		if m.VM, err = c.fetchVM(ctx, ns, name); err != nil {
			return err
		}
	}
}

// moved reports whether the VM in the apiserver is newer than vm.
func (c *Client) moved(ctx context.Context, ns, name string, vm *virtv1.VirtualMachine) bool {
	cur, err := c.fetchVM(ctx, ns, name)
	return err == nil && cur.ResourceVersion != vm.ResourceVersion
}

// fetchVM reads one VM from the apiserver, for conflict retries only.
func (c *Client) fetchVM(ctx context.Context, ns, name string) (*virtv1.VirtualMachine, error) {
	u, err := c.dyn.Resource(VMResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	vm, err := informer.Typed[virtv1.VirtualMachine](u)
	if err != nil {
		return nil, err
	}
	return vm.(*virtv1.VirtualMachine), nil
}

// showsWrite reports whether the cached VM reflects a write that produced written: it is at a
// newer resourceVersion, or at the same one with the same content. Comparing content as well
// covers backends that do not bump resourceVersions (the fake clientset of the demo).
func showsWrite(cached, written *virtv1.VirtualMachine) bool {
	have, err1 := strconv.ParseUint(cached.ResourceVersion, 10, 64)
	want, err2 := strconv.ParseUint(written.ResourceVersion, 10, 64)
	if err1 == nil && err2 == nil && have > want {
		return true
	}
	return cached.ResourceVersion == written.ResourceVersion &&
		equality.Semantic.DeepEqual(cached.Spec, written.Spec) &&
		equality.Semantic.DeepEqual(cached.Annotations, written.Annotations)
}

func (c *Client) waitForVM(ctx context.Context, ns, name string, done func(*virtv1.VirtualMachine) bool) {
	_ = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, cacheWait, true, func(context.Context) (bool, error) {
		m, ok := c.Get(ns, name)
		return !ok || done(m.VM), nil
	})
}

// deleteVMI deletes exactly the VMI the plan was made for (UID precondition): if a new one
// replaced it meanwhile, that one is left alone.
func (c *Client) deleteVMI(ctx context.Context, vmi *virtv1.VirtualMachineInstance, force bool) error {
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &vmi.UID}}
	if force {
		opts.GracePeriodSeconds = new(int64)
	}
	err := c.apiError("delete_vmi", c.dyn.Resource(VMIResource).Namespace(vmi.Namespace).Delete(ctx, vmi.Name, opts))
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting VMI %s/%s: %w", vmi.Namespace, vmi.Name, err)
	}
	_ = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, cacheWait, true, func(context.Context) (bool, error) {
		m, ok := c.Get(vmi.Namespace, vmi.Name)
		return !ok || m.VMI == nil || m.VMI.UID != vmi.UID || m.VMI.DeletionTimestamp != nil, nil
	})
	return nil
}

// observeImport records how long a VM's media took to become ready.
func (c *Client) observeImport(oldObj, newObj any) {
	old, okOld := oldObj.(*cdiv1.DataVolume)
	dv, okNew := newObj.(*cdiv1.DataVolume)
	if okOld && okNew && dv.Labels[MediaLabel] == "cd" && old.Status.Phase != cdiv1.Succeeded && dv.Status.Phase == cdiv1.Succeeded {
		c.metrics.ImportDuration.Observe(time.Since(dv.CreationTimestamp.Time).Seconds())
	}
}

// apiError counts a failed apiserver request.
func (c *Client) apiError(op string, err error) error {
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
		c.metrics.APIErrors.WithLabelValues(op).Inc()
	}
	return err
}

func (c *Client) enqueue(obj any) {
	if o, ok := obj.(metav1.Object); ok {
		c.queue.Add(o.GetNamespace() + "/" + o.GetName())
	}
}

// runBootOnceWorker restores the boot order after a Once override has been booted with: when
// a VMI with a new UID appears, the override is consumed.
func (c *Client) runBootOnceWorker(ctx context.Context) {
	for {
		key, quit := c.queue.Get()
		if quit {
			return
		}
		if key == wakeKey {
			c.queue.Forget(key)
			c.queue.Done(key)
			if ctx.Err() != nil {
				return
			}
			continue
		}
		ns, name, _ := cache.SplitMetaNamespaceKey(key)
		err := c.mutate(ctx, ns, name, func(cur Machine) jsonPatch {
			p := newVMPatch(cur.VM)
			if change := ConsumeOnce(cur.VM, cur.VMIUID()); change != nil {
				p.applyBoot(cur.VM, *change)
			}
			return p
		})
		switch {
		case ctx.Err() != nil:
			c.queue.Add(key) // for the next run
		case err != nil && !errors.Is(err, ErrNotFound):
			c.log.Warn("restoring boot order after a one-time override failed", zap.String("vm", key), zap.Error(err))
			c.queue.AddRateLimited(key)
		default:
			c.queue.Forget(key)
		}
		c.queue.Done(key)
		if ctx.Err() != nil {
			return
		}
	}
}

// ToUnstructured converts a typed object through its JSON form, which keeps every number an
// int64 or float64 as unstructured objects require.
func ToUnstructured(obj any) (*unstructured.Unstructured, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	return u, u.UnmarshalJSON(b)
}

// Ping checks that the apiserver answers, with the cheapest request the RBAC allows: a
// one-item list of VMs in a watched namespace.
func (c *Client) Ping(ctx context.Context) error {
	for ns := range c.namespaces {
		_, err := c.dyn.Resource(VMResource).Namespace(ns).List(ctx, metav1.ListOptions{Limit: 1})
		return err
	}
	return nil
}
