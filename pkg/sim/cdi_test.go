package sim

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	virtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim/simtest"
)

// imageServer serves simtest.ImageHandler until the test ends.
func imageServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(simtest.ImageHandler())
	t.Cleanup(srv.Close)
	return srv
}

// ---- a fake cluster ----

func fastOptions() Options {
	return Options{
		BootDelay: 50 * time.Millisecond,
		CDI: CDIOptions{
			ScheduleDelay:    50 * time.Millisecond,
			CloneDuration:    50 * time.Millisecond,
			RetryBackoff:     50 * time.Millisecond,
			ProgressInterval: 30 * time.Millisecond,
			GCInterval:       200 * time.Millisecond,
		},
	}
}

type fakeCluster struct {
	t   *testing.T
	dyn dynamic.Interface
	sim *Simulator
	ctx context.Context
}

func startFake(t *testing.T) *fakeCluster {
	t.Helper()
	dyn, err := NewDemoCluster()
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s := New(dyn, fastOptions())
	require.NoError(t, s.Run(ctx))
	return &fakeCluster{t: t, dyn: dyn, sim: s, ctx: ctx}
}

var uidCounter struct {
	sync.Mutex
	n int
}

// newUID stands in for the apiserver, which the fake clientset does not play.
func newUID() types.UID {
	uidCounter.Lock()
	defer uidCounter.Unlock()
	uidCounter.n++
	return types.UID(fmt.Sprintf("00000000-0000-4000-a000-%012d", uidCounter.n))
}

type dvOption func(*cdiv1.DataVolume)

func withAnnotation(k, v string) dvOption {
	return func(dv *cdiv1.DataVolume) {
		if dv.Annotations == nil {
			dv.Annotations = map[string]string{}
		}
		dv.Annotations[k] = v
	}
}

func withStorageClass(sc string) dvOption {
	return func(dv *cdiv1.DataVolume) { dv.Spec.Storage.StorageClassName = &sc }
}

func ownedByVM(vm *virtv1.VirtualMachine) dvOption {
	return func(dv *cdiv1.DataVolume) {
		dv.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(vm, virtv1.VirtualMachineGroupVersionKind)}
	}
}

func withSize(q string) dvOption {
	return func(dv *cdiv1.DataVolume) {
		if q == "" {
			dv.Spec.Storage.Resources.Requests = nil
			return
		}
		dv.Spec.Storage.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(q)}
	}
}

func newDV(ns, name string, src cdiv1.DataVolumeSource, opts ...dvOption) *cdiv1.DataVolume {
	dv := &cdiv1.DataVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: "cdi.kubevirt.io/v1beta1", Kind: "DataVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: newUID()},
		Spec: cdiv1.DataVolumeSpec{
			Source: &src,
			Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")},
			}},
		},
	}
	for _, o := range opts {
		o(dv)
	}
	return dv
}

func httpSource(url string) cdiv1.DataVolumeSource {
	return cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: url}}
}

func (f *fakeCluster) create(obj any) {
	f.t.Helper()
	u, err := ToUnstructured(obj)
	require.NoError(f.t, err)
	var ns string
	if m, ok := obj.(metav1.Object); ok {
		ns = m.GetNamespace()
	}
	switch o := obj.(type) {
	case *cdiv1.DataVolume:
		_, err = f.dyn.Resource(kubevirt.DataVolumeResource).Namespace(ns).Create(f.ctx, u, metav1.CreateOptions{})
	case *corev1.Secret:
		_, err = f.dyn.Resource(SecretResource).Namespace(ns).Create(f.ctx, u, metav1.CreateOptions{})
	case *corev1.ConfigMap:
		_, err = f.dyn.Resource(ConfigMapResource).Namespace(ns).Create(f.ctx, u, metav1.CreateOptions{})
	case *corev1.PersistentVolumeClaim:
		_, err = f.dyn.Resource(PVCResource).Namespace(ns).Create(f.ctx, u, metav1.CreateOptions{})
	case *virtv1.VirtualMachine:
		_, err = f.dyn.Resource(kubevirt.VMResource).Namespace(ns).Create(f.ctx, u, metav1.CreateOptions{})
	default:
		f.t.Fatalf("cannot create %T", o)
	}
	require.NoError(f.t, err)
}

