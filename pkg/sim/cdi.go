package sim

// The CDI part of the simulator: what cdi-deployment (the DataVolume controllers) and the
// cdi-importer pods do with DataVolumes. Imports really download their URL with net/http, so
// bytes, progress and failures (HTTP status, TLS, truncated bodies, too small volumes) are
// real; the DataVolume reports them in the phases, progress strings and conditions CDI v1.65
// uses. Clones copy nothing but the simulator's byte count annotation.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	virtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
)

// Resources the CDI simulation reads and writes besides kubevirt.DataVolumeResource.
var (
	PVCResource       = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}
	SecretResource    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	ConfigMapResource = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

const (
	// BytesAnnotation on a DataVolume's PVC holds how many bytes the import wrote into it
	// (a clone copies its source's value).
	BytesAnnotation = simAnnotation + "bytes"
	// annImmediateBinding asks CDI to bind WaitForFirstConsumer storage at once; CDI only
	// checks that it is present.
	annImmediateBinding = "cdi.kubevirt.io/storage.bind.immediate.requested"
	// WFFCSuffix marks a storage class name as WaitForFirstConsumer in the simulated cluster,
	// which has no StorageClass objects.
	WFFCSuffix = "-wffc"

	// CDI's default filesystem overhead (CDIConfig status.filesystemOverhead.global) and the
	// 1 MiB alignment it applies to image sizes.
	fsOverhead = 0.06
	alignBlock = 1 << 20

	// Reasons and messages as CDI v1.65 writes them.
	reasonPodRunning      = "Pod is running"
	reasonTransferRunning = "TransferRunning"
	reasonCompleted       = "Completed"
	reasonError           = "Error"
	reasonImagePullFailed = "ImagePullFailed"
	reasonBound           = "Bound"
	reasonPending         = "Pending"
	reasonClaimNotValid   = "ErrClaimNotValid"
	reasonCloneNoSource   = "CloneWithoutSource"
	reasonCloneScheduled  = "CloneScheduled"
	reasonResourceExists  = "ErrResourceExists"
	msgImportComplete     = "Import Complete"
	msgCloneComplete      = "Clone Complete"
)

// CDIOptions tune the CDI simulation. Zero values take the defaults.
type CDIOptions struct {
	// ScheduleDelay is how long an import stays ImportScheduled (the importer pod starting).
	// Default 100ms.
	ScheduleDelay time.Duration
	// CloneDuration is how long a clone stays CloneInProgress. Default 200ms.
	CloneDuration time.Duration
	// RetryBackoff is the wait before the first restart of a failed importer; it doubles on
	// every restart up to 10s (kubelet's CrashLoopBackOff, scaled down). Default 1s.
	RetryBackoff time.Duration
	// MaxRetries is how many restarts a failing import gets before the simulator gives up
	// and marks the DataVolume Failed (real CDI retries for ever). Default 3.
	MaxRetries int
	// ProgressInterval is the least time between two progress updates of one DataVolume.
	// Default 200ms.
	ProgressInterval time.Duration
	// GCInterval is how often the garbage collector rescans besides reacting to deletions.
	// Default 2s.
	GCInterval time.Duration
}

func (o *CDIOptions) defaults() {
	if o.ScheduleDelay == 0 {
		o.ScheduleDelay = 100 * time.Millisecond
	}
	if o.CloneDuration == 0 {
		o.CloneDuration = 200 * time.Millisecond
	}
	if o.RetryBackoff == 0 {
		o.RetryBackoff = time.Second
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = 3
	}
	if o.ProgressInterval == 0 {
		o.ProgressInterval = 200 * time.Millisecond
	}
	if o.GCInterval == 0 {
		o.GCInterval = 2 * time.Second
	}
}

// cdiSim plays CDI's DataVolume controllers and importer pods.
type cdiSim struct {
	s         *Simulator
	opts      CDIOptions
	dvs, pvcs cache.SharedIndexInformer
	queue     workqueue.TypedRateLimitingInterface[string]

	mu sync.Mutex
	// jobs are the running import or clone goroutines, by DataVolume key.
	jobs map[string]*job
	// finished holds, by key, the UID of a DataVolume that reached Succeeded or Failed here
	// (its cached phase may still lag). Keys, not UIDs: the fake clientset assigns no UIDs.
	finished map[string]types.UID
	// fetched counts the body bytes received per URL.
	fetched map[string]int64
}

type job struct {
	uid    types.UID
	cancel context.CancelFunc
}

