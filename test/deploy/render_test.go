package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/config"
)

// overlays are the kustomizations a user applies.
var overlays = []string{"openshift", "kubernetes"}

func renderOverlay(t testing.TB, name string) objects {
	return kustomizeBuild(t, repoPath(t, "deploy", "overlays", name))
}

// expectedRBAC is the complete set of permissions, per namespace and group/resource. Anything
// more is a failure, and so is anything less. Cluster-scoped grants are not allowed at all.
var expectedRBAC = map[string]map[string][]string{
	// The server's own namespace.
	serverNS: {
		// Leader election (client-go's Lease lock).
		"coordination.k8s.io/leases": {"get", "create", "update"},
		// Sessions (pkg/sessions refreshes last-used with a merge patch) and the passwords of
		// passwordSecret users.
		"/secrets": {"get", "list", "watch", "create", "update", "patch", "delete"},
	},
	// Every allowlisted tenant namespace.
	tenantNS: {
		"kubevirt.io/virtualmachines": {"get", "list", "watch", "patch"},
		// Media DataVolumes are owned by their VM (blockOwnerDeletion: OpenShift's
		// OwnerReferencesPermissionEnforcement).
		"kubevirt.io/virtualmachines/finalizers": {"update"},
		"kubevirt.io/virtualmachineinstances":    {"get", "list", "watch", "delete"},
		"cdi.kubevirt.io/datavolumes":            {"get", "list", "watch", "create", "delete"},
		// CDI's clone authorization (the VM's media DataVolume clones the namespace's cache).
		"cdi.kubevirt.io/datavolumes/source": {"create"},
		"/persistentvolumeclaims":            {"get", "list", "watch"},
		"/secrets":                           {"create", "delete"},
		"/configmaps":                        {"create", "delete"},
	},
}

func TestOverlaysRender(t *testing.T) {
	for _, overlay := range overlays {
		t.Run(overlay, func(t *testing.T) {
			objs := renderOverlay(t, overlay)

			want := map[string]int{
				"Namespace": 1, "ServiceAccount": 1, "Role": 2, "RoleBinding": 2, "ConfigMap": 1,
				"Secret": 1, "Deployment": 1, "Service": 1, "PodDisruptionBudget": 1, "NetworkPolicy": 1,
			}
			switch overlay {
			case "openshift":
				want["Route"] = 1
			case "kubernetes":
				want["Ingress"] = 1
			}
			if got := objs.kindCounts(); !reflect.DeepEqual(got, want) {
				t.Errorf("rendered kinds:\n got %v\nwant %v", got, want)
			}
			for _, o := range objs {
				if o.GetKind() != "Namespace" && o.GetNamespace() == "" {
					t.Errorf("%s %s has no namespace: every namespaced object must name its own", o.GetKind(), o.GetName())
				}
			}

			dep := deployment(t, objs)
			checkDeployment(t, dep)
			checkRBAC(t, objs, dep)
			checkConfig(t, objs, dep)
			checkService(t, objs, dep)
			checkPDB(t, objs, dep)
			checkNetworkPolicy(t, objs, dep)

			switch overlay {
			case "openshift":
				checkOpenShift(t, objs, dep)
			case "kubernetes":
				checkKubernetes(t, objs, dep)
			}
		})
	}
}

func deployment(t testing.TB, objs objects) *appsv1.Deployment {
	t.Helper()
	var dep appsv1.Deployment
	toTyped(t, objs.one(t, "Deployment"), &dep)
	if dep.Namespace != serverNS || dep.Name != serverName {
		t.Fatalf("Deployment is %s/%s, want %s/%s", dep.Namespace, dep.Name, serverNS, serverName)
	}
	return &dep
}

func container(t testing.TB, dep *appsv1.Deployment) *corev1.Container {
	t.Helper()
	cs := dep.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("want one container, got %d", len(cs))
	}
	return &cs[0]
}

func podLabels(dep *appsv1.Deployment) labels.Set { return dep.Spec.Template.Labels }

