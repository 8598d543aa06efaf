package kubevirt

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	virtv1 "kubevirt.io/api/core/v1"
)

// List sorts by namespace and then name without building ids; the result must be exactly the
// order of the ids, also where one namespace is a prefix of another ("a-b." sorts before "a."
// while "a" sorts before "a-b") and names hold dots.
func TestListSortsByID(t *testing.T) {
	nss := []string{"a", "a-b", "ab", "b", "a0"}
	c := NewClient(nil, nss, zap.NewNop())
	names := []string{"x", "cp-0", "cp-0.example.com", "cp-1", "a", "x.y", "cp"}
	running := map[string]bool{}
	for i, ns := range nss {
		for j, name := range names {
			vm := benchVM(ns, name)
			require.NoError(t, c.namespaces[ns].vms.GetStore().Add(vm))
			if (i+j)%2 == 0 {
				require.NoError(t, c.namespaces[ns].vmis.GetStore().Add(benchVMI(vm)))
				running[SystemID(ns, name)] = true
			}
		}
	}
	ms := c.List(func(vm *virtv1.VirtualMachine) bool { return vm.Name != "x" })
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID())
		assert.Equal(t, running[m.ID()], m.VMI != nil, "%s: VMI", m.ID())
		if m.VMI != nil {
			assert.Equal(t, m.VM.Name, m.VMI.Name)
			assert.Equal(t, m.VM.Namespace, m.VMI.Namespace)
		}
		assert.NotNil(t, m.Peers, "%s: Peers", m.ID())
	}
	require.Len(t, ids, len(nss)*(len(names)-1))
	assert.True(t, sort.StringsAreSorted(ids), "%v", ids)
	for _, id := range ids {
		assert.NotContains(t, []string{"a.x", "b.x"}, id, "keep is honoured")
	}
}
