package deploy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/testenv"
)

const fieldManager = "kubevirt-redfish-deploy-test"

// warnings collects the apiserver's warning headers (deprecations, Pod Security "warn"
// violations, unknown fields under fieldValidation=Warn): the manifests must cause none.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

// dryRunEnv is a real kube-apiserver (test/testenv: real KubeVirt VM/VMI and CDI DataVolume
// CRDs, RBAC authorization, the default admission plugins including PodSecurity) plus the
// stand-in CRDs from testdata/.
type dryRunEnv struct {
	env    *testenv.Env
	dyn    dynamic.Interface
	cs     kubernetes.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	warn   *warnings
}

func startDryRunEnv(t *testing.T) *dryRunEnv {
	env := testenv.StartForTest(t)
	cfg := rest.CopyConfig(env.Config)
	w := &warnings{}
	cfg.WarningHandler = w
	e := &dryRunEnv{
		env:  env,
		dyn:  dynamic.NewForConfigOrDie(cfg),
		cs:   kubernetes.NewForConfigOrDie(cfg),
		warn: w,
	}
	e.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(e.cs.Discovery()))

	// OpenShift's Route and Multus' NetworkAttachmentDefinition are not part of testenv:
	// install minimal, open-schema stand-ins (see the files' headers).
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, f := range []string{"route-crd.yaml", "network-attachment-definition-crd.yaml"} {
		crd := readObjects(t, repoPath(t, "test", "deploy", "testdata", f))[0]
		if _, err := e.dyn.Resource(crdGVR).Create(t.Context(), crd, metav1.CreateOptions{}); err != nil {
			t.Fatalf("installing %s: %v", f, err)
		}
	}
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "route.openshift.io", Version: "v1", Kind: "Route"},
		{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"},
	} {
		err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			e.mapper.Reset()
			m, err := e.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				return false, nil
			}
			_, err = e.dyn.Resource(m.Resource).Namespace("default").List(ctx, metav1.ListOptions{Limit: 1})
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("%s is not served: %v", gvk, err)
		}
	}
	return e
}