func checkDeployment(t *testing.T, dep *appsv1.Deployment) {
	pod := dep.Spec.Template.Spec
	c := container(t, dep)

	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Errorf("replicas = %v, want 2", dep.Spec.Replicas)
	}
	sel, err := metav1LabelSelector(dep.Spec.Selector)
	if err != nil || !sel.Matches(podLabels(dep)) {
		t.Errorf("the Deployment selector %v does not select its pods %v (%v)", dep.Spec.Selector, podLabels(dep), err)
	}
	if c.Image != imageName+":latest" {
		t.Errorf("image = %q, want %s:latest", c.Image, imageName)
	}
	if want := []string{"--config=/etc/kubevirt-redfish/config.yaml"}; !slices.Equal(c.Args, want) || len(c.Command) != 0 {
		t.Errorf("command %q args %q, want the image's entrypoint with args %q", c.Command, c.Args, want)
	}
	if pod.ServiceAccountName != serverName {
		t.Errorf("serviceAccountName = %q, want %q", pod.ServiceAccountName, serverName)
	}
	if pod.AutomountServiceAccountToken != nil && !*pod.AutomountServiceAccountToken {
		t.Error("the server needs its service account token")
	}

	// The serving port and the probes on it.
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != servingPort || c.Ports[0].Name != "https" {
		t.Errorf("ports = %+v, want one port https/%d", c.Ports, servingPort)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{
		{"liveness", c.LivenessProbe, "/healthz"},
		{"readiness", c.ReadinessProbe, "/readyz"},
		{"startup", c.StartupProbe, "/healthz"},
	} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s probe: want an HTTP GET probe", p.name)
			continue
		}
		g := p.probe.HTTPGet
		if g.Path != p.path || g.Scheme != corev1.URISchemeHTTPS || resolvePort(c, g.Port) != servingPort {
			t.Errorf("%s probe = %s %s port %s, want HTTPS %s on %d", p.name, g.Scheme, g.Path, g.Port.String(), p.path, servingPort)
		}
	}

	// Resources: requests and limits for both CPU and memory, requests <= limits.
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := c.Resources.Requests[r], c.Resources.Limits[r]
		if req.IsZero() || lim.IsZero() || req.Cmp(lim) > 0 {
			t.Errorf("%s: request %s, limit %s: want both set, request <= limit", r, req.String(), lim.String())
		}
	}

	// The Pod Security "restricted" profile, field by field.
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("container securityContext missing")
	}
	runAsNonRoot := (sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) ||
		(pod.SecurityContext != nil && pod.SecurityContext.RunAsNonRoot != nil && *pod.SecurityContext.RunAsNonRoot)
	if !runAsNonRoot {
		t.Error("runAsNonRoot must be true")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem must be true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation must be false")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("privileged must not be set")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("capabilities = %+v, want drop [ALL] and nothing added", sc.Capabilities)
	}
	for where, sp := range map[string]*corev1.SeccompProfile{"container": sc.SeccompProfile, "pod": podSeccomp(pod)} {
		if sp == nil || sp.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s seccompProfile = %+v, want RuntimeDefault", where, sp)
		}
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Error("no host namespaces")
	}
	for _, v := range pod.Volumes {
		if v.ConfigMap == nil && v.Secret == nil && v.EmptyDir == nil && v.Projected == nil {
			t.Errorf("volume %s: only configMap, secret, emptyDir and projected volumes are expected", v.Name)
		}
	}

	// Spreading: anti-affinity preferring other nodes, and topology spread constraints, all
	// selecting this Deployment's pods.
	aff := pod.Affinity
	if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		t.Error("want preferred pod anti-affinity")
	} else {
		for _, w := range aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			term := w.PodAffinityTerm
			s, err := metav1LabelSelector(term.LabelSelector)
			if term.TopologyKey != "kubernetes.io/hostname" || err != nil || !s.Matches(podLabels(dep)) {
				t.Errorf("anti-affinity term %+v: want topologyKey kubernetes.io/hostname selecting the server pods", term)
			}
		}
		if len(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 0 {
			t.Error("anti-affinity must be preferred, not required: a one-node cluster must still run the BMC")
		}
	}
	if len(pod.TopologySpreadConstraints) == 0 {
		t.Error("want topologySpreadConstraints")
	}
	keys := map[string]bool{}
	for _, c := range pod.TopologySpreadConstraints {
		keys[c.TopologyKey] = true
		s, err := metav1LabelSelector(c.LabelSelector)
		if err != nil || !s.Matches(podLabels(dep)) || c.MaxSkew != 1 {
			t.Errorf("topology spread %+v: want maxSkew 1 selecting the server pods", c)
		}
		if c.WhenUnsatisfiable != corev1.ScheduleAnyway {
			t.Errorf("topology spread on %s: want ScheduleAnyway (small clusters must still schedule)", c.TopologyKey)
		}
	}
	if !keys["kubernetes.io/hostname"] {
		t.Error("want a topology spread constraint over kubernetes.io/hostname")
	}
}