func newCDI(s *Simulator, f dynamicinformer.DynamicSharedInformerFactory, opts CDIOptions) *cdiSim {
	opts.defaults()
	c := &cdiSim{
		s:        s,
		opts:     opts,
		dvs:      f.ForResource(kubevirt.DataVolumeResource).Informer(),
		pvcs:     f.ForResource(PVCResource).Informer(),
		queue:    workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		jobs:     map[string]*job{},
		finished: map[string]types.UID{},
		fetched:  map[string]int64{},
	}
	_ = c.dvs.SetTransform(typed[cdiv1.DataVolume])
	_ = c.pvcs.SetTransform(typed[corev1.PersistentVolumeClaim])
	_, _ = c.dvs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { c.dvChanged(o, true) },
		UpdateFunc: func(old, o any) {
			// VMIs only care whether it Succeeded.
			was, ok1 := old.(*cdiv1.DataVolume)
			now, ok2 := o.(*cdiv1.DataVolume)
			c.dvChanged(o, ok1 && ok2 && (was.Status.Phase == cdiv1.Succeeded) != (now.Status.Phase == cdiv1.Succeeded))
		},
		DeleteFunc: func(o any) {
			if dv, ok := unwrap(o).(*cdiv1.DataVolume); ok {
				c.mu.Lock()
				delete(c.finished, dv.Namespace+"/"+dv.Name)
				c.mu.Unlock()
			}
			c.dvChanged(o, true)
		},
	})
	_, _ = c.pvcs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.pvcChanged,
		UpdateFunc: func(_, o any) { c.pvcChanged(o) },
		DeleteFunc: c.pvcChanged,
	})
	// A VMI that uses a DataVolume is its first consumer (WaitForFirstConsumer storage).
	_, _ = s.vmis.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.vmiChanged,
		UpdateFunc: func(_, o any) { c.vmiChanged(o) },
	})
	return c
}

