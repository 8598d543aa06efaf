package testenv_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubevirt-redfish/kubevirt-redfish/test/testenv"
)

var (
	vmGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}
	dvGVR = schema.GroupVersionResource{Group: "cdi.kubevirt.io", Version: "v1beta1", Resource: "datavolumes"}

	// Strict makes the apiserver reject unknown fields instead of silently
	// pruning them, so a typo in our manifests cannot go unnoticed.
	strict = metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}
)

func vm(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1",
		"kind":       "VirtualMachine",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"runStrategy": "Halted",
			"template": map[string]any{
				"spec": map[string]any{
					"domain": map[string]any{
						"devices": map[string]any{
							"disks": []any{map[string]any{"name": "root", "disk": map[string]any{"bus": "virtio"}}},
						},
						"resources": map[string]any{"requests": map[string]any{"memory": "64Mi"}},
					},
					"volumes": []any{map[string]any{
						"name":          "root",
						"containerDisk": map[string]any{"image": "quay.io/containerdisks/fedora:latest"},
					}},
				},
			},
		},
	}}
}

func TestEnv(t *testing.T) {
	env := testenv.StartForTest(t)
	ctx := t.Context()
	const ns = "testenv"
	if err := env.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(env.Config)
	vms := dyn.Resource(vmGVR).Namespace(ns)

	t.Run("valid VirtualMachine accepted", func(t *testing.T) {
		got, err := vms.Create(ctx, vm("vm1"), strict)
		if err != nil {
			t.Fatal(err)
		}
		if rs, _, _ := unstructured.NestedString(got.Object, "spec", "runStrategy"); rs != "Halted" {
			t.Errorf("runStrategy = %q, want Halted", rs)
		}
	})

	t.Run("valid DataVolume accepted", func(t *testing.T) {
		dv := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cdi.kubevirt.io/v1beta1",
			"kind":       "DataVolume",
			"metadata":   map[string]any{"name": "dv1"},
			"spec": map[string]any{
				"source":  map[string]any{"http": map[string]any{"url": "http://example.invalid/disk.qcow2"}},
				"storage": map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}},
			},
		}}
		if _, err := dyn.Resource(dvGVR).Namespace(ns).Create(ctx, dv, strict); err != nil {
			t.Fatal(err)
		}
	})

	// These prove the real KubeVirt schema is enforced, not a permissive stub.
	t.Run("runStrategy of wrong type rejected", func(t *testing.T) {
		bad := vm("bad-type")
		_ = unstructured.SetNestedField(bad.Object, int64(3), "spec", "runStrategy")
		_, err := vms.Create(ctx, bad, strict)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.runStrategy") {
			t.Fatalf("want Invalid error about spec.runStrategy, got %v", err)
		}
	})
	t.Run("unknown domain field rejected with strict validation", func(t *testing.T) {
		bad := vm("bad-field")
		_ = unstructured.SetNestedField(bad.Object, int64(2), "spec", "template", "spec", "domain", "cpuCount")
		_, err := vms.Create(ctx, bad, strict)
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `unknown field "spec.template.spec.domain.cpuCount"`) {
			t.Fatalf("want BadRequest about unknown field cpuCount, got %v", err)
		}
	})

	t.Run("kubeconfig works", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", env.KubeconfigPath)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dynamic.NewForConfigOrDie(cfg).Resource(vmGVR).Namespace(ns).Get(ctx, "vm1", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		text, err := env.MetricsText(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(text, `apiserver_request_total{`) || !strings.Contains(text, `resource="virtualmachines"`) {
			t.Fatalf("metrics lack apiserver_request_total for virtualmachines:\n%.2000s", text)
		}
	})

	t.Run("apiserver restart keeps data", func(t *testing.T) {
		if err := env.StopAPIServer(); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := vms.Get(short, "vm1", metav1.GetOptions{}); err == nil {
			t.Fatal("request succeeded while kube-apiserver was stopped")
		}
		if err := env.StartAPIServer(); err != nil {
			t.Fatal(err)
		}
		if _, err := vms.Get(ctx, "vm1", metav1.GetOptions{}); err != nil {
			t.Fatalf("VM lost across apiserver restart: %v", err)
		}
	})
}