func podSeccomp(pod corev1.PodSpec) *corev1.SeccompProfile {
	if pod.SecurityContext == nil {
		return nil
	}
	return pod.SecurityContext.SeccompProfile
}

// resolvePort turns a named or numbered port into the container port number.
func resolvePort(c *corev1.Container, p intstr.IntOrString) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	return -1
}

// checkRBAC compares every grant with expectedRBAC and checks that the bindings give it to the
// Deployment's service account, in the namespace of each Role.
func checkRBAC(t *testing.T, objs objects, dep *appsv1.Deployment) {
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding"} {
		if n := len(objs.ofKind(kind)); n != 0 {
			t.Errorf("%d %s objects: kubevirt-redfish needs none", n, kind)
		}
	}
	got := map[string]map[string][]string{}
	for _, u := range objs.ofKind("Role") {
		var role rbacv1.Role
		toTyped(t, u, &role)
		if got[role.Namespace] != nil {
			t.Errorf("more than one Role in %s", role.Namespace)
		}
		got[role.Namespace] = map[string][]string{}
		for _, rule := range role.Rules {
			if len(rule.ResourceNames) != 0 || len(rule.NonResourceURLs) != 0 {
				t.Errorf("Role %s/%s: unexpected resourceNames/nonResourceURLs in %+v", role.Namespace, role.Name, rule)
			}
			for _, g := range rule.APIGroups {
				for _, r := range rule.Resources {
					for _, v := range rule.Verbs {
						if g == "*" || r == "*" || v == "*" {
							t.Errorf("Role %s/%s: wildcard in %+v", role.Namespace, role.Name, rule)
						}
						key := g + "/" + r
						if !slices.Contains(got[role.Namespace][key], v) {
							got[role.Namespace][key] = append(got[role.Namespace][key], v)
						}
					}
				}
			}
		}
	}
	norm := func(m map[string]map[string][]string) string {
		var lines []string
		for _, ns := range sortedKeys(m) {
			for _, res := range sortedKeys(m[ns]) {
				vs := slices.Clone(m[ns][res])
				sort.Strings(vs)
				lines = append(lines, fmt.Sprintf("%s %s: %s", ns, res, strings.Join(vs, ",")))
			}
		}
		return strings.Join(lines, "\n")
	}
	if g, w := norm(got), norm(expectedRBAC); g != w {
		t.Errorf("RBAC grants:\n--- got\n%s\n--- want\n%s", g, w)
	}

	bound := map[string]bool{}
	for _, u := range objs.ofKind("RoleBinding") {
		var rb rbacv1.RoleBinding
		toTyped(t, u, &rb)
		if rb.RoleRef.Kind != "Role" || rb.RoleRef.APIGroup != rbacv1.GroupName {
			t.Errorf("RoleBinding %s/%s must bind a Role, not %+v", rb.Namespace, rb.Name, rb.RoleRef)
		}
		if _, ok := got[rb.Namespace]; !ok {
			t.Errorf("RoleBinding %s/%s binds a Role that is not in its namespace", rb.Namespace, rb.Name)
		}
		roleName := ""
		for _, u := range objs.ofKind("Role") {
			if u.GetNamespace() == rb.Namespace {
				roleName = u.GetName()
			}
		}
		if rb.RoleRef.Name != roleName {
			t.Errorf("RoleBinding %s/%s refers to Role %q, the namespace has %q", rb.Namespace, rb.Name, rb.RoleRef.Name, roleName)
		}
		want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: dep.Spec.Template.Spec.ServiceAccountName, Namespace: dep.Namespace}}
		if !reflect.DeepEqual(rb.Subjects, want) {
			t.Errorf("RoleBinding %s/%s subjects = %+v, want %+v", rb.Namespace, rb.Name, rb.Subjects, want)
		}
		bound[rb.Namespace] = true
	}
	sa := objs.one(t, "ServiceAccount")
	if sa.GetNamespace() != dep.Namespace || sa.GetName() != dep.Spec.Template.Spec.ServiceAccountName {
		t.Errorf("ServiceAccount %s/%s is not the Deployment's", sa.GetNamespace(), sa.GetName())
	}
	for ns := range got {
		if !bound[ns] {
			t.Errorf("the Role in %s is not bound", ns)
		}
	}
}