func unwrap(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

func (c *cdiSim) dvChanged(obj any, wakeVMIs bool) {
	dv, ok := unwrap(obj).(*cdiv1.DataVolume)
	if !ok {
		return
	}
	c.queue.Add(dv.Namespace + "/" + dv.Name)
	// VMIs waiting for it (Pending ones only), and clones whose source it fills.
	for _, o := range c.s.vmis.GetIndexer().List() {
		vmi := o.(*virtv1.VirtualMachineInstance)
		if wakeVMIs && vmi.Namespace == dv.Namespace && vmi.Status.Phase != virtv1.Running && usesClaim(vmi, dv.Name, true) {
			c.s.queue.Add(vmi.Namespace + "/" + vmi.Name)
		}
	}
	c.enqueueClonesOf(dv.Namespace, dv.Name)
}

func (c *cdiSim) pvcChanged(obj any) {
	pvc, ok := unwrap(obj).(*corev1.PersistentVolumeClaim)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOf(pvc); ref != nil && ref.Kind == "DataVolume" {
		c.queue.Add(pvc.Namespace + "/" + ref.Name)
	}
	c.enqueueClonesOf(pvc.Namespace, pvc.Name)
}

func (c *cdiSim) vmiChanged(obj any) {
	vmi, ok := unwrap(obj).(*virtv1.VirtualMachineInstance)
	if !ok {
		return
	}
	for _, v := range vmi.Spec.Volumes {
		switch {
		case v.DataVolume != nil:
			c.queue.Add(vmi.Namespace + "/" + v.DataVolume.Name)
		case v.PersistentVolumeClaim != nil:
			c.queue.Add(vmi.Namespace + "/" + v.PersistentVolumeClaim.ClaimName)
		}
	}
}

func (c *cdiSim) enqueueClonesOf(ns, name string) {
	for _, o := range c.dvs.GetIndexer().List() {
		dv := o.(*cdiv1.DataVolume)
		if src := cloneSource(dv); src != nil && src.Namespace == ns && src.Name == name {
			c.queue.Add(dv.Namespace + "/" + dv.Name)
		}
	}
}

// cloneSource is the DataVolume's PVC source with the namespace defaulted, or nil.
func cloneSource(dv *cdiv1.DataVolume) *cdiv1.DataVolumeSourcePVC {
	if dv.Spec.Source == nil || dv.Spec.Source.PVC == nil {
		return nil
	}
	src := *dv.Spec.Source.PVC
	if src.Namespace == "" {
		src.Namespace = dv.Namespace
	}
	return &src
}

// usesClaim reports whether a live VMI mounts the claim, through a dataVolume volume or
// (unless dvOnly) a persistentVolumeClaim volume.
func usesClaim(vmi *virtv1.VirtualMachineInstance, name string, dvOnly bool) bool {
	if isFinal(vmi) {
		return false
	}
	for _, v := range vmi.Spec.Volumes {
		if v.DataVolume != nil && v.DataVolume.Name == name {
			return true
		}
		if !dvOnly && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == name {
			return true
		}
	}
	return false
}

func (c *cdiSim) start(ctx context.Context) {
	go c.dvs.Run(ctx.Done())
	go c.pvcs.Run(ctx.Done())
}

func (c *cdiSim) hasSynced() bool { return c.dvs.HasSynced() && c.pvcs.HasSynced() }

func (c *cdiSim) runWorkers(ctx context.Context) {
	go func() { <-ctx.Done(); c.queue.ShutDown() }()
	for i := 0; i < 2; i++ {
		go func() {
			for {
				key, quit := c.queue.Get()
				if quit {
					return
				}
				if err := c.sync(ctx, key); err != nil && ctx.Err() == nil {
					c.queue.AddRateLimited(key)
				} else {
					c.queue.Forget(key)
				}
				c.queue.Done(key)
			}
		}()
	}
}

// BytesFetched is how many body bytes the simulated importers received from url so far,
// failed attempts included.
func (s *Simulator) BytesFetched(url string) int64 {
	s.cdi.mu.Lock()
	defer s.cdi.mu.Unlock()
	return s.cdi.fetched[url]
}

// dataVolumesPending reports whether a VMI has a dataVolume volume whose DataVolume does not
// exist or has not Succeeded: virt-controller does not start such a VMI.
func (s *Simulator) dataVolumesPending(vmi *virtv1.VirtualMachineInstance) bool {
	for _, v := range vmi.Spec.Volumes {
		if v.DataVolume == nil {
			continue
		}
		o, ok, _ := s.cdi.dvs.GetIndexer().GetByKey(vmi.Namespace + "/" + v.DataVolume.Name)
		if !ok || o.(*cdiv1.DataVolume).Status.Phase != cdiv1.Succeeded {
			return true
		}
	}
	return false
}

func (c *cdiSim) getDV(key string) *cdiv1.DataVolume {
	if o, ok, _ := c.dvs.GetIndexer().GetByKey(key); ok {
		return o.(*cdiv1.DataVolume)
	}
	return nil
}

func (c *cdiSim) getPVC(key string) *corev1.PersistentVolumeClaim {
	if o, ok, _ := c.pvcs.GetIndexer().GetByKey(key); ok {
		return o.(*corev1.PersistentVolumeClaim)
	}
	return nil
}

// sync is one pass of the DataVolume controller for key.
func (c *cdiSim) sync(ctx context.Context, key string) error {
	dv := c.getDV(key)
	c.mu.Lock()
	if j := c.jobs[key]; j != nil && (dv == nil || dv.UID != j.uid || dv.DeletionTimestamp != nil) {
		// The DataVolume went away (or was replaced): its importer pod goes with it.
		j.cancel()
		delete(c.jobs, key)
	}
	if uid, ok := c.finished[key]; ok && (dv == nil || dv.UID != uid) {
		delete(c.finished, key)
	}
	_, done := c.finished[key]
	busy := dv != nil && (c.jobs[key] != nil || done)
	c.mu.Unlock()
	if dv == nil || busy || dv.DeletionTimestamp != nil ||
		dv.Status.Phase == cdiv1.Succeeded || dv.Status.Phase == cdiv1.Failed || dv.Spec.Source == nil {
		return nil
	}
	switch {
	case dv.Spec.Source.HTTP != nil:
		return c.syncImport(ctx, dv)
	case dv.Spec.Source.PVC != nil:
		return c.syncClone(ctx, dv)
	case dv.Spec.Source.Blank != nil:
		return c.syncBlank(ctx, dv)
	}
	return nil
}

// ---- status ----

// setCondition updates one condition the way CDI does: the transition time moves when the
// status changes, the heartbeat when the reason or message changes.
func setCondition(conds []cdiv1.DataVolumeCondition, t cdiv1.DataVolumeConditionType, status corev1.ConditionStatus, message, reason string) []cdiv1.DataVolumeCondition {
	i := -1
	for k := range conds {
		if conds[k].Type == t {
			i = k
		}
	}
	if i < 0 {
		conds = append(conds, cdiv1.DataVolumeCondition{Type: t})
		i = len(conds) - 1
	}
	cd := &conds[i]
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	switch {
	case cd.Status != status:
		cd.LastTransitionTime, cd.LastHeartbeatTime = now, now
		cd.Message, cd.Reason = message, reason
	case cd.Message != message || cd.Reason != reason:
		cd.LastHeartbeatTime = now
		cd.Message, cd.Reason = message, reason
	}
	cd.Status = status
	return conds
}

// conds sets the three DataVolume conditions at once (Bound, Ready, Running), in CDI's order.
type condSpec struct {
	status          corev1.ConditionStatus
	message, reason string
}

func setConditions(st *cdiv1.DataVolumeStatus, bound, ready, running condSpec) {
	c := append([]cdiv1.DataVolumeCondition(nil), st.Conditions...)
	c = setCondition(c, cdiv1.DataVolumeBound, bound.status, bound.message, bound.reason)
	c = setCondition(c, cdiv1.DataVolumeReady, ready.status, ready.message, ready.reason)
	c = setCondition(c, cdiv1.DataVolumeRunning, running.status, running.message, running.reason)
	st.Conditions = c
}

func boundTrue(claim string) condSpec {
	return condSpec{corev1.ConditionTrue, fmt.Sprintf("PVC %s Bound", claim), reasonBound}
}

var notReady = condSpec{status: corev1.ConditionFalse}

// patchStatus writes the whole DataVolume status through the status subresource.
func (c *cdiSim) patchStatus(ctx context.Context, dv *cdiv1.DataVolume, st *cdiv1.DataVolumeStatus) error {
	body, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		return err
	}
	_, err = c.s.dyn.Resource(kubevirt.DataVolumeResource).Namespace(dv.Namespace).Patch(ctx, dv.Name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	return err
}

// setStatus patches the status computed by change from the cached one, if it changed.
func (c *cdiSim) setStatus(ctx context.Context, dv *cdiv1.DataVolume, change func(st *cdiv1.DataVolumeStatus)) error {
	st := dv.Status.DeepCopy()
	change(st)
	if equality.Semantic.DeepEqual(*st, dv.Status) {
		return nil
	}
	return ignoreNotFound(c.patchStatus(ctx, dv, st))
}

// ---- PVCs ----

// claimSpec renders the PVC spec of a DataVolume like CDI's renderPvcSpec: spec.pvc as
// given; spec.storage with ReadWriteOnce when no access mode is set (a StorageProfile's
// usual answer) and, for Filesystem volumes, the size inflated by the filesystem overhead.
// Clones without a size take the source's.
func claimSpec(dv *cdiv1.DataVolume, source *corev1.PersistentVolumeClaim) (corev1.PersistentVolumeClaimSpec, error) {
	var spec corev1.PersistentVolumeClaimSpec
	storageAPI := false
	switch {
	case dv.Spec.PVC != nil:
		spec = *dv.Spec.PVC.DeepCopy()
	case dv.Spec.Storage != nil:
		st := dv.Spec.Storage.DeepCopy()
		storageAPI = true
		spec = corev1.PersistentVolumeClaimSpec{
			AccessModes: st.AccessModes, Selector: st.Selector, Resources: st.Resources,
			VolumeName: st.VolumeName, StorageClassName: st.StorageClassName,
			VolumeMode: st.VolumeMode, DataSource: st.DataSource,
		}
	default:
		return spec, errors.New("missing storage/pvc spec in DataVolume")
	}
	if len(spec.AccessModes) == 0 {
		spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	size, ok := spec.Resources.Requests[corev1.ResourceStorage]
	switch {
	case !ok && source != nil:
		size = source.Spec.Resources.Requests[corev1.ResourceStorage]
		storageAPI = false // already inflated when the source was created
	case !ok:
		return spec, errors.New("PVC Spec is not valid - missing storage size")
	case size.Value() < alignBlock:
		return spec, errors.New("PVC Spec is not valid - storage size should be at least 1MiB")
	}
	if storageAPI && (spec.VolumeMode == nil || *spec.VolumeMode == corev1.PersistentVolumeFilesystem) {
		size = *resource.NewQuantity(int64(math.Ceil(float64(roundUp(size.Value(), alignBlock))*(1+fsOverhead))), resource.BinarySI)
	}
	if spec.Resources.Requests == nil {
		spec.Resources.Requests = corev1.ResourceList{}
	}
	spec.Resources.Requests[corev1.ResourceStorage] = size
	return spec, nil
}

func roundUp(v, to int64) int64 { return (v + to - 1) / to * to }

// usableBytes is how large an image fits in the claim: the filesystem overhead taken off for
// Filesystem volumes, rounded down to CDI's alignment.
func usableBytes(pvc *corev1.PersistentVolumeClaim) int64 {
	q, ok := pvc.Status.Capacity[corev1.ResourceStorage]
	if !ok {
		q = pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	}
	if m := pvc.Spec.VolumeMode; m != nil && *m == corev1.PersistentVolumeBlock {
		return q.Value()
	}
	v := int64(math.Ceil(float64(q.Value()) / (1 + fsOverhead)))
	return v / alignBlock * alignBlock
}

// isWFFC is the simulated cluster's storage class rule: a class name ending in -wffc binds on
// first consumer.
func isWFFC(spec corev1.PersistentVolumeClaimSpec) bool {
	return spec.StorageClassName != nil && strings.HasSuffix(*spec.StorageClassName, WFFCSuffix)
}

// waitsForConsumer: WaitForFirstConsumer storage, no immediate-binding request, and no live
// VMI in the namespace uses the DataVolume yet.
func (c *cdiSim) waitsForConsumer(dv *cdiv1.DataVolume, spec corev1.PersistentVolumeClaimSpec) bool {
	if !isWFFC(spec) {
		return false
	}
	if _, ok := dv.Annotations[annImmediateBinding]; ok {
		return false
	}
	for _, o := range c.s.vmis.GetIndexer().List() {
		vmi := o.(*virtv1.VirtualMachineInstance)
		if vmi.Namespace == dv.Namespace && usesClaim(vmi, dv.Name, false) {
			return false
		}
	}
	return true
}

// ensureClaim returns the DataVolume's PVC, creating it (Bound, or Pending when bound is
// false) if needed, and binds a Pending one when bound is true. A PVC of that name the
// DataVolume does not control is reported as nil with ok false.
func (c *cdiSim) ensureClaim(ctx context.Context, dv *cdiv1.DataVolume, spec corev1.PersistentVolumeClaimSpec, annotations map[string]string, bound bool) (pvc *corev1.PersistentVolumeClaim, ok bool, err error) {
	pvc = c.getPVC(dv.Namespace + "/" + dv.Name)
	if pvc == nil {
		pvc, err = c.createClaim(ctx, dv, spec, annotations)
		if apierrors.IsAlreadyExists(err) {
			// Not in the cache yet (or someone else's): read it.
			pvc, err = c.readClaim(ctx, dv.Namespace, dv.Name)
		}
		if err != nil {
			return nil, false, err
		}
	}
	if ref := metav1.GetControllerOf(pvc); ref == nil || ref.UID != dv.UID {
		return nil, false, nil
	}
	if bound && pvc.Status.Phase != corev1.ClaimBound {
		if pvc, err = c.bindClaim(ctx, pvc); err != nil {
			return nil, false, err
		}
	}
	return pvc, true, nil
}

func (c *cdiSim) readClaim(ctx context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	u, err := c.s.dyn.Resource(PVCResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	o, err := typed[corev1.PersistentVolumeClaim](u)
	if err != nil {
		return nil, err
	}
	return o.(*corev1.PersistentVolumeClaim), nil
}

func (c *cdiSim) createClaim(ctx context.Context, dv *cdiv1.DataVolume, spec corev1.PersistentVolumeClaimSpec, annotations map[string]string) (*corev1.PersistentVolumeClaim, error) {
	anns := map[string]string{}
	for k, v := range dv.Annotations {
		anns[k] = v
	}
	for k, v := range annotations {
		anns[k] = v
	}
	anns["cdi.kubevirt.io/createdForDataVolume"] = string(dv.UID)
	labels := map[string]string{
		"app":                          "containerized-data-importer",
		"app.kubernetes.io/component":  "storage",
		"app.kubernetes.io/managed-by": "cdi-controller",
	}
	for k, v := range dv.Labels {
		labels[k] = v
	}
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{
			Name: dv.Name, Namespace: dv.Namespace, Labels: labels, Annotations: anns,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(dv,
				cdiv1.SchemeGroupVersion.WithKind("DataVolume"))},
		},
		Spec: spec,
	}
	u, err := ToUnstructured(pvc)
	if err != nil {
		return nil, err
	}
	out, err := c.s.dyn.Resource(PVCResource).Namespace(dv.Namespace).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	o, err := typed[corev1.PersistentVolumeClaim](out)
	if err != nil {
		return nil, err
	}
	created := o.(*corev1.PersistentVolumeClaim)
	// The apiserver ignores status on create; claims start Pending.
	if created.Status.Phase == "" {
		created, err = c.patchClaimStatus(ctx, created, map[string]any{"phase": string(corev1.ClaimPending)})
	}
	return created, err
}

// bindClaim plays the PV controller: the claim gets its capacity and access modes, Bound.
func (c *cdiSim) bindClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	return c.patchClaimStatus(ctx, pvc, map[string]any{
		"phase":       string(corev1.ClaimBound),
		"accessModes": pvc.Spec.AccessModes,
		"capacity":    map[string]any{"storage": pvc.Spec.Resources.Requests.Storage().String()},
	})
}

