package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/stack"
)

// An InsertMedia that died between creating its media DataVolume and patching the VM leaves
// that DataVolume unreferenced, holding a PVC. The leader's sweep deletes it (and the PVC goes
// with it) once it is older than the grace; the media a VM does use stays.
func TestOrphanedMediaDataVolumeIsCollected(t *testing.T) {
	s := stack.Start(t, stack.Options{})
	c := client(t, s.URL, stack.Admin)
	url := stack.NewImageServer(t, 256<<10).URL + "/agent.iso"

	// cp-0 gets its media the normal way: the VM references it.
	insert(t, c, "tenant-a.cp-0", url)
	waitTask(t, c, "cp-0", "Completed")
	kept := kubevirt.MediaOf(kubevirt.Machine{VM: apiVM(t, s, "tenant-a", "cp-0")}).DataVolume
	require.NotEmpty(t, kept)

	// The crash: cp-1's media DataVolume exactly as InsertMedia creates it (labelled, owned by
	// the VM), and the VM never patched.
	ctx := context.Background()
	dvs := s.Dyn.Resource(kubevirt.DataVolumeResource).Namespace("tenant-a")
	orphan := kubevirt.MediaDataVolume(apiVM(t, s, "tenant-a", "cp-1"), url, kubevirt.Storage{Size: resource.MustParse("1Mi")})
	u, err := kubevirt.ToUnstructured(orphan)
	require.NoError(t, err)
	created := time.Now()
	_, err = dvs.Create(ctx, u, metav1.CreateOptions{})
	require.NoError(t, err)

	// A leader whose grace is seconds instead of minutes, so the test need not wait 10 minutes
	// (the apiserver stamps creationTimestamp itself, so age cannot be faked). The stack's own
	// server keeps the default grace and so never takes part.
	const grace = 4 * time.Second
	dyn, err := dynamic.NewForConfig(s.Env.Config)
	require.NoError(t, err)
	core, logs := observer.New(zap.InfoLevel)
	leader := kubevirt.NewClient(dyn, []string{"tenant-a"}, zap.New(core))
	leader.MediaOrphanGrace, leader.SweepInterval = grace, 100*time.Millisecond
	require.NoError(t, leader.Start(s.Ctx))
	go leader.RunBackground(s.Ctx)

	// Younger than the grace it stays: an insert may still be about to patch the VM. The check
	// only holds while less than grace - 1 s has passed (creationTimestamp is truncated to the
	// second), which a normal run easily meets.
	time.Sleep(500 * time.Millisecond) // a few sweeps
	_, err = dvs.Get(ctx, orphan.Name, metav1.GetOptions{})
	if elapsed := time.Since(created); elapsed < grace-time.Second {
		assert.NoError(t, err, "kept while younger than the grace")
	} else {
		t.Logf("%v passed before the check of a young orphan: too slow to tell", elapsed)
	}

	eventually(t, "the unreferenced media DataVolume deleted", func() bool {
		_, err := dvs.Get(ctx, orphan.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	assert.GreaterOrEqual(t, time.Since(created), grace-time.Second, "not deleted before the grace")
	eventually(t, "its PVC deleted with it", func() bool {
		_, err := s.Dyn.Resource(pvcResource).Namespace("tenant-a").Get(ctx, orphan.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	assert.Equal(t, 1, logs.FilterMessage("deleted a media DataVolume its VM does not reference").
		FilterField(zap.String("name", orphan.Name)).FilterField(zap.String("vm", "cp-1")).Len(), "logged once")

	// cp-0's media, older than the grace too by now, is referenced and stays.
	_, err = dvs.Get(ctx, kept, metav1.GetOptions{})
	assert.NoError(t, err, "the media a VM references stays")
	assert.Equal(t, kept, kubevirt.MediaOf(kubevirt.Machine{VM: apiVM(t, s, "tenant-a", "cp-0")}).DataVolume)
	assert.Equal(t, "agent.iso", c.get("/redfish/v1/Systems/tenant-a.cp-0/VirtualMedia/Cd")["ImageName"])
}
