package integration

// The simulator's CDI importer and garbage collector against the real kube-apiserver with the
// real DataVolume CRD: what it writes must pass the CRD schema and the PVC admission chain,
// and behave as CDI and kube-controller-manager would.

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	virtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim/simtest"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/testenv"
)

type cdiCluster struct {
	t   *testing.T
	env *testenv.Env
	dyn dynamic.Interface
	sim *sim.Simulator
	ctx context.Context
}

func (c *cdiCluster) namespace(t *testing.T) string {
	ns := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	ns = ns[strings.LastIndex(ns, "-")+1:]
	require.NoError(t, c.env.CreateNamespace(c.ctx, ns))
	return ns
}

func (c *cdiCluster) createDV(t *testing.T, ns, name string, src cdiv1.DataVolumeSource, mod ...func(*cdiv1.DataVolume)) {
	t.Helper()
	dv := &cdiv1.DataVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: "cdi.kubevirt.io/v1beta1", Kind: "DataVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: cdiv1.DataVolumeSpec{Source: &src, Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")},
		}}},
	}
	for _, m := range mod {
		m(dv)
	}
	c.create(t, kubevirt.DataVolumeResource, ns, dv)
}

func (c *cdiCluster) create(t *testing.T, gvr schema.GroupVersionResource, ns string, obj any) metav1.Object {
	t.Helper()
	u, err := sim.ToUnstructured(obj)
	require.NoError(t, err)
	out, err := c.dyn.Resource(gvr).Namespace(ns).Create(c.ctx, u, metav1.CreateOptions{})
	require.NoError(t, err)
	return out
}

func (c *cdiCluster) dv(t *testing.T, ns, name string) *cdiv1.DataVolume {
	t.Helper()
	return simtest.Get[cdiv1.DataVolume](t, c.ctx, c.dyn, kubevirt.DataVolumeResource, ns, name)
}

func (c *cdiCluster) pvc(t *testing.T, ns, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	return simtest.Get[corev1.PersistentVolumeClaim](t, c.ctx, c.dyn, sim.PVCResource, ns, name)
}

// watchDV polls until done, returning the progress strings seen on the way.
func (c *cdiCluster) watchDV(t *testing.T, ns, name string, done func(*cdiv1.DataVolume) bool) (*cdiv1.DataVolume, []string) {
	t.Helper()
	dv, _, progress := simtest.WatchDV(t, ns+"/"+name, 30*time.Second, func() *cdiv1.DataVolume { return c.dv(t, ns, name) }, done)
	return dv, progress
}

func cdiEventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func httpDV(url string) cdiv1.DataVolumeSource {
	return cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: url}}
}

// cdiVM is a VM with a CD-ROM from DataVolume dv.
func cdiVM(ns, name, dv string, rs virtv1.VirtualMachineRunStrategy) *virtv1.VirtualMachine {
	vm := sim.ControlPlaneVM(ns, name, 70)
	vm.UID = ""
	vm.Spec.RunStrategy = &rs
	simtest.AddDataVolumeCD(vm, dv)
	return vm
}