func (c *cdiSim) patchClaimStatus(ctx context.Context, pvc *corev1.PersistentVolumeClaim, status map[string]any) (*corev1.PersistentVolumeClaim, error) {
	body, _ := json.Marshal(map[string]any{"status": status})
	out, err := c.s.dyn.Resource(PVCResource).Namespace(pvc.Namespace).Patch(ctx, pvc.Name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, err
	}
	o, err := typed[corev1.PersistentVolumeClaim](out)
	if err != nil {
		return nil, err
	}
	return o.(*corev1.PersistentVolumeClaim), nil
}

func (c *cdiSim) annotateClaim(ctx context.Context, ns, name string, anns map[string]string) error {
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": anns}})
	_, err := c.s.dyn.Resource(PVCResource).Namespace(ns).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
	return err
}

// claimProblem reports, with no PVC yet, why (renderPvcSpec failures, a foreign PVC in the
// way) in CDI's terms: phase unchanged, Bound and Ready False with the reason.
func (c *cdiSim) claimProblem(ctx context.Context, dv *cdiv1.DataVolume, reason, message string) error {
	return c.setStatus(ctx, dv, func(st *cdiv1.DataVolumeStatus) {
		if st.Progress == "" {
			st.Progress = "N/A"
		}
		setConditions(st, condSpec{corev1.ConditionFalse, message, reason}, condSpec{corev1.ConditionFalse, message, reason}, notReady)
	})
}

