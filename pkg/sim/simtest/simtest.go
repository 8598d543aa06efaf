// Package simtest holds what the tests of the simulator's CDI share across the two tiers that
// run them: the unit tests on client-go's fake client (pkg/sim) and the integration tests on a
// real kube-apiserver (test/integration). It must not import pkg/sim, whose own tests use it.
package simtest

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	virtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// ImageHandler serves /img/<anything>?size=N[&chunk=K][&delay=D][&truncate=M][&user=U&pass=P]:
// N bytes announced in Content-Length, written in chunks of K bytes (default 64 KiB) with D
// between them, cut after M bytes, behind Basic auth. Anything else is 404.
func ImageHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/img/", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if u := q.Get("user"); u != "" {
			if user, pass, ok := r.BasicAuth(); !ok || user != u || pass != q.Get("pass") {
				w.Header().Set("WWW-Authenticate", `Basic realm="images"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		size, _ := strconv.Atoi(q.Get("size"))
		send := size
		if t := q.Get("truncate"); t != "" {
			send, _ = strconv.Atoi(t)
		}
		chunk := 64 << 10
		if c := q.Get("chunk"); c != "" {
			chunk, _ = strconv.Atoi(c)
		}
		delay, _ := time.ParseDuration(q.Get("delay"))
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.Header().Set("Content-Type", "application/octet-stream")
		if r.Method == http.MethodHead {
			return
		}
		buf := make([]byte, chunk)
		for i := range buf {
			buf[i] = byte(i)
		}
		for sent := 0; sent < send; {
			n := min(chunk, send-sent)
			if _, err := w.Write(buf[:n]); err != nil {
				return
			}
			sent += n
			w.(http.Flusher).Flush()
			if delay > 0 && sent < send {
				select {
				case <-r.Context().Done():
					return
				case <-time.After(delay):
				}
			}
		}
	})
	return mux
}

// AddDataVolumeCD gives vm a SATA CD-ROM "cd" whose volume is the DataVolume dv.
func AddDataVolumeCD(vm *virtv1.VirtualMachine, dv string) {
	spec := &vm.Spec.Template.Spec
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, virtv1.Disk{Name: "cd", DiskDevice: virtv1.DiskDevice{CDRom: &virtv1.CDRomTarget{Bus: virtv1.DiskBusSATA}}})
	spec.Volumes = append(spec.Volumes, virtv1.Volume{Name: "cd", VolumeSource: virtv1.VolumeSource{DataVolume: &virtv1.DataVolumeSource{Name: dv}}})
}

// Get reads the object ns/name of gvr into a T, or returns nil when it does not exist.
func Get[T any](t testing.TB, ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, name string) *T {
	t.Helper()
	u, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("getting %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
	obj := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		t.Fatalf("converting %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
	return obj
}

// WatchDV polls the DataVolume what, read by get (nil while it does not exist), until done says
// so and returns it with every phase and progress it went through; it fails the test after
// timeout.
func WatchDV(t testing.TB, what string, timeout time.Duration, get func() *cdiv1.DataVolume, done func(*cdiv1.DataVolume) bool) (*cdiv1.DataVolume, []cdiv1.DataVolumePhase, []string) {
	t.Helper()
	var phases []cdiv1.DataVolumePhase
	var progress []string
	deadline := time.Now().Add(timeout)
	for {
		dv := get()
		if dv != nil {
			if p := dv.Status.Phase; p != "" && (len(phases) == 0 || phases[len(phases)-1] != p) {
				phases = append(phases, p)
			}
			if p := string(dv.Status.Progress); p != "" && (len(progress) == 0 || progress[len(progress)-1] != p) {
				progress = append(progress, p)
			}
			if done(dv) {
				return dv, phases, progress
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("DataVolume %s: timed out; phases %v, progress %v, last %+v", what, phases, progress, dv)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// PhaseIs is a WatchDV condition: the DataVolume is in phase p.
func PhaseIs(p cdiv1.DataVolumePhase) func(*cdiv1.DataVolume) bool {
	return func(dv *cdiv1.DataVolume) bool { return dv.Status.Phase == p }
}

// Cond returns the DataVolume's condition of type t (the zero condition when it has none).
func Cond(dv *cdiv1.DataVolume, t cdiv1.DataVolumeConditionType) cdiv1.DataVolumeCondition {
	for _, c := range dv.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return cdiv1.DataVolumeCondition{}
}

// RunningError is a WatchDV condition: the Running condition reports an error.
func RunningError(dv *cdiv1.DataVolume) bool {
	c := Cond(dv, cdiv1.DataVolumeRunning)
	return c.Status == corev1.ConditionFalse && c.Message != "" && c.Reason != "Completed"
}

// Progress parses a DataVolume's progress ("12.34%"); false for "N/A" and anything else.
func Progress(p string) (float64, bool) {
	if !strings.HasSuffix(p, "%") {
		return 0, false
	}
	f, err := strconv.ParseFloat(strings.TrimSuffix(p, "%"), 64)
	return f, err == nil
}