func (f *fakeCluster) dv(ns, name string) *cdiv1.DataVolume {
	f.t.Helper()
	return simtest.Get[cdiv1.DataVolume](f.t, f.ctx, f.dyn, kubevirt.DataVolumeResource, ns, name)
}

func (f *fakeCluster) pvc(ns, name string) *corev1.PersistentVolumeClaim {
	f.t.Helper()
	return simtest.Get[corev1.PersistentVolumeClaim](f.t, f.ctx, f.dyn, PVCResource, ns, name)
}

func (f *fakeCluster) vmi(ns, name string) *virtv1.VirtualMachineInstance {
	f.t.Helper()
	return simtest.Get[virtv1.VirtualMachineInstance](f.t, f.ctx, f.dyn, kubevirt.VMIResource, ns, name)
}

// watchDV polls the DataVolume until done says so, recording every phase and progress seen.
func (f *fakeCluster) watchDV(ns, name string, timeout time.Duration, done func(*cdiv1.DataVolume) bool) (*cdiv1.DataVolume, []cdiv1.DataVolumePhase, []string) {
	f.t.Helper()
	return simtest.WatchDV(f.t, ns+"/"+name, timeout, func() *cdiv1.DataVolume { return f.dv(ns, name) }, done)
}

func eventually(t *testing.T, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ---- tests ----

func TestImportSucceedsWithProgress(t *testing.T) {
	f := startFake(t)
	srv := imageServer(t)
	const size = 2 << 20
	url := fmt.Sprintf("%s/img/disc.iso?size=%d&chunk=%d&delay=10ms", srv.URL, size, 64<<10)
	f.create(newDV("tenant-a", "disc", httpSource(url)))

	dv, phases, progress := f.watchDV("tenant-a", "disc", 20*time.Second, simtest.PhaseIs(cdiv1.Succeeded))
	assert.Equal(t, []cdiv1.DataVolumePhase{cdiv1.ImportScheduled, cdiv1.ImportInProgress, cdiv1.Succeeded}, phases)
	var mid []float64
	for _, p := range progress {
		if v, ok := simtest.Progress(p); ok && v > 0 && v < 100 {
			mid = append(mid, v)
		}
	}
	assert.GreaterOrEqual(t, len(mid), 3, "intermediate progress values: %v", progress)
	for _, p := range progress {
		if p != "N/A" && p != "100.0%" {
			assert.Regexp(t, `^\d+\.\d\d%$`, p)
		}
	}
	assert.Equal(t, cdiv1.DataVolumeProgress("100.0%"), dv.Status.Progress)
	assert.Equal(t, "disc", dv.Status.ClaimName)
	assert.Equal(t, int32(0), dv.Status.RestartCount)
	b, r, run := simtest.Cond(dv, cdiv1.DataVolumeBound), simtest.Cond(dv, cdiv1.DataVolumeReady), simtest.Cond(dv, cdiv1.DataVolumeRunning)
	assert.Equal(t, corev1.ConditionTrue, b.Status)
	assert.Equal(t, "Bound", b.Reason)
	assert.Equal(t, "PVC disc Bound", b.Message)
	assert.Equal(t, corev1.ConditionTrue, r.Status)
	assert.Equal(t, corev1.ConditionFalse, run.Status)
	assert.Equal(t, "Completed", run.Reason)
	assert.Equal(t, "Import Complete", run.Message)

	pvc := f.pvc("tenant-a", "disc")
	require.NotNil(t, pvc)
	ref := metav1.GetControllerOf(pvc)
	require.NotNil(t, ref)
	assert.Equal(t, "DataVolume", ref.Kind)
	assert.Equal(t, dv.UID, ref.UID)
	assert.Equal(t, corev1.ClaimBound, pvc.Status.Phase)
	// 64Mi with CDI's 6% filesystem overhead.
	assert.Equal(t, int64(math.Ceil(64<<20*1.06)), pvc.Spec.Resources.Requests.Storage().Value())
	assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, pvc.Spec.AccessModes)
	assert.Equal(t, strconv.Itoa(size), pvc.Annotations[BytesAnnotation])
	assert.Equal(t, int64(size), f.sim.BytesFetched(url))
}

