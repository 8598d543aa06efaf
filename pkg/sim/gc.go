package sim

// The garbage collector part of the simulator. The test cluster runs kube-apiserver alone,
// without kube-controller-manager, so nothing would ever delete the dependents of a deleted
// owner, finish a foreground or orphan deletion, or release a PVC's protection finalizer. This
// does it for the kinds the simulator knows (VirtualMachine, VirtualMachineInstance,
// DataVolume, PersistentVolumeClaim) following the same rules:
//   - an object whose owners are all gone is deleted (background propagation);
//   - an owner deleted in the foreground keeps its foregroundDeletion finalizer until its
//     blocking dependents are gone, which are deleted in the foreground too;
//   - an owner deleted with the orphan policy has its dependents' references to it removed;
//   - a deleted PVC keeps kubernetes.io/pvc-protection while a live VMI mounts it.

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
)

const (
	finalizerForeground    = metav1.FinalizerDeleteDependents // "foregroundDeletion"
	finalizerOrphan        = metav1.FinalizerOrphanDependents // "orphan"
	finalizerPVCProtection = "kubernetes.io/pvc-protection"
)

type gcSim struct {
	s        *Simulator
	interval time.Duration
	kick     chan struct{}
	kinds    []gcKind
}

// gcKind is one kind the collector watches: its cache and where to write.
type gcKind struct {
	group, kind string
	gvr         schema.GroupVersionResource
	inf         cache.SharedIndexInformer
}

func newGC(s *Simulator, interval time.Duration) *gcSim {
	g := &gcSim{s: s, interval: interval, kick: make(chan struct{}, 1)}
	g.kinds = []gcKind{
		{"kubevirt.io", "VirtualMachine", kubevirt.VMResource, s.vms},
		{"kubevirt.io", "VirtualMachineInstance", kubevirt.VMIResource, s.vmis},
		{"cdi.kubevirt.io", "DataVolume", kubevirt.DataVolumeResource, s.cdi.dvs},
		{"", "PersistentVolumeClaim", PVCResource, s.cdi.pvcs},
	}
	h := cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, o any) {
			if m, ok := o.(metav1.Object); ok && m.GetDeletionTimestamp() != nil {
				g.trigger()
			}
		},
		DeleteFunc: func(any) { g.trigger() },
	}
	for _, k := range g.kinds {
		_, _ = k.inf.AddEventHandler(h)
	}
	return g
}

func (g *gcSim) trigger() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

func (g *gcSim) run(ctx context.Context) {
	t := time.NewTicker(g.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.kick:
		case <-t.C:
		}
		g.scan(ctx)
	}
}

type gcObject struct {
	kind *gcKind
	obj  metav1.Object
}

func (g *gcSim) objects() []gcObject {
	var out []gcObject
	for i := range g.kinds {
		k := &g.kinds[i]
		for _, o := range k.inf.GetIndexer().List() {
			if m, ok := o.(metav1.Object); ok {
				out = append(out, gcObject{k, m})
			}
		}
	}
	return out
}

// scan is one pass over everything cached.
func (g *gcSim) scan(ctx context.Context) {
	all := g.objects()
	for _, o := range all {
		if ctx.Err() != nil {
			return
		}
		m := o.obj
		if m.GetDeletionTimestamp() == nil {
			if len(m.GetOwnerReferences()) > 0 && g.allOwnersGone(ctx, m) {
				g.delete(ctx, o, metav1.DeletePropagationBackground)
			}
			continue
		}
		fins := m.GetFinalizers()
		if slices.Contains(fins, finalizerOrphan) {
			g.orphanDependents(ctx, o, all)
		}
		if slices.Contains(fins, finalizerForeground) {
			g.deleteDependents(ctx, o, all)
		}
		if pvc, ok := m.(*corev1.PersistentVolumeClaim); ok && slices.Contains(fins, finalizerPVCProtection) && !g.claimInUse(pvc) {
			g.removeFinalizer(ctx, o, finalizerPVCProtection)
		}
	}
}

func (g *gcSim) kindOf(ref metav1.OwnerReference) *gcKind {
	group, _, _ := strings.Cut(ref.APIVersion, "/")
	if !strings.Contains(ref.APIVersion, "/") {
		group = "" // "v1"
	}
	for i := range g.kinds {
		if g.kinds[i].kind == ref.Kind && g.kinds[i].group == group {
			return &g.kinds[i]
		}
	}
	return nil
}