// waitForConsumer reports a DataVolume whose PVC waits for its first consumer.
func (c *cdiSim) waitForConsumer(ctx context.Context, dv *cdiv1.DataVolume, pvc *corev1.PersistentVolumeClaim) error {
	return c.setStatus(ctx, dv, func(st *cdiv1.DataVolumeStatus) {
		st.Phase = cdiv1.WaitForFirstConsumer
		st.ClaimName = pvc.Name
		if st.Progress == "" {
			st.Progress = "N/A"
		}
		setConditions(st, condSpec{corev1.ConditionFalse, fmt.Sprintf("PVC %s Pending", pvc.Name), reasonPending}, notReady, notReady)
	})
}

// startJob runs fn for the DataVolume unless a job already runs for it.
func (c *cdiSim) startJob(ctx context.Context, dv *cdiv1.DataVolume, fn func(ctx context.Context) (terminal bool)) {
	key := dv.Namespace + "/" + dv.Name
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.jobs[key] != nil {
		return
	}
	jctx, cancel := context.WithCancel(ctx)
	j := &job{uid: dv.UID, cancel: cancel}
	c.jobs[key] = j
	go func() {
		defer cancel()
		terminal := fn(jctx)
		c.mu.Lock()
		if c.jobs[key] == j {
			delete(c.jobs, key)
		}
		if terminal && jctx.Err() == nil {
			c.finished[key] = dv.UID
		}
		c.mu.Unlock()
		// Look again: the DataVolume may have changed while the job ran.
		c.queue.Add(key)
	}()
}

// sleep waits d unless ctx ends first; it reports whether the full time passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// publish writes a job's status, retrying briefly; it reports false when the DataVolume is
// gone or the job was cancelled.
func (c *cdiSim) publish(ctx context.Context, dv *cdiv1.DataVolume, st *cdiv1.DataVolumeStatus) bool {
	for i := 0; ; i++ {
		err := c.patchStatus(ctx, dv, st)
		if err == nil {
			return true
		}
		if apierrors.IsNotFound(err) || ctx.Err() != nil || i == 5 {
			return ctx.Err() == nil && !apierrors.IsNotFound(err)
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return false
		}
	}
}