// resource resolves the REST resource of an object through discovery.
func (e *dryRunEnv) resource(t *testing.T, obj *unstructured.Unstructured) dynamic.ResourceInterface {
	t.Helper()
	gvk := obj.GroupVersionKind()
	m, err := e.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatalf("%s %s: %v", gvk, obj.GetName(), err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return e.dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	return e.dyn.Resource(m.Resource)
}

// apply server-side applies obj with strict field validation, as a dry run unless real.
func (e *dryRunEnv) apply(t *testing.T, obj *unstructured.Unstructured, real bool) error {
	t.Helper()
	data, err := obj.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	opts := metav1.PatchOptions{FieldManager: fieldManager, FieldValidation: metav1.FieldValidationStrict, Force: new(true)}
	if !real {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = e.resource(t, obj).Patch(t.Context(), obj.GetName(), types.ApplyPatchType, data, opts)
	return err
}

func (e *dryRunEnv) noWarnings(t *testing.T, what string) {
	t.Helper()
	for _, w := range e.warn.take() {
		t.Errorf("%s: apiserver warning: %s", what, w)
	}
}

func describe(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
}

// TestServerSideDryRun applies the rendered overlays and the example VMs to a real
// kube-apiserver with the real KubeVirt CRDs, then checks the RBAC with the apiserver's own
// authorizer and runs the server's KubeVirt client as the deployed service account.
func TestServerSideDryRun(t *testing.T) {
	e := startDryRunEnv(t)
	ctx := t.Context()

	rendered := map[string]objects{}
	for _, overlay := range overlays {
		rendered[overlay] = renderOverlay(t, overlay)
	}

	// Namespaces must exist even for a dry run (admission checks them). The server's namespace
	// is created from the rendered object, Pod Security labels included.
	if err := e.apply(t, rendered["openshift"].one(t, "Namespace"), true); err != nil {
		t.Fatalf("creating namespace %s: %v", serverNS, err)
	}
	if err := e.env.CreateNamespace(ctx, tenantNS); err != nil {
		t.Fatal(err)
	}

	for _, overlay := range overlays {
		t.Run("apply/"+overlay, func(t *testing.T) {
			for _, o := range rendered[overlay] {
				if err := e.apply(t, o, false); err != nil {
					t.Errorf("dry-run apply %s: %v", describe(o), err)
				}
				e.noWarnings(t, describe(o))
			}
		})
	}

	// From here on, the identity and its grants exist for real.
	for _, o := range rendered["openshift"] {
		switch o.GetKind() {
		case "ServiceAccount", "Role", "RoleBinding":
			if err := e.apply(t, o, true); err != nil {
				t.Fatalf("apply %s: %v", describe(o), err)
			}
		}
	}

	// The pod each overlay's Deployment creates passes Pod Security "restricted", which the
	// namespace enforces (and the ServiceAccount admission plugin finds its account).
	for _, overlay := range overlays {
		t.Run("pod/"+overlay, func(t *testing.T) {
			dep := deployment(t, rendered[overlay])
			pod := &corev1.Pod{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
				ObjectMeta: metav1.ObjectMeta{Name: "kubevirt-redfish-" + overlay, Namespace: serverNS, Labels: dep.Spec.Template.Labels},
				Spec:       dep.Spec.Template.Spec,
			}
			_, err := e.cs.CoreV1().Pods(serverNS).Create(ctx, pod, metav1.CreateOptions{
				DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict,
			})
			if err != nil {
				t.Errorf("dry-run create of the %s pod: %v", overlay, err)
			}
			e.noWarnings(t, overlay+" pod")
		})
	}

	t.Run("rbac", func(t *testing.T) { checkRBACWithAuthorizer(t, e) })

	// The example VMs (and their PDB and network) against the real KubeVirt CRD schema.
	_, vmObjs := exampleVMs(t)
	t.Run("examples/vms", func(t *testing.T) {
		for _, o := range vmObjs {
			_, err := e.resource(t, o).Create(ctx, o, metav1.CreateOptions{
				DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict,
			})
			if err != nil {
				t.Errorf("dry-run create %s: %v", describe(o), err)
			}
			e.noWarnings(t, describe(o))
		}
	})
	if t.Failed() {
		return
	}

	// Finally, the server's KubeVirt client, as the deployed service account: its informers
	// must sync in the allowlisted namespace and its power-on patch must be allowed.
	t.Run("client as service account", func(t *testing.T) {
		for _, o := range vmObjs {
			if err := e.apply(t, o, true); err != nil {
				t.Fatalf("apply %s: %v", describe(o), err)
			}
		}
		sa := rest.CopyConfig(e.env.Config)
		sa.Impersonate = rest.ImpersonationConfig{UserName: saUser, Groups: saGroups}
		dyn := dynamic.NewForConfigOrDie(sa)

		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		client := kubevirt.NewClient(dyn, []string{tenantNS}, zap.NewNop())
		if err := client.Start(cctx); err != nil {
			t.Fatalf("the KubeVirt client did not start as %s: %v", saUser, err)
		}
		if _, ok := client.Get(tenantNS, "cp-0"); !ok {
			t.Fatal("cp-0 is not in the client's cache")
		}
		if err := client.Reset(cctx, tenantNS, "cp-0", redfish.ResetOn); err != nil {
			t.Fatalf("power on as %s: %v", saUser, err)
		}
		vm, err := e.dyn.Resource(kubevirt.VMResource).Namespace(tenantNS).Get(ctx, "cp-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rs, _, _ := unstructured.NestedString(vm.Object, "spec", "runStrategy"); rs == "Halted" {
			t.Errorf("runStrategy is still Halted after power on")
		}

		// Virtual media, with image credentials: a Secret, the namespace's cache DataVolume,
		// the VM's own DataVolume (owned by the VM) and a VM patch; then eject.
		media := kubevirt.MediaRequest{
			Image:    "http://images.example.com/agent.x86_64.iso",
			UserName: "u", Password: "p",
			Storage: kubevirt.Storage{Size: resource.MustParse("1Gi")},
		}
		if err := client.InsertMedia(cctx, tenantNS, "cp-1", media); err != nil {
			t.Fatalf("InsertMedia as %s: %v", saUser, err)
		}
		dvs, err := e.dyn.Resource(kubevirt.DataVolumeResource).Namespace(tenantNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		owned := false
		for _, dv := range dvs.Items {
			for _, ref := range dv.GetOwnerReferences() {
				if ref.Kind == "VirtualMachine" && ref.Name == "cp-1" {
					owned = true
					// This is what the virtualmachines/finalizers grant is for; drop the grant
					// if the media DataVolume stops blocking its owner's deletion.
					if ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
						t.Errorf("media DataVolume %s: blockOwnerDeletion is not set; the virtualmachines/finalizers grant is unnecessary", dv.GetName())
					}
				}
			}
		}
		if !owned {
			t.Errorf("no DataVolume owned by cp-1 after InsertMedia (have %d DataVolumes)", len(dvs.Items))
		}
		if err := client.EjectMedia(cctx, tenantNS, "cp-1"); err != nil {
			t.Fatalf("EjectMedia as %s: %v", saUser, err)
		}
	})
}

var (
	saUser   = "system:serviceaccount:" + serverNS + ":" + serverName
	saGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + serverNS, "system:authenticated"}
)

// checkRBACWithAuthorizer asks the apiserver (SubjectAccessReview) about every verb on every
// resource the server touches, in its namespace, the tenant namespace, another namespace and
// cluster-wide: exactly the verbs in expectedRBAC may be allowed.
func checkRBACWithAuthorizer(t *testing.T, e *dryRunEnv) {
	verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	resources := map[string]bool{"/pods": true, "/configmaps": true, "/services": true, "kubevirt.io/virtualmachineinstancemigrations": true}
	for _, grants := range expectedRBAC {
		for res := range grants {
			resources[res] = true
		}
	}
	for _, ns := range []string{serverNS, tenantNS, "tenant-b", ""} {
		for res := range resources {
			group, resource, _ := strings.Cut(res, "/")
			for _, verb := range verbs {
				want := slices.Contains(expectedRBAC[ns][res], verb)
				sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
					User:   saUser,
					Groups: saGroups,
					ResourceAttributes: &authorizationv1.ResourceAttributes{
						Namespace: ns, Verb: verb, Group: group, Resource: resource,
					},
				}}
				got, err := e.cs.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), sar, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got.Status.Allowed != want {
					where := ns
					if where == "" {
						where = "cluster-wide"
					}
					t.Errorf("%s %s in %s: allowed=%v, want %v (%s)", verb, res, where, got.Status.Allowed, want, got.Status.Reason)
				}
			}
		}
	}
}