// mountedFiles maps every file path the container sees from ConfigMaps and Secrets to its
// source ("configmap/<name>/<key>" or "secret/<name>/<key>"), using the rendered objects for
// the keys (the TLS Secret is not rendered: its keys are the kubernetes.io/tls ones).
func mountedFiles(t *testing.T, objs objects, dep *appsv1.Deployment) map[string]string {
	keysOf := func(kind, name string) []string {
		if kind == "Secret" && name == tlsSecret {
			return []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey}
		}
		for _, o := range objs.ofKind(kind) {
			if o.GetName() == name && o.GetNamespace() == dep.Namespace {
				var keys []string
				for _, field := range []string{"data", "stringData"} {
					m, _, _ := unstructured.NestedMap(o.Object, field)
					keys = append(keys, sortedKeys(m)...)
				}
				return keys
			}
		}
		t.Errorf("the Deployment mounts %s %s, which is not rendered", kind, name)
		return nil
	}
	vols := map[string]corev1.Volume{}
	for _, v := range dep.Spec.Template.Spec.Volumes {
		vols[v.Name] = v
	}
	files := map[string]string{}
	for _, m := range container(t, dep).VolumeMounts {
		v, ok := vols[m.Name]
		if !ok {
			t.Errorf("volumeMount %s has no volume", m.Name)
			continue
		}
		var kind, name string
		var items []corev1.KeyToPath
		switch {
		case v.ConfigMap != nil:
			kind, name, items = "ConfigMap", v.ConfigMap.Name, v.ConfigMap.Items
		case v.Secret != nil:
			kind, name, items = "Secret", v.Secret.SecretName, v.Secret.Items
		default:
			continue
		}
		paths := map[string]string{} // path in the volume -> key
		if len(items) > 0 {
			for _, it := range items {
				paths[it.Path] = it.Key
			}
		} else {
			for _, k := range keysOf(kind, name) {
				paths[k] = k
			}
		}
		src := strings.ToLower(kind) + "/" + name + "/"
		if m.SubPath != "" {
			if key, ok := paths[m.SubPath]; ok {
				files[m.MountPath] = src + key
			} else {
				t.Errorf("volumeMount %s: subPath %q is not a key of %s %s", m.Name, m.SubPath, kind, name)
			}
			continue
		}
		for p, key := range paths {
			files[filepath.Join(m.MountPath, p)] = src + key
		}
	}
	return files
}