// allOwnersGone is true when every owner reference points to an object that no longer exists
// (or exists with another UID). Owners of kinds it does not know count as present. The cache
// answers "present"; "gone" is confirmed against the apiserver, as the real collector does.
func (g *gcSim) allOwnersGone(ctx context.Context, m metav1.Object) bool {
	for _, ref := range m.GetOwnerReferences() {
		k := g.kindOf(ref)
		if k == nil {
			return false
		}
		if o, ok, _ := k.inf.GetIndexer().GetByKey(m.GetNamespace() + "/" + ref.Name); ok && o.(metav1.Object).GetUID() == ref.UID {
			return false
		}
		u, err := g.s.dyn.Resource(k.gvr).Namespace(m.GetNamespace()).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return false
		case u.GetUID() == ref.UID:
			return false
		}
	}
	return true
}

func (g *gcSim) delete(ctx context.Context, o gcObject, policy metav1.DeletionPropagation) {
	uid := o.obj.GetUID()
	_ = g.s.dyn.Resource(o.kind.gvr).Namespace(o.obj.GetNamespace()).Delete(ctx, o.obj.GetName(),
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &policy})
}

func ownedBy(m metav1.Object, owner types.UID) (metav1.OwnerReference, bool) {
	for _, ref := range m.GetOwnerReferences() {
		if ref.UID == owner {
			return ref, true
		}
	}
	return metav1.OwnerReference{}, false
}

// deleteDependents finishes a foreground deletion: dependents are deleted (in the foreground
// too), and the owner's finalizer goes once no dependent blocks it any more.
func (g *gcSim) deleteDependents(ctx context.Context, owner gcObject, all []gcObject) {
	blocked := false
	for _, d := range all {
		if d.obj.GetNamespace() != owner.obj.GetNamespace() {
			continue
		}
		ref, ok := ownedBy(d.obj, owner.obj.GetUID())
		if !ok {
			continue
		}
		if d.obj.GetDeletionTimestamp() == nil {
			g.delete(ctx, d, metav1.DeletePropagationForeground)
		}
		if ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion {
			blocked = true
		}
	}
	if !blocked {
		g.removeFinalizer(ctx, owner, finalizerForeground)
	}
}

// orphanDependents finishes an orphan deletion: the dependents lose their reference to the
// owner, then the owner its finalizer.
func (g *gcSim) orphanDependents(ctx context.Context, owner gcObject, all []gcObject) {
	for _, d := range all {
		if d.obj.GetNamespace() != owner.obj.GetNamespace() {
			continue
		}
		refs := d.obj.GetOwnerReferences()
		if _, ok := ownedBy(d.obj, owner.obj.GetUID()); !ok {
			continue
		}
		keep := slices.DeleteFunc(slices.Clone(refs), func(r metav1.OwnerReference) bool { return r.UID == owner.obj.GetUID() })
		if g.testAndReplace(ctx, d, "/metadata/ownerReferences", refs, keep) != nil {
			return // try again on the next scan
		}
	}
	g.removeFinalizer(ctx, owner, finalizerOrphan)
}

// claimInUse: a live VMI (its virt-launcher pod) mounts the claim.
func (g *gcSim) claimInUse(pvc *corev1.PersistentVolumeClaim) bool {
	for _, o := range g.s.vmis.GetIndexer().List() {
		vmi := o.(*virtv1.VirtualMachineInstance)
		if vmi.Namespace == pvc.Namespace && usesClaim(vmi, pvc.Name, false) {
			return true
		}
	}
	return false
}

func (g *gcSim) removeFinalizer(ctx context.Context, o gcObject, fin string) {
	fins := o.obj.GetFinalizers()
	_ = g.testAndReplace(ctx, o, "/metadata/finalizers", fins, slices.DeleteFunc(slices.Clone(fins), func(f string) bool { return f == fin }))
}

// testAndReplace JSON-patches one list field, guarded by its current value.
func (g *gcSim) testAndReplace(ctx context.Context, o gcObject, path string, old, new any) error {
	body, err := json.Marshal([]map[string]any{
		{"op": "test", "path": path, "value": old},
		{"op": "replace", "path": path, "value": new},
	})
	if err != nil {
		return err
	}
	_, err = g.s.dyn.Resource(o.kind.gvr).Namespace(o.obj.GetNamespace()).Patch(ctx, o.obj.GetName(), types.JSONPatchType, body, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