func TestImportCopiesStorageSettings(t *testing.T) {
	f := startFake(t)
	srv := imageServer(t)
	block := corev1.PersistentVolumeBlock
	dv := newDV("tenant-a", "blk", httpSource(srv.URL+"/img/a.iso?size=1000"), withStorageClass("fast"), func(dv *cdiv1.DataVolume) {
		dv.Spec.Storage.VolumeMode = &block
		dv.Spec.Storage.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	})
	f.create(dv)
	f.watchDV("tenant-a", "blk", 10*time.Second, simtest.PhaseIs(cdiv1.Succeeded))
	pvc := f.pvc("tenant-a", "blk")
	require.NotNil(t, pvc)
	assert.Equal(t, "fast", *pvc.Spec.StorageClassName)
	assert.Equal(t, corev1.PersistentVolumeBlock, *pvc.Spec.VolumeMode)
	assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, pvc.Spec.AccessModes)
	// Block volumes get no filesystem overhead.
	assert.Equal(t, int64(64<<20), pvc.Spec.Resources.Requests.Storage().Value())
}

func TestImport404RetriesThenFails(t *testing.T) {
	f := startFake(t)
	srv := imageServer(t)
	url := srv.URL + "/nothing-here.iso"
	f.create(newDV("tenant-a", "missing", httpSource(url)))

	dv, _, _ := f.watchDV("tenant-a", "missing", 10*time.Second, simtest.RunningError)
	assert.Equal(t, cdiv1.ImportInProgress, dv.Status.Phase)
	run := simtest.Cond(dv, cdiv1.DataVolumeRunning)
	assert.Equal(t, "Error", run.Reason)
	assert.Equal(t, "Unable to connect to http data source: expected status code 200, got 404. Status: 404 Not Found", run.Message)
	assert.Equal(t, corev1.ConditionFalse, simtest.Cond(dv, cdiv1.DataVolumeReady).Status)

	restarts := map[int32]bool{}
	dv, _, _ = f.watchDV("tenant-a", "missing", 10*time.Second, func(dv *cdiv1.DataVolume) bool {
		restarts[dv.Status.RestartCount] = true
		return dv.Status.Phase == cdiv1.Failed
	})
	assert.Equal(t, int32(3), dv.Status.RestartCount)
	assert.True(t, restarts[1] && restarts[2], "restart counts seen: %v", restarts)
	assert.Equal(t, run.Message, simtest.Cond(dv, cdiv1.DataVolumeRunning).Message)
	assert.Equal(t, int64(0), f.sim.BytesFetched(url))
}

func TestImportSlowShowsProgress(t *testing.T) {
	f := startFake(t)
	srv := imageServer(t)
	url := srv.URL + "/img/slow.iso?size=1000000&chunk=10000&delay=20ms"
	f.create(newDV("tenant-a", "slow", httpSource(url)))
	dv, _, _ := f.watchDV("tenant-a", "slow", 10*time.Second, func(dv *cdiv1.DataVolume) bool {
		v, ok := simtest.Progress(string(dv.Status.Progress))
		return ok && v > 10 && v < 90
	})
	assert.Equal(t, cdiv1.ImportInProgress, dv.Status.Phase)
	run := simtest.Cond(dv, cdiv1.DataVolumeRunning)
	assert.Equal(t, corev1.ConditionTrue, run.Status)
	assert.Equal(t, "Pod is running", run.Reason)
	ready := simtest.Cond(dv, cdiv1.DataVolumeReady)
	assert.Equal(t, corev1.ConditionFalse, ready.Status)
	assert.Equal(t, "TransferRunning", ready.Reason)
	f.watchDV("tenant-a", "slow", 20*time.Second, simtest.PhaseIs(cdiv1.Succeeded))
}

func TestImportTruncated(t *testing.T) {
	f := startFake(t)
	srv := imageServer(t)
	url := srv.URL + "/img/cut.iso?size=1000000&truncate=300000"
	f.create(newDV("tenant-a", "cut", httpSource(url)))
	dv, _, _ := f.watchDV("tenant-a", "cut", 10*time.Second, simtest.RunningError)
	run := simtest.Cond(dv, cdiv1.DataVolumeRunning)
	assert.Equal(t, "ImagePullFailed", run.Reason)
	assert.Equal(t, "Unable to process data: Unable to transfer source data to scratch space: failed to pull image: unexpected EOF", run.Message)
	assert.Equal(t, cdiv1.ImportInProgress, dv.Status.Phase)
	assert.GreaterOrEqual(t, f.sim.BytesFetched(url), int64(300000))
}

