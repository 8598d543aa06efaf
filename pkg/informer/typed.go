// Package informer holds what the server's informers share.
package informer

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Typed is an informer transform (cache.TransformFunc): it converts the dynamic client's
// unstructured objects to typed ones once, on arrival, so reads pay no conversion, and drops
// managedFields, which nothing here reads. Anything else (tombstones, objects already
// converted) passes through.
func Typed[T any, PT interface {
	*T
	metav1.Object
}](obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := PT(new(T))
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, err
	}
	out.SetManagedFields(nil)
	return out, nil
}