// ---- import ----

func (c *cdiSim) syncImport(ctx context.Context, dv *cdiv1.DataVolume) error {
	spec, err := claimSpec(dv, nil)
	if err != nil {
		return c.claimProblem(ctx, dv, reasonClaimNotValid, err.Error())
	}
	wait := c.waitsForConsumer(dv, spec)
	pvc, ok, err := c.ensureClaim(ctx, dv, spec, map[string]string{
		"cdi.kubevirt.io/storage.import.endpoint": dv.Spec.Source.HTTP.URL,
		"cdi.kubevirt.io/storage.import.source":   "http",
		"cdi.kubevirt.io/storage.contentType":     string(contentType(dv)),
	}, !wait)
	if err != nil {
		return err
	}
	if !ok {
		return c.claimProblem(ctx, dv, reasonResourceExists, fmt.Sprintf("Resource %q already exists and is not managed by DataVolume", dv.Name))
	}
	if wait {
		return c.waitForConsumer(ctx, dv, pvc)
	}
	c.startJob(ctx, dv, func(ctx context.Context) bool { return c.runImport(ctx, dv, pvc) })
	return nil
}

func contentType(dv *cdiv1.DataVolume) cdiv1.DataVolumeContentType {
	if dv.Spec.ContentType == "" {
		return cdiv1.DataVolumeKubeVirt
	}
	return dv.Spec.ContentType
}

// importError is how a failed importer run shows on the Running condition.
type importError struct{ reason, message string }

// runImport plays the importer pod, restarts included; it reports whether the DataVolume
// reached a final phase.
func (c *cdiSim) runImport(ctx context.Context, dv *cdiv1.DataVolume, pvc *corev1.PersistentVolumeClaim) bool {
	st := dv.Status.DeepCopy()
	st.ClaimName = pvc.Name
	if st.Progress == "" {
		st.Progress = "N/A"
	}
	bound := boundTrue(pvc.Name)
	if st.Phase != cdiv1.ImportInProgress {
		st.Phase = cdiv1.ImportScheduled
		setConditions(st, bound, notReady, notReady)
		if !c.publish(ctx, dv, st) || !sleep(ctx, c.opts.ScheduleDelay) {
			return false
		}
	}
	attempt := int(st.RestartCount)
	src := dv.Spec.Source.HTTP
	for {
		cfg, waiting := c.importerConfig(ctx, dv.Namespace, src)
		if waiting != nil {
			// The pod cannot start (missing Secret or ConfigMap): kubelet keeps trying.
			st.Phase = cdiv1.ImportScheduled
			setConditions(st, bound, notReady, condSpec{corev1.ConditionFalse, waiting.message, waiting.reason})
			if !c.publish(ctx, dv, st) || !sleep(ctx, c.opts.RetryBackoff) {
				return false
			}
			continue
		}
		st.Phase = cdiv1.ImportInProgress
		st.RestartCount = int32(attempt)
		setConditions(st, bound, condSpec{corev1.ConditionFalse, "", reasonTransferRunning}, condSpec{corev1.ConditionTrue, "", reasonPodRunning})
		if !c.publish(ctx, dv, st) {
			return false
		}
		var last time.Time
		n, ierr := c.download(ctx, src, cfg, func(read, total int64) {
			if total <= 0 || time.Since(last) < c.opts.ProgressInterval {
				return
			}
			last = time.Now()
			st.Progress = cdiv1.DataVolumeProgress(fmt.Sprintf("%.2f%%", float64(read)*100/float64(total)))
			c.publish(ctx, dv, st)
		})
		if ctx.Err() != nil {
			return false
		}
		if ierr == nil && n > usableBytes(pvc) {
			// qemu-img's validation against the available space, as CDI simplifies it.
			ierr = &importError{reasonError, "DataVolume too small to contain image"}
		}
		if ierr == nil {
			if err := c.annotateClaim(ctx, pvc.Namespace, pvc.Name, map[string]string{
				BytesAnnotation:                     strconv.FormatInt(n, 10),
				"cdi.kubevirt.io/storage.pod.phase": string(corev1.PodSucceeded),
			}); err != nil && !apierrors.IsNotFound(err) {
				ierr = &importError{reasonError, err.Error()}
			}
		}
		if ierr == nil {
			st.Phase = cdiv1.Succeeded
			st.Progress = "100.0%"
			setConditions(st, bound, condSpec{status: corev1.ConditionTrue}, condSpec{corev1.ConditionFalse, msgImportComplete, reasonCompleted})
			return c.publish(ctx, dv, st)
		}
		setConditions(st, bound, notReady, condSpec{corev1.ConditionFalse, ierr.message, ierr.reason})
		if attempt >= c.opts.MaxRetries {
			st.Phase = cdiv1.Failed
			return c.publish(ctx, dv, st)
		}
		if !c.publish(ctx, dv, st) || !sleep(ctx, backoff(c.opts.RetryBackoff, attempt)) {
			return false
		}
		attempt++
	}
}

func backoff(base time.Duration, attempt int) time.Duration {
	d := base
	for i := 0; i < attempt && d < 10*time.Second; i++ {
		d *= 2
	}
	return min(d, max(base, 10*time.Second))
}