func TestImportTLS(t *testing.T) {
	f := startFake(t)
	srv := httptest.NewUnstartedServer(simtest.ImageHandler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the rejected handshakes
	srv.StartTLS()
	defer srv.Close()

	url := srv.URL + "/img/secure.iso?size=100000"
	f.create(newDV("tenant-a", "untrusted", httpSource(url)))
	dv, _, _ := f.watchDV("tenant-a", "untrusted", 10*time.Second, simtest.RunningError)
	run := simtest.Cond(dv, cdiv1.DataVolumeRunning)
	assert.Equal(t, "Error", run.Reason)
	assert.Equal(t, fmt.Sprintf("Unable to connect to http data source: HTTP request errored: Get %q: tls: failed to verify certificate: x509: certificate signed by unknown authority", url), run.Message)

	ca := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	f.create(&corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "image-ca", Namespace: "tenant-a"},
		Data:       map[string]string{"ca.pem": ca},
	})
	src := httpSource(url)
	src.HTTP.CertConfigMap = "image-ca"
	f.create(newDV("tenant-a", "trusted", src))
	f.watchDV("tenant-a", "trusted", 10*time.Second, simtest.PhaseIs(cdiv1.Succeeded))

	// A ConfigMap that does not exist keeps the importer pod from starting.
	src = httpSource(url)
	src.HTTP.CertConfigMap = "nope"
	f.create(newDV("tenant-a", "no-ca", src))
	dv, _, _ = f.watchDV("tenant-a", "no-ca", 10*time.Second, func(dv *cdiv1.DataVolume) bool {
		return simtest.Cond(dv, cdiv1.DataVolumeRunning).Reason == "ContainerCreating"
	})
	assert.Equal(t, cdiv1.ImportScheduled, dv.Status.Phase)
}

func TestImportBasicAuth(t *testing.T) {
	f := startFake(t)
	srv := imageServer(t)
	url := srv.URL + "/img/private.iso?size=50000&user=alice&pass=s3cret"

	f.create(newDV("tenant-a", "anon", httpSource(url)))
	dv, _, _ := f.watchDV("tenant-a", "anon", 10*time.Second, simtest.RunningError)
	assert.Equal(t, "Unable to connect to http data source: expected status code 200, got 401. Status: 401 Unauthorized", simtest.Cond(dv, cdiv1.DataVolumeRunning).Message)

	src := httpSource(url)
	src.HTTP.SecretRef = "creds"
	f.create(newDV("tenant-a", "authed", src))
	dv, _, _ = f.watchDV("tenant-a", "authed", 10*time.Second, func(dv *cdiv1.DataVolume) bool {
		return simtest.Cond(dv, cdiv1.DataVolumeRunning).Reason == "CreateContainerConfigError"
	})
	assert.Equal(t, cdiv1.ImportScheduled, dv.Status.Phase)
	assert.Equal(t, `secret "creds" not found`, simtest.Cond(dv, cdiv1.DataVolumeRunning).Message)

	f.create(&corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "tenant-a"},
		Data:       map[string][]byte{"accessKeyId": []byte("alice"), "secretKey": []byte("s3cret")},
	})
	f.watchDV("tenant-a", "authed", 10*time.Second, simtest.PhaseIs(cdiv1.Succeeded))
}

