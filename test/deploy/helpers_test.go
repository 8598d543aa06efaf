// Package deploy tests the deployment manifests (deploy/), the examples (examples/) and how
// they fit together: what kustomize renders, what the server's config loader accepts, what
// Metal3 makes of the BMC addresses, and (dryrun_test.go) what a real kube-apiserver with the
// real KubeVirt CRDs accepts.
package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"
)

// Names shared by the manifests; the tests check that every file agrees with them.
const (
	serverNS    = "kubevirt-redfish"
	serverName  = "kubevirt-redfish"
	imageName   = "quay.io/kubevirt-redfish/kubevirt-redfish"
	tlsSecret   = "kubevirt-redfish-tls"
	credsSecret = "kubevirt-redfish-credentials"
	tenantNS    = "tenant-a"
	servingPort = 8443
)

// repoRoot is the module root, found from this file's location so that tests work from any
// working directory.
func repoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test source")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

func repoPath(t testing.TB, parts ...string) string {
	return filepath.Join(append([]string{repoRoot(t)}, parts...)...)
}

// kustomizeBuild renders a kustomization directory like `kustomize build dir`.
func kustomizeBuild(t testing.TB, dir string) objects {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var out objects
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatalf("kustomize build %s: %s: %v", dir, r.CurId(), err)
		}
		u, err := yamlToUnstructured(y)
		if err != nil {
			t.Fatalf("kustomize build %s: %s: %v", dir, r.CurId(), err)
		}
		out = append(out, u)
	}
	return out
}

// kustomizeBuildInline writes a kustomization.yaml into a fresh temp directory and builds it.
// Kustomize accepts only relative references: kustomization gets a function that turns a
// repository path (e.g. "deploy/overlays/openshift") into one relative to that directory.
func kustomizeBuildInline(t testing.TB, kustomization func(ref func(repoRel string) string) string) objects {
	t.Helper()
	dir := t.TempDir()
	ref := func(repoRel string) string {
		rel, err := filepath.Rel(dir, filepath.Join(repoRoot(t), repoRel))
		if err != nil {
			t.Fatal(err)
		}
		return rel
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization(ref)), 0o644); err != nil {
		t.Fatal(err)
	}
	return kustomizeBuild(t, dir)
}

func yamlToUnstructured(y []byte) (*unstructured.Unstructured, error) {
	j, err := sigsyaml.YAMLToJSON(y)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		return nil, err
	}
	return u, nil
}

// toTyped converts an object to a typed API struct, rejecting fields the type does not have,
// so a misspelt or misplaced field in a manifest fails here instead of being dropped.
func toTyped(t testing.TB, u *unstructured.Unstructured, out any) {
	t.Helper()
	j, err := u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := sigsyaml.UnmarshalStrict(j, out); err != nil {
		t.Fatalf("%s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
}

// objects is a rendered set of manifests.
type objects []*unstructured.Unstructured

func (objs objects) ofKind(kind string) objects {
	var out objects
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// one returns the only object of a kind, failing when there are none or several.
func (objs objects) one(t testing.TB, kind string) *unstructured.Unstructured {
	t.Helper()
	got := objs.ofKind(kind)
	if len(got) != 1 {
		t.Fatalf("want exactly one %s, got %d", kind, len(got))
	}
	return got[0]
}

func (objs objects) kindCounts() map[string]int {
	c := map[string]int{}
	for _, o := range objs {
		c[o.GetKind()]++
	}
	return c
}

// yamlDocs decodes every document of a YAML stream into generic values (nil documents, e.g. a
// file of comments, are skipped). yaml.v3 rejects duplicate keys and malformed YAML.
func yamlDocs(data []byte) ([]map[string]any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []map[string]any
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
}

// readYAMLDocs reads a file of one or more YAML documents.
func readYAMLDocs(t testing.TB, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := yamlDocs(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(docs) == 0 {
		t.Fatalf("%s: no YAML documents", path)
	}
	return docs
}

// readObjects reads a file of Kubernetes objects.
func readObjects(t testing.TB, path string) objects {
	t.Helper()
	var out objects
	for i, d := range readYAMLDocs(t, path) {
		// Round-trip through JSON so numbers and maps have the types unstructured expects.
		y, err := yaml.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		u, err := yamlToUnstructured(y)
		if err != nil {
			t.Fatalf("%s, document %d: %v", path, i, err)
		}
		if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
			t.Fatalf("%s, document %d: apiVersion, kind and metadata.name are required", path, i)
		}
		out = append(out, u)
	}
	return out
}

// dig walks nested maps and lists: dig(doc, "spec", "nodes", 0, "bmcAddress").
func dig(v any, keys ...any) (any, error) {
	for i, k := range keys {
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: not a map", fieldPath(keys[:i]))
			}
			if v, ok = m[k]; !ok {
				return nil, fmt.Errorf("%s: missing", fieldPath(keys[:i+1]))
			}
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil, fmt.Errorf("%s: no such list item", fieldPath(keys[:i+1]))
			}
			v = l[k]
		}
	}
	return v, nil
}

func fieldPath(keys []any) string {
	var b strings.Builder
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			b.WriteString("." + k)
		case int:
			fmt.Fprintf(&b, "[%d]", k)
		}
	}
	return b.String()
}

func str(t testing.TB, v any, keys ...any) string {
	t.Helper()
	got, err := dig(v, keys...)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := got.(string)
	if !ok {
		t.Fatalf("%s: want a string, got %T (%v)", fieldPath(keys), got, got)
	}
	return s
}

func list(t testing.TB, v any, keys ...any) []any {
	t.Helper()
	got, err := dig(v, keys...)
	if err != nil {
		t.Fatal(err)
	}
	l, ok := got.([]any)
	if !ok {
		t.Fatalf("%s: want a list, got %T", fieldPath(keys), got)
	}
	return l
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// metav1LabelSelector converts an API label selector; a nil selector matches nothing.
func metav1LabelSelector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Nothing(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// unmarshalYAMLStrict decodes one YAML document, rejecting unknown keys (as pkg/config does).
func unmarshalYAMLStrict(data []byte, out any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	return dec.Decode(out)
}