// importerConfig is what the importer pod gets from the Secret and ConfigMap the source
// names. A missing one keeps the pod from starting, reported as kubelet does.
type importerCfg struct {
	user, pass string
	roots      *x509.CertPool
	headers    []string
}

func (c *cdiSim) importerConfig(ctx context.Context, ns string, src *cdiv1.DataVolumeSourceHTTP) (importerCfg, *importError) {
	cfg := importerCfg{headers: src.ExtraHeaders}
	if src.SecretRef != "" {
		u, err := c.s.dyn.Resource(SecretResource).Namespace(ns).Get(ctx, src.SecretRef, metav1.GetOptions{})
		if err != nil {
			return cfg, &importError{"CreateContainerConfigError", fmt.Sprintf("secret %q not found", src.SecretRef)}
		}
		o, err := typed[corev1.Secret](u)
		if err != nil {
			return cfg, &importError{"CreateContainerConfigError", err.Error()}
		}
		sec := o.(*corev1.Secret)
		val := func(k string) (string, bool) {
			if v, ok := sec.Data[k]; ok {
				return string(v), true
			}
			v, ok := sec.StringData[k] // only the fake clientset keeps stringData
			return v, ok
		}
		var ok bool
		if cfg.user, ok = val("accessKeyId"); !ok {
			return cfg, &importError{"CreateContainerConfigError", fmt.Sprintf("couldn't find key accessKeyId in Secret %s/%s", ns, src.SecretRef)}
		}
		if cfg.pass, ok = val("secretKey"); !ok {
			return cfg, &importError{"CreateContainerConfigError", fmt.Sprintf("couldn't find key secretKey in Secret %s/%s", ns, src.SecretRef)}
		}
	}
	if src.CertConfigMap != "" {
		u, err := c.s.dyn.Resource(ConfigMapResource).Namespace(ns).Get(ctx, src.CertConfigMap, metav1.GetOptions{})
		if err != nil {
			// The pod's ConfigMap volume cannot mount: it stays ContainerCreating.
			return cfg, &importError{"ContainerCreating", ""}
		}
		o, err := typed[corev1.ConfigMap](u)
		if err != nil {
			return cfg, &importError{"ContainerCreating", ""}
		}
		cm := o.(*corev1.ConfigMap)
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		// Every key is a file in the importer's cert directory; all of them are read.
		for _, v := range cm.Data {
			pool.AppendCertsFromPEM([]byte(v))
		}
		for _, v := range cm.BinaryData {
			pool.AppendCertsFromPEM(v)
		}
		cfg.roots = pool
	}
	return cfg, nil
}

// download fetches the URL as CDI's HTTP data source does (a HEAD for the size, then a GET,
// Basic auth from the Secret, the CA bundle on top of the system roots), counting the bytes,
// and returns the error as the importer's termination message shows it.
func (c *cdiSim) download(ctx context.Context, src *cdiv1.DataVolumeSourceHTTP, cfg importerCfg, progress func(read, total int64)) (int64, *importError) {
	connectErr := func(msg string) *importError {
		return &importError{reasonError, "Unable to connect to http data source: " + msg}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.roots != nil {
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: cfg.roots}
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	prepare := func(r *http.Request) {
		if cfg.user != "" && cfg.pass != "" {
			r.SetBasicAuth(cfg.user, cfg.pass)
		}
		for _, h := range cfg.headers {
			if k, v, ok := strings.Cut(h, ":"); ok {
				r.Header.Add(k, v)
			}
		}
		r.Header.Set("User-Agent", "cdi-golang-importer")
	}
	// Redirects lose Basic auth; CDI sets it again.
	client.CheckRedirect = func(r *http.Request, _ []*http.Request) error { prepare(r); return nil }

	var total int64
	if req, err := http.NewRequestWithContext(ctx, http.MethodHead, src.URL, nil); err == nil {
		prepare(req)
		if resp, err := client.Do(req); err == nil {
			if resp.StatusCode == http.StatusOK {
				total, _ = strconv.ParseInt(resp.Header.Get("Content-Length"), 10, 64)
			}
			resp.Body.Close()
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src.URL, nil)
	if err != nil {
		return 0, connectErr(fmt.Sprintf("unable to parse endpoint %q: %v", src.URL, err))
	}
	prepare(req)
	resp, err := client.Do(req)
	if err != nil {
		return 0, connectErr("HTTP request errored: " + err.Error())
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, connectErr(fmt.Sprintf("expected status code 200, got %d. Status: %s", resp.StatusCode, resp.Status))
	}
	if total == 0 && resp.ContentLength > 0 {
		total = resp.ContentLength
	}
	var read int64
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			read += int64(n)
			c.mu.Lock()
			c.fetched[src.URL] += int64(n)
			c.mu.Unlock()
			progress(read, total)
		}
		if errors.Is(err, io.EOF) {
			return read, nil
		}
		if err != nil {
			// Without range support CDI streams into scratch space first; a broken stream
			// surfaces as an image pull failure.
			return read, &importError{reasonImagePullFailed,
				"Unable to process data: Unable to transfer source data to scratch space: failed to pull image: " + err.Error()}
		}
	}
}

// ---- clone ----