func TestImportTooSmallAndInvalidSize(t *testing.T) {
	f := startFake(t)
	srv := imageServer(t)
	f.create(newDV("tenant-a", "small", httpSource(srv.URL+"/img/big.iso?size=3000000"), withSize("1Mi")))
	dv, _, _ := f.watchDV("tenant-a", "small", 10*time.Second, simtest.RunningError)
	assert.Equal(t, "Error", simtest.Cond(dv, cdiv1.DataVolumeRunning).Reason)
	assert.Equal(t, "DataVolume too small to contain image", simtest.Cond(dv, cdiv1.DataVolumeRunning).Message)

	f.create(newDV("tenant-a", "nosize", httpSource(srv.URL+"/img/x.iso?size=10"), withSize("")))
	dv, _, _ = f.watchDV("tenant-a", "nosize", 10*time.Second, func(dv *cdiv1.DataVolume) bool {
		return simtest.Cond(dv, cdiv1.DataVolumeBound).Reason == "ErrClaimNotValid"
	})
	assert.Equal(t, cdiv1.DataVolumePhase(""), dv.Status.Phase)
	assert.Equal(t, "PVC Spec is not valid - missing storage size", simtest.Cond(dv, cdiv1.DataVolumeBound).Message)
	assert.Nil(t, f.pvc("tenant-a", "nosize"))
}

func TestCloneWaitsForSourceAndFetchesNothing(t *testing.T) {
	f := startFake(t)
	srv := imageServer(t)
	const size = 500000
	url := fmt.Sprintf("%s/img/shared.iso?size=%d&chunk=50000&delay=30ms", srv.URL, size)
	// The clones first: their source does not exist yet.
	for i := 0; i < 3; i++ {
		f.create(newDV("tenant-a", fmt.Sprintf("cp-%d-cd", i), cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: "tenant-a", Name: "cache"}}))
	}
	dv, _, _ := f.watchDV("tenant-a", "cp-0-cd", 5*time.Second, func(dv *cdiv1.DataVolume) bool {
		return simtest.Cond(dv, cdiv1.DataVolumeBound).Reason == "CloneWithoutSource"
	})
	assert.Equal(t, "The source pvc cache doesn't exist", simtest.Cond(dv, cdiv1.DataVolumeBound).Message)

	f.create(newDV("tenant-a", "cache", httpSource(url)))
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("cp-%d-cd", i)
		dv, _, _ = f.watchDV("tenant-a", name, 5*time.Second, simtest.PhaseIs(cdiv1.CloneScheduled))
		assert.Equal(t, "Cloning from tenant-a/cache into tenant-a/"+name+" scheduled", simtest.Cond(dv, cdiv1.DataVolumeBound).Message)
		assert.Equal(t, "CloneScheduled", simtest.Cond(dv, cdiv1.DataVolumeBound).Reason)
	}
	assert.NotEqual(t, cdiv1.Succeeded, f.dv("tenant-a", "cache").Status.Phase, "the source is still importing")

	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("cp-%d-cd", i)
		dv, _, _ := f.watchDV("tenant-a", name, 20*time.Second, simtest.PhaseIs(cdiv1.Succeeded))
		assert.Equal(t, cdiv1.DataVolumeProgress("100.0%"), dv.Status.Progress)
		assert.Equal(t, "Clone Complete", simtest.Cond(dv, cdiv1.DataVolumeRunning).Message)
		pvc := f.pvc("tenant-a", name)
		require.NotNil(t, pvc)
		assert.Equal(t, strconv.Itoa(size), pvc.Annotations[BytesAnnotation])
		// No size on the clone: the source's (already inflated) request.
		assert.Equal(t, f.pvc("tenant-a", "cache").Spec.Resources.Requests.Storage().Value(), pvc.Spec.Resources.Requests.Storage().Value())
	}
	assert.Equal(t, f.dv("tenant-a", "cache").Status.Phase, cdiv1.Succeeded)
	assert.Equal(t, int64(size), f.sim.BytesFetched(url), "one download for three clones")
}