func TestCDISimulatorAgainstAPIServer(t *testing.T) {
	env := testenv.StartForTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dyn, err := dynamic.NewForConfig(env.Config)
	require.NoError(t, err)
	s := sim.New(dyn, sim.Options{
		BootDelay: 100 * time.Millisecond,
		CDI: sim.CDIOptions{
			ScheduleDelay: 50 * time.Millisecond, RetryBackoff: 100 * time.Millisecond,
			ProgressInterval: 50 * time.Millisecond, GCInterval: 500 * time.Millisecond,
		},
	})
	require.NoError(t, s.Run(ctx))
	c := &cdiCluster{t: t, env: env, dyn: dyn, sim: s, ctx: ctx}
	images := httptest.NewServer(simtest.ImageHandler())
	t.Cleanup(images.Close)

	t.Run("import", func(t *testing.T) {
		ns := c.namespace(t)
		const size = 3 << 20
		url := fmt.Sprintf("%s/img/a.iso?size=%d&chunk=65536&delay=5ms", images.URL, size)
		c.createDV(t, ns, "iso", httpDV(url))
		dv, progress := c.watchDV(t, ns, "iso", simtest.PhaseIs(cdiv1.Succeeded))
		var mid int
		for _, p := range progress {
			if v, ok := simtest.Progress(p); ok && v > 0 && v < 100 {
				mid++
			}
		}
		assert.GreaterOrEqual(t, mid, 3, "progress seen: %v", progress)
		assert.Equal(t, cdiv1.DataVolumeProgress("100.0%"), dv.Status.Progress)
		assert.Equal(t, "iso", dv.Status.ClaimName)
		run := simtest.Cond(dv, cdiv1.DataVolumeRunning)
		assert.Equal(t, corev1.ConditionFalse, run.Status)
		assert.Equal(t, "Completed", run.Reason)
		assert.Equal(t, "Import Complete", run.Message)
		assert.Equal(t, corev1.ConditionTrue, simtest.Cond(dv, cdiv1.DataVolumeReady).Status)
		assert.Equal(t, corev1.ConditionTrue, simtest.Cond(dv, cdiv1.DataVolumeBound).Status)
		assert.Equal(t, int64(size), s.BytesFetched(url))

		pvc := c.pvc(t, ns, "iso")
		require.NotNil(t, pvc)
		ref := metav1.GetControllerOf(pvc)
		require.NotNil(t, ref)
		assert.Equal(t, dv.UID, ref.UID)
		assert.Equal(t, corev1.ClaimBound, pvc.Status.Phase)
		assert.Equal(t, strconv.Itoa(size), pvc.Annotations[sim.BytesAnnotation])
		// The apiserver's StorageObjectInUseProtection admission plugin at work.
		assert.Contains(t, pvc.Finalizers, "kubernetes.io/pvc-protection")
	})

	t.Run("notfound", func(t *testing.T) {
		ns := c.namespace(t)
		c.createDV(t, ns, "iso", httpDV(images.URL+"/nothing.iso"))
		dv, _ := c.watchDV(t, ns, "iso", simtest.RunningError)
		assert.Equal(t, cdiv1.ImportInProgress, dv.Status.Phase)
		run := simtest.Cond(dv, cdiv1.DataVolumeRunning)
		assert.Equal(t, "Error", run.Reason)
		assert.Equal(t, "Unable to connect to http data source: expected status code 200, got 404. Status: 404 Not Found", run.Message)
		dv, _ = c.watchDV(t, ns, "iso", simtest.PhaseIs(cdiv1.Failed))
		assert.Equal(t, int32(3), dv.Status.RestartCount)
	})

	t.Run("slow", func(t *testing.T) {
		ns := c.namespace(t)
		c.createDV(t, ns, "iso", httpDV(images.URL+"/img/slow.iso?size=1000000&chunk=10000&delay=20ms"))
		dv, _ := c.watchDV(t, ns, "iso", func(dv *cdiv1.DataVolume) bool {
			v, ok := simtest.Progress(string(dv.Status.Progress))
			return ok && v > 5 && v < 95
		})
		assert.Equal(t, cdiv1.ImportInProgress, dv.Status.Phase)
		assert.Equal(t, "Pod is running", simtest.Cond(dv, cdiv1.DataVolumeRunning).Reason)
		assert.Regexp(t, `^\d+\.\d\d%$`, string(dv.Status.Progress))
	})

	t.Run("truncated", func(t *testing.T) {
		ns := c.namespace(t)
		c.createDV(t, ns, "iso", httpDV(images.URL+"/img/cut.iso?size=1000000&truncate=400000"))
		dv, _ := c.watchDV(t, ns, "iso", simtest.RunningError)
		run := simtest.Cond(dv, cdiv1.DataVolumeRunning)
		assert.Equal(t, "ImagePullFailed", run.Reason)
		assert.Equal(t, "Unable to process data: Unable to transfer source data to scratch space: failed to pull image: unexpected EOF", run.Message)
	})

	t.Run("tls", func(t *testing.T) {
		ns := c.namespace(t)
		srv := httptest.NewUnstartedServer(simtest.ImageHandler())
		srv.Config.ErrorLog = log.New(io.Discard, "", 0)
		srv.StartTLS()
		defer srv.Close()
		url := srv.URL + "/img/tls.iso?size=200000"
		c.createDV(t, ns, "untrusted", httpDV(url))
		dv, _ := c.watchDV(t, ns, "untrusted", simtest.RunningError)
		msg := simtest.Cond(dv, cdiv1.DataVolumeRunning).Message
		assert.True(t, strings.HasPrefix(msg, "Unable to connect to http data source: HTTP request errored: Get "), msg)
		assert.True(t, strings.HasSuffix(msg, "x509: certificate signed by unknown authority"), msg)

		c.create(t, sim.ConfigMapResource, ns, &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "ca", Namespace: ns},
			Data:       map[string]string{"ca.pem": string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))},
		})
		src := httpDV(url)
		src.HTTP.CertConfigMap = "ca"
		c.createDV(t, ns, "trusted", src)
		c.watchDV(t, ns, "trusted", simtest.PhaseIs(cdiv1.Succeeded))
	})

	t.Run("clone", func(t *testing.T) {
		ns := c.namespace(t)
		const size = 1 << 20
		url := fmt.Sprintf("%s/img/shared.iso?size=%d&chunk=65536&delay=20ms", images.URL, size)
		c.createDV(t, ns, "cache", httpDV(url), func(dv *cdiv1.DataVolume) {
			dv.Annotations = map[string]string{"cdi.kubevirt.io/storage.bind.immediate.requested": "true"}
		})
		for i := 0; i < 3; i++ {
			c.createDV(t, ns, fmt.Sprintf("cd-%d", i), cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: ns, Name: "cache"}})
		}
		dv, _ := c.watchDV(t, ns, "cd-0", simtest.PhaseIs(cdiv1.CloneScheduled))
		assert.Equal(t, "CloneScheduled", simtest.Cond(dv, cdiv1.DataVolumeBound).Reason)
		for i := 0; i < 3; i++ {
			dv, _ := c.watchDV(t, ns, fmt.Sprintf("cd-%d", i), simtest.PhaseIs(cdiv1.Succeeded))
			assert.Equal(t, "Clone Complete", simtest.Cond(dv, cdiv1.DataVolumeRunning).Message)
			assert.Equal(t, strconv.Itoa(size), c.pvc(t, ns, dv.Name).Annotations[sim.BytesAnnotation])
		}
		assert.Equal(t, int64(size), s.BytesFetched(url), "three clones, one download")
	})

	t.Run("gc", func(t *testing.T) {
		ns := c.namespace(t)
		for _, name := range []string{"bg", "fg"} {
			vm := c.create(t, kubevirt.VMResource, ns, cdiVM(ns, name, name+"-cd", virtv1.RunStrategyHalted))
			c.createDV(t, ns, name+"-cd", httpDV(images.URL+"/img/gc.iso?size=1000"), func(dv *cdiv1.DataVolume) {
				dv.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(vm, virtv1.VirtualMachineGroupVersionKind)}
			})
			c.watchDV(t, ns, name+"-cd", simtest.PhaseIs(cdiv1.Succeeded))
		}
		// Background (the default for custom resources): the VM goes at once, then the
		// DataVolume, then the PVC.
		require.NoError(t, dyn.Resource(kubevirt.VMResource).Namespace(ns).Delete(ctx, "bg", metav1.DeleteOptions{}))
		cdiEventually(t, "the DataVolume to go", func() bool { return c.dv(t, ns, "bg-cd") == nil })
		cdiEventually(t, "the PVC to go", func() bool { return c.pvc(t, ns, "bg-cd") == nil })

		// Foreground: the VM waits for its dependents.
		fg := metav1.DeletePropagationForeground
		require.NoError(t, dyn.Resource(kubevirt.VMResource).Namespace(ns).Delete(ctx, "fg", metav1.DeleteOptions{PropagationPolicy: &fg}))
		cdiEventually(t, "the VM to go", func() bool {
			_, err := dyn.Resource(kubevirt.VMResource).Namespace(ns).Get(ctx, "fg", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
		assert.Nil(t, c.dv(t, ns, "fg-cd"))
		cdiEventually(t, "the PVC to go", func() bool { return c.pvc(t, ns, "fg-cd") == nil })
	})

	t.Run("pvcprotection", func(t *testing.T) {
		ns := c.namespace(t)
		c.createDV(t, ns, "busy", httpDV(images.URL+"/img/p.iso?size=1000"))
		c.watchDV(t, ns, "busy", simtest.PhaseIs(cdiv1.Succeeded))
		c.create(t, kubevirt.VMResource, ns, cdiVM(ns, "user", "busy", virtv1.RunStrategyAlways))
		cdiEventually(t, "the VMI to run", func() bool {
			vmi := cdiVMI(t, c, ns, "user")
			return vmi != nil && vmi.Status.Phase == virtv1.Running
		})
		require.NoError(t, dyn.Resource(kubevirt.DataVolumeResource).Namespace(ns).Delete(ctx, "busy", metav1.DeleteOptions{}))
		cdiEventually(t, "the PVC to be terminating", func() bool {
			pvc := c.pvc(t, ns, "busy")
			return pvc != nil && pvc.DeletionTimestamp != nil
		})
		time.Sleep(time.Second)
		pvc := c.pvc(t, ns, "busy")
		require.NotNil(t, pvc, "a mounted PVC stays while its VMI runs")
		assert.True(t, slices.Contains(pvc.Finalizers, "kubernetes.io/pvc-protection"))
		u, err := dyn.Resource(kubevirt.VMResource).Namespace(ns).Get(ctx, "user", metav1.GetOptions{})
		require.NoError(t, err)
		require.NoError(t, unstructuredSet(u.Object, "Halted", "spec", "runStrategy"))
		_, err = dyn.Resource(kubevirt.VMResource).Namespace(ns).Update(ctx, u, metav1.UpdateOptions{})
		require.NoError(t, err)
		cdiEventually(t, "the PVC to go", func() bool { return c.pvc(t, ns, "busy") == nil })
	})

	t.Run("vmiwaits", func(t *testing.T) {
		ns := c.namespace(t)
		c.create(t, kubevirt.VMResource, ns, cdiVM(ns, "vm", "media", virtv1.RunStrategyAlways))
		cdiEventually(t, "the VMI", func() bool { return cdiVMI(t, c, ns, "vm") != nil })
		time.Sleep(500 * time.Millisecond)
		assert.Equal(t, virtv1.Pending, cdiVMI(t, c, ns, "vm").Status.Phase, "no DataVolume yet")
		c.createDV(t, ns, "media", httpDV(images.URL+"/img/m.iso?size=500000&chunk=20000&delay=20ms"), func(dv *cdiv1.DataVolume) {
			sc := "local-wffc"
			dv.Spec.Storage.StorageClassName = &sc // the VMI is its first consumer
		})
		c.watchDV(t, ns, "media", simtest.PhaseIs(cdiv1.ImportInProgress))
		assert.Equal(t, virtv1.Pending, cdiVMI(t, c, ns, "vm").Status.Phase, "import running")
		c.watchDV(t, ns, "media", simtest.PhaseIs(cdiv1.Succeeded))
		cdiEventually(t, "the VMI to run", func() bool { return cdiVMI(t, c, ns, "vm").Status.Phase == virtv1.Running })
	})
}

func cdiVMI(t *testing.T, c *cdiCluster, ns, name string) *virtv1.VirtualMachineInstance {
	t.Helper()
	return simtest.Get[virtv1.VirtualMachineInstance](t, c.ctx, c.dyn, kubevirt.VMIResource, ns, name)
}

func unstructuredSet(obj map[string]any, value any, path ...string) error {
	for _, p := range path[:len(path)-1] {
		next, ok := obj[p].(map[string]any)
		if !ok {
			return fmt.Errorf("no %s", p)
		}
		obj = next
	}
	obj[path[len(path)-1]] = value
	return nil
}