func (c *cdiSim) syncClone(ctx context.Context, dv *cdiv1.DataVolume) error {
	src := cloneSource(dv)
	key := dv.Namespace + "/" + dv.Name
	source := c.getPVC(src.Namespace + "/" + src.Name)
	if source == nil {
		c.queue.AddAfter(key, time.Second)
		return c.claimProblem(ctx, dv, reasonCloneNoSource, fmt.Sprintf("The source pvc %s doesn't exist", src.Name))
	}
	spec, err := claimSpec(dv, source)
	if err != nil {
		return c.claimProblem(ctx, dv, reasonClaimNotValid, err.Error())
	}
	if !c.populated(source) {
		// Also woken by the source DataVolume's updates.
		c.queue.AddAfter(key, time.Second)
		msg := fmt.Sprintf("Cloning from %s/%s into %s/%s scheduled", src.Namespace, src.Name, dv.Namespace, dv.Name)
		return c.setStatus(ctx, dv, func(st *cdiv1.DataVolumeStatus) {
			st.Phase = cdiv1.CloneScheduled
			if st.Progress == "" {
				st.Progress = "N/A"
			}
			setConditions(st, condSpec{corev1.ConditionFalse, msg, reasonCloneScheduled}, condSpec{corev1.ConditionFalse, msg, reasonCloneScheduled}, notReady)
		})
	}
	wait := c.waitsForConsumer(dv, spec)
	anns := map[string]string{"k8s.io/CloneRequest": src.Namespace + "/" + src.Name}
	pvc, ok, err := c.ensureClaim(ctx, dv, spec, anns, !wait)
	if err != nil {
		return err
	}
	if !ok {
		return c.claimProblem(ctx, dv, reasonResourceExists, fmt.Sprintf("Resource %q already exists and is not managed by DataVolume", dv.Name))
	}
	if wait {
		return c.waitForConsumer(ctx, dv, pvc)
	}
	c.startJob(ctx, dv, func(ctx context.Context) bool { return c.runClone(ctx, dv, pvc, source) })
	return nil
}

// populated is CDI's IsPopulated: a PVC a DataVolume controls is ready once that DataVolume
// Succeeded; any other PVC is.
func (c *cdiSim) populated(pvc *corev1.PersistentVolumeClaim) bool {
	ref := metav1.GetControllerOf(pvc)
	if ref == nil || ref.Kind != "DataVolume" {
		return true
	}
	owner := c.getDV(pvc.Namespace + "/" + ref.Name)
	return owner != nil && owner.Status.Phase == cdiv1.Succeeded
}

func (c *cdiSim) runClone(ctx context.Context, dv *cdiv1.DataVolume, pvc, source *corev1.PersistentVolumeClaim) bool {
	st := dv.Status.DeepCopy()
	st.ClaimName = pvc.Name
	st.Phase = cdiv1.CloneInProgress
	st.Progress = "N/A"
	bound := boundTrue(pvc.Name)
	setConditions(st, bound, condSpec{corev1.ConditionFalse, "", reasonTransferRunning}, condSpec{corev1.ConditionTrue, "", reasonPodRunning})
	if !c.publish(ctx, dv, st) || !sleep(ctx, c.opts.CloneDuration) {
		return false
	}
	// The PVC cache may not have the source's last annotation yet: read it.
	if fresh, err := c.readClaim(ctx, source.Namespace, source.Name); err == nil {
		source = fresh
	}
	anns := map[string]string{"cdi.kubevirt.io/storage.pod.phase": string(corev1.PodSucceeded)}
	if b, ok := source.Annotations[BytesAnnotation]; ok {
		anns[BytesAnnotation] = b
	}
	if err := c.annotateClaim(ctx, pvc.Namespace, pvc.Name, anns); err != nil {
		return false
	}
	st.Phase = cdiv1.Succeeded
	st.Progress = "100.0%"
	setConditions(st, bound, condSpec{status: corev1.ConditionTrue}, condSpec{corev1.ConditionFalse, msgCloneComplete, reasonCompleted})
	return c.publish(ctx, dv, st)
}

// ---- blank ----

func (c *cdiSim) syncBlank(ctx context.Context, dv *cdiv1.DataVolume) error {
	spec, err := claimSpec(dv, nil)
	if err != nil {
		return c.claimProblem(ctx, dv, reasonClaimNotValid, err.Error())
	}
	wait := c.waitsForConsumer(dv, spec)
	pvc, ok, err := c.ensureClaim(ctx, dv, spec, map[string]string{"cdi.kubevirt.io/storage.import.source": "none"}, !wait)
	if err != nil {
		return err
	}
	if !ok {
		return c.claimProblem(ctx, dv, reasonResourceExists, fmt.Sprintf("Resource %q already exists and is not managed by DataVolume", dv.Name))
	}
	if wait {
		return c.waitForConsumer(ctx, dv, pvc)
	}
	if err := c.annotateClaim(ctx, pvc.Namespace, pvc.Name, map[string]string{BytesAnnotation: "0"}); err != nil {
		return ignoreNotFound(err)
	}
	c.mu.Lock()
	c.finished[dv.Namespace+"/"+dv.Name] = dv.UID
	c.mu.Unlock()
	return c.setStatus(ctx, dv, func(st *cdiv1.DataVolumeStatus) {
		st.Phase, st.ClaimName, st.Progress = cdiv1.Succeeded, pvc.Name, "100.0%"
		setConditions(st, boundTrue(pvc.Name), condSpec{status: corev1.ConditionTrue}, condSpec{corev1.ConditionFalse, msgImportComplete, reasonCompleted})
	})
}