func TestWaitForFirstConsumer(t *testing.T) {
	f := startFake(t)
	srv := imageServer(t)
	url := srv.URL + "/img/w.iso?size=100000"

	f.create(newDV("tenant-a", "immediate", httpSource(url), withStorageClass("local-wffc"), withAnnotation(annImmediateBinding, "true")))
	f.watchDV("tenant-a", "immediate", 10*time.Second, simtest.PhaseIs(cdiv1.Succeeded))

	f.create(newDV("tenant-a", "lazy", httpSource(url), withStorageClass("local-wffc")))
	dv, _, _ := f.watchDV("tenant-a", "lazy", 10*time.Second, simtest.PhaseIs(cdiv1.WaitForFirstConsumer))
	assert.Equal(t, "lazy", dv.Status.ClaimName)
	assert.Equal(t, "PVC lazy Pending", simtest.Cond(dv, cdiv1.DataVolumeBound).Message)
	assert.Equal(t, corev1.ClaimPending, f.pvc("tenant-a", "lazy").Status.Phase)
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, cdiv1.WaitForFirstConsumer, f.dv("tenant-a", "lazy").Status.Phase)

	// A VM that mounts it: its VMI is the first consumer, and waits for the import.
	vm := vmWithDataVolume("tenant-a", "consumer", "lazy")
	f.create(vm)
	eventually(t, "a VMI", 5*time.Second, func() bool { return f.vmi("tenant-a", "consumer") != nil })
	f.watchDV("tenant-a", "lazy", 10*time.Second, simtest.PhaseIs(cdiv1.Succeeded))
	assert.Equal(t, corev1.ClaimBound, f.pvc("tenant-a", "lazy").Status.Phase)
	eventually(t, "the VMI to run", 5*time.Second, func() bool {
		vmi := f.vmi("tenant-a", "consumer")
		return vmi != nil && vmi.Status.Phase == virtv1.Running
	})
}

func vmWithDataVolume(ns, name, dv string) *virtv1.VirtualMachine {
	vm := ControlPlaneVM(ns, name, 50)
	vm.UID = newUID()
	always := virtv1.RunStrategyAlways
	vm.Spec.RunStrategy = &always
	simtest.AddDataVolumeCD(vm, dv)
	return vm
}

func TestVMIWaitsForDataVolume(t *testing.T) {
	f := startFake(t)
	srv := imageServer(t)
	f.create(vmWithDataVolume("tenant-a", "waiter", "later"))
	eventually(t, "a VMI", 5*time.Second, func() bool { return f.vmi("tenant-a", "waiter") != nil })
	// No DataVolume at all: Pending, well past the boot delay.
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, virtv1.Pending, f.vmi("tenant-a", "waiter").Status.Phase)

	f.create(newDV("tenant-a", "later", httpSource(srv.URL+"/img/l.iso?size=400000&chunk=40000&delay=30ms")))
	f.watchDV("tenant-a", "later", 10*time.Second, simtest.PhaseIs(cdiv1.ImportInProgress))
	assert.Equal(t, virtv1.Pending, f.vmi("tenant-a", "waiter").Status.Phase)
	f.watchDV("tenant-a", "later", 10*time.Second, simtest.PhaseIs(cdiv1.Succeeded))
	eventually(t, "the VMI to run", 5*time.Second, func() bool {
		return f.vmi("tenant-a", "waiter").Status.Phase == virtv1.Running
	})
}

func TestDeletingADataVolumeStopsItsImport(t *testing.T) {
	f := startFake(t)
	srv := imageServer(t)
	url := srv.URL + "/img/long.iso?size=10000000&chunk=10000&delay=20ms"
	f.create(newDV("tenant-a", "long", httpSource(url)))
	f.watchDV("tenant-a", "long", 10*time.Second, func(dv *cdiv1.DataVolume) bool {
		v, ok := simtest.Progress(string(dv.Status.Progress))
		return ok && v > 0
	})
	require.NoError(t, f.dyn.Resource(kubevirt.DataVolumeResource).Namespace("tenant-a").Delete(f.ctx, "long", metav1.DeleteOptions{}))
	eventually(t, "the PVC to be collected", 5*time.Second, func() bool { return f.pvc("tenant-a", "long") == nil })
	time.Sleep(100 * time.Millisecond)
	n := f.sim.BytesFetched(url)
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, n, f.sim.BytesFetched(url), "the download stopped")
	assert.Less(t, n, int64(10000000))
}

func TestBlankDataVolume(t *testing.T) {
	f := startFake(t)
	f.create(newDV("tenant-a", "scratch", cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}))
	dv, _, _ := f.watchDV("tenant-a", "scratch", 5*time.Second, simtest.PhaseIs(cdiv1.Succeeded))
	assert.Equal(t, "scratch", dv.Status.ClaimName)
	assert.NotNil(t, f.pvc("tenant-a", "scratch"))
}