// checkConfig loads the rendered configuration with the server's own loader, with the
// passwords the rendered Secret provides, and checks that every file it names is mounted.
func checkConfig(t *testing.T, objs objects, dep *appsv1.Deployment) {
	cm := objs.one(t, "ConfigMap")
	data, ok, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
	if !ok {
		t.Fatal("the ConfigMap has no config.yaml")
	}
	files := mountedFiles(t, objs, dep)
	cmSource := "configmap/" + cm.GetName() + "/config.yaml"
	if src := files["/etc/kubevirt-redfish/config.yaml"]; src != cmSource {
		t.Errorf("/etc/kubevirt-redfish/config.yaml is mounted from %q, want %q", src, cmSource)
	}

	var f config.File
	if err := unmarshalYAMLStrict([]byte(data), &f); err != nil {
		t.Fatalf("config.yaml: %v", err)
	}
	if files[f.TLS.CertFile] != "secret/"+tlsSecret+"/tls.crt" || files[f.TLS.KeyFile] != "secret/"+tlsSecret+"/tls.key" {
		t.Errorf("tls %s / %s are not mounted from Secret %s (mounted: %v)", f.TLS.CertFile, f.TLS.KeyFile, tlsSecret, files)
	}

	// Materialize the credentials Secret where the config expects it, under a temp dir.
	secret := objs.one(t, "Secret")
	if secret.GetName() != credsSecret {
		t.Fatalf("the rendered Secret is %s, want %s", secret.GetName(), credsSecret)
	}
	passwords, _, _ := unstructured.NestedStringMap(secret.Object, "stringData")
	const mountDir = "/etc/kubevirt-redfish/credentials/"
	tmp := t.TempDir()
	for _, u := range f.Users {
		if u.PasswordFile == "" {
			t.Errorf("user %s: the deployment reads passwords from files (passwordFile)", u.Username)
			continue
		}
		src := files[u.PasswordFile]
		key, ok := strings.CutPrefix(src, "secret/"+credsSecret+"/")
		if !ok || !strings.HasPrefix(u.PasswordFile, mountDir) {
			t.Errorf("user %s: passwordFile %s is not mounted from Secret %s", u.Username, u.PasswordFile, credsSecret)
			continue
		}
		if !strings.Contains(passwords[key], "CHANGE-ME") {
			t.Errorf("Secret %s key %s: example passwords must be marked CHANGE-ME", credsSecret, key)
		}
		if err := os.WriteFile(filepath.Join(tmp, key), []byte(passwords[key]+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Parse([]byte(strings.ReplaceAll(data, mountDir, tmp+"/")))
	if err != nil {
		t.Fatalf("config.Parse of the deployed config.yaml: %v", err)
	}
	if cfg.Listen != fmt.Sprintf("0.0.0.0:%d", servingPort) {
		t.Errorf("listen = %q, want 0.0.0.0:%d", cfg.Listen, servingPort)
	}

	// Every allowlisted namespace has the tenant Role, and no Role grants more namespaces.
	roleNS := map[string]bool{}
	for _, r := range objs.ofKind("Role") {
		if r.GetNamespace() != serverNS {
			roleNS[r.GetNamespace()] = true
		}
	}
	allow := map[string]bool{}
	for _, ns := range cfg.Namespaces() {
		allow[ns] = true
	}
	if !reflect.DeepEqual(roleNS, allow) {
		t.Errorf("namespaces with a tenant Role %v != allowlisted namespaces %v", sortedKeys(roleNS), sortedKeys(allow))
	}
	e := cfg.Allowlist[0]
	if e.Namespace != tenantNS || e.Selector == nil || e.Selector.String() != "redfish.kubevirt.io/expose=true" {
		t.Errorf("allowlist[0] = %s %v, want %s with selector redfish.kubevirt.io/expose=true", e.Namespace, e.Selector, tenantNS)
	}
}

func checkService(t *testing.T, objs objects, dep *appsv1.Deployment) {
	var svc corev1.Service
	toTyped(t, objs.one(t, "Service"), &svc)
	if svc.Namespace != serverNS || svc.Name != serverName {
		t.Errorf("Service is %s/%s", svc.Namespace, svc.Name)
	}
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels(dep)) || len(svc.Spec.Selector) == 0 {
		t.Errorf("Service selector %v does not select the server pods %v", svc.Spec.Selector, podLabels(dep))
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != servingPort || resolvePort(container(t, dep), svc.Spec.Ports[0].TargetPort) != servingPort {
		t.Errorf("Service ports = %+v, want %d -> container port %d", svc.Spec.Ports, servingPort, servingPort)
	}
}

func checkPDB(t *testing.T, objs objects, dep *appsv1.Deployment) {
	var pdb policyv1.PodDisruptionBudget
	toTyped(t, objs.one(t, "PodDisruptionBudget"), &pdb)
	if pdb.Namespace != serverNS || pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.MaxUnavailable != nil {
		t.Errorf("PDB %s/%s: minAvailable %v maxUnavailable %v, want minAvailable 1", pdb.Namespace, pdb.Name, pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable)
	}
	if s, err := metav1LabelSelector(pdb.Spec.Selector); err != nil || !s.Matches(podLabels(dep)) {
		t.Errorf("PDB selector %v does not select the server pods", pdb.Spec.Selector)
	}
}

func checkNetworkPolicy(t *testing.T, objs objects, dep *appsv1.Deployment) {
	var np networkingv1.NetworkPolicy
	toTyped(t, objs.one(t, "NetworkPolicy"), &np)
	if s, err := metav1LabelSelector(&np.Spec.PodSelector); err != nil || s.Empty() || !s.Matches(podLabels(dep)) {
		t.Errorf("NetworkPolicy podSelector %v does not select (only) the server pods", np.Spec.PodSelector)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("policyTypes = %v, want [Ingress] (egress must reach the apiserver)", np.Spec.PolicyTypes)
	}
	if len(np.Spec.Ingress) == 0 {
		t.Fatal("no ingress rule: nothing could reach the server")
	}
	for _, rule := range np.Spec.Ingress {
		if len(rule.Ports) == 0 {
			t.Error("an ingress rule without ports allows every port")
		}
		for _, p := range rule.Ports {
			if p.Port == nil || resolvePort(container(t, dep), *p.Port) != servingPort || p.EndPort != nil ||
				(p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP) {
				t.Errorf("ingress port %+v: want TCP %d only", p, servingPort)
			}
		}
	}
}

// tlsVolumeSecret is the Secret the pods read their serving certificate from.
func tlsVolumeSecret(t *testing.T, dep *appsv1.Deployment) string {
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == tlsSecret {
			return tlsSecret
		}
	}
	t.Fatalf("the pods do not mount Secret %s", tlsSecret)
	return ""
}

func checkOpenShift(t *testing.T, objs objects, dep *appsv1.Deployment) {
	svc := objs.one(t, "Service")
	if got := svc.GetAnnotations()["service.beta.openshift.io/serving-cert-secret-name"]; got != tlsVolumeSecret(t, dep) {
		t.Errorf("Service serving-cert-secret-name = %q, want %q (the Secret the pods mount)", got, tlsSecret)
	}
	route := objs.one(t, "Route")
	if route.GetAPIVersion() != "route.openshift.io/v1" || route.GetNamespace() != serverNS {
		t.Errorf("Route is %s in %s", route.GetAPIVersion(), route.GetNamespace())
	}
	for field, want := range map[string]string{
		"spec.to.kind":                           "Service",
		"spec.to.name":                           svc.GetName(),
		"spec.port.targetPort":                   "https",
		"spec.tls.termination":                   "reencrypt",
		"spec.tls.insecureEdgeTerminationPolicy": "None",
		"spec.subdomain":                         "kubevirt-redfish",
	} {
		got, _, _ := unstructured.NestedString(route.Object, strings.Split(field, ".")...)
		if got != want {
			t.Errorf("Route %s = %q, want %q", field, got, want)
		}
	}
	// Reencrypt relies on the router trusting the service CA: no destinationCACertificate.
	if _, found, _ := unstructured.NestedFieldNoCopy(route.Object, "spec", "tls", "destinationCACertificate"); found {
		t.Error("Route: leave destinationCACertificate empty so the router uses the service CA")
	}
	// restricted-v2 assigns UID, GID and fsGroup itself.
	if psc := dep.Spec.Template.Spec.SecurityContext; psc == nil || psc.RunAsUser != nil || psc.RunAsGroup != nil || psc.FSGroup != nil {
		t.Errorf("OpenShift pod securityContext = %+v: want no runAsUser/runAsGroup/fsGroup", psc)
	}
}

func checkKubernetes(t *testing.T, objs objects, dep *appsv1.Deployment) {
	if psc := dep.Spec.Template.Spec.SecurityContext; psc == nil || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
		psc.FSGroup == nil || *psc.FSGroup != 65532 {
		t.Errorf("pod securityContext = %+v: want runAsUser and fsGroup 65532 (the image user; makes the 0440 Secrets readable)", psc)
	}
	var ing networkingv1.Ingress
	toTyped(t, objs.one(t, "Ingress"), &ing)
	if ing.Annotations["nginx.ingress.kubernetes.io/ssl-passthrough"] != "true" ||
		ing.Annotations["nginx.ingress.kubernetes.io/backend-protocol"] != "HTTPS" {
		t.Errorf("Ingress annotations = %v: want ssl-passthrough and an HTTPS backend", ing.Annotations)
	}
	if len(ing.Spec.TLS) != 1 || ing.Spec.TLS[0].SecretName != tlsVolumeSecret(t, dep) {
		t.Errorf("Ingress tls = %+v, want secretName %s", ing.Spec.TLS, tlsSecret)
	}
	if len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].HTTP == nil || len(ing.Spec.Rules[0].HTTP.Paths) != 1 {
		t.Fatalf("Ingress rules = %+v, want one host with one path", ing.Spec.Rules)
	}
	rule := ing.Spec.Rules[0]
	if !slices.Contains(ing.Spec.TLS[0].Hosts, rule.Host) {
		t.Errorf("Ingress host %s is not in tls.hosts %v", rule.Host, ing.Spec.TLS[0].Hosts)
	}
	b := rule.HTTP.Paths[0].Backend.Service
	if b == nil || b.Name != serverName || (b.Port.Name != "https" && b.Port.Number != servingPort) {
		t.Errorf("Ingress backend = %+v, want Service %s port https", b, serverName)
	}
}

// TestImageOverride: the image can be pinned from an overlay with kustomize `images:`.
func TestImageOverride(t *testing.T) {
	for _, overlay := range overlays {
		objs := kustomizeBuildInline(t, func(ref func(string) string) string {
			return fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - name: %s
    newName: registry.example.com/mirror/kubevirt-redfish
    newTag: v1.2.3
`, ref("deploy/overlays/"+overlay), imageName)
		})
		if got := container(t, deployment(t, objs)).Image; got != "registry.example.com/mirror/kubevirt-redfish:v1.2.3" {
			t.Errorf("%s: image after override = %q", overlay, got)
		}
	}
}

// TestCertManagerComponent: the optional component issues exactly the Secret the pods mount,
// for the Ingress host.
func TestCertManagerComponent(t *testing.T) {
	objs := kustomizeBuildInline(t, func(ref func(string) string) string {
		return fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
components:
  - %s
`, ref("deploy/overlays/kubernetes"), ref("deploy/components/cert-manager"))
	})
	var ing networkingv1.Ingress
	toTyped(t, objs.one(t, "Ingress"), &ing)
	var serving *unstructured.Unstructured
	for _, c := range objs.ofKind("Certificate") {
		if s, _, _ := unstructured.NestedString(c.Object, "spec", "secretName"); s == tlsSecret {
			serving = c
		}
	}
	if serving == nil {
		t.Fatalf("no Certificate writes Secret %s", tlsSecret)
	}
	if serving.GetNamespace() != serverNS {
		t.Errorf("Certificate in %q, want %q", serving.GetNamespace(), serverNS)
	}
	dns, _, _ := unstructured.NestedStringSlice(serving.Object, "spec", "dnsNames")
	for _, want := range []string{ing.Spec.Rules[0].Host, serverName + "." + serverNS + ".svc"} {
		if !slices.Contains(dns, want) {
			t.Errorf("Certificate dnsNames %v lack %s", dns, want)
		}
	}
	issuer, _, _ := unstructured.NestedString(serving.Object, "spec", "issuerRef", "name")
	found := false
	for _, i := range objs.ofKind("Issuer") {
		found = found || (i.GetName() == issuer && i.GetNamespace() == serverNS)
	}
	if !found {
		t.Errorf("Certificate issuer %q is not rendered", issuer)
	}
}
