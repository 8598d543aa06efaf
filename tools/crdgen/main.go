// Command crdgen writes the CustomResourceDefinitions that the integration test
// environment (test/testenv) installs into a bare kube-apiserver. The CRDs are
// produced by the same library code the upstream operators use to install them
// (virt-operator for KubeVirt, cdi-operator for CDI), so the schemas the tests
// validate against are exactly those of a real cluster at the pinned versions.
//
// Usage: crdgen -out DIR   (writes one <plural>.<group>.yaml per CRD)
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	cdiresources "kubevirt.io/containerized-data-importer/pkg/operator/resources"
	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/components"
)

func main() {
	out := flag.String("out", "", "directory to write the CRD YAML files into (created if missing)")
	flag.Parse()
	if *out == "" {
		log.Fatal("crdgen: -out is required")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}

	// Only the CRDs the project talks to; add more here when needed.
	gens := []func() (*extv1.CustomResourceDefinition, error){
		components.NewVirtualMachineCrd,
		components.NewVirtualMachineInstanceCrd,
		cdiCrd("datavolume"),
	}
	for _, gen := range gens {
		crd, err := gen()
		if err != nil {
			log.Fatalf("crdgen: %v", err)
		}
		if err := write(*out, crd); err != nil {
			log.Fatalf("crdgen: %v", err)
		}
	}
}

// cdiCrd returns a generator for one of CDI's CRDs. cdi-operator's
// cluster.NewDataVolumeCrd() is just a YAML decode of
// resources.CDICRDs["datavolume"] (controller-gen output embedded in Go); we do
// the same decode here instead of importing the cluster package, because that
// package pulls in CDI's operator utils, which need a newer
// github.com/openshift/api than the one kubevirt v1.8.1 pins (and builds with).
func cdiCrd(key string) func() (*extv1.CustomResourceDefinition, error) {
	return func() (*extv1.CustomResourceDefinition, error) {
		src, ok := cdiresources.CDICRDs[key]
		if !ok {
			return nil, fmt.Errorf("CDI has no embedded CRD %q", key)
		}
		crd := &extv1.CustomResourceDefinition{}
		if err := k8syaml.NewYAMLToJSONDecoder(strings.NewReader(src)).Decode(crd); err != nil {
			return nil, fmt.Errorf("decode CDI CRD %q: %w", key, err)
		}
		return crd, nil
	}
}

func write(dir string, crd *extv1.CustomResourceDefinition) error {
	if crd == nil || crd.Name == "" {
		return fmt.Errorf("generator returned an empty CRD")
	}
	// The generators return typed objects without TypeMeta set.
	crd.APIVersion = "apiextensions.k8s.io/v1"
	crd.Kind = "CustomResourceDefinition"
	// Status is not a struct pointer, so it would always be serialized as an
	// empty stub; the apiserver ignores it on create, drop it for clean files.
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		return err
	}
	delete(obj, "status")
	b, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, crd.Name+".yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "wrote", path)
	return nil
}
