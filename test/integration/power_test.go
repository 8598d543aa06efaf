package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubevirt-redfish/kubevirt-redfish/test/stack"
)

// Every reset type, checked by reading the VM and VMI back from the apiserver.
func TestPowerActionsAgainstAPIServer(t *testing.T) {
	s := stack.Start(t, stack.Options{})
	c := client(t, s.URL, stack.Admin)
	const id, ns, name = "tenant-a.cp-0", "tenant-a", "cp-0"
	vmiUID := func() types.UID {
		if vmi := apiVMI(t, s, ns, name); vmi != nil {
			return vmi.UID
		}
		return ""
	}

	assert.Equal(t, "Off", c.powerState(id))
	assert.Equal(t, "Halted", runStrategy(apiVM(t, s, ns, name)))

	c.reset(id, "On")
	assert.Equal(t, "Once", runStrategy(apiVM(t, s, ns, name)), "On means runStrategy Once")
	c.waitPower(id, "On")
	first := vmiUID()
	require.NotEmpty(t, first)

	c.reset(id, "On")
	assert.Equal(t, "On", c.powerState(id), "On when on is harmless")
	assert.Equal(t, first, vmiUID(), "On when on must not restart")

	c.reset(id, "ForceRestart")
	eventually(t, "a new VMI after ForceRestart", func() bool { u := vmiUID(); return u != "" && u != first })
	c.waitPower(id, "On")
	second := vmiUID()

	c.reset(id, "GracefulRestart")
	eventually(t, "a new VMI after GracefulRestart", func() bool { u := vmiUID(); return u != "" && u != second })
	c.waitPower(id, "On")

	c.reset(id, "GracefulShutdown")
	assert.Equal(t, "Halted", runStrategy(apiVM(t, s, ns, name)))
	assert.Equal(t, "PoweringOff", c.powerState(id), "the guest is given time to shut down")
	c.waitPower(id, "Off")
	assert.Nil(t, apiVMI(t, s, ns, name))

	c.reset(id, "GracefulShutdown")
	assert.Equal(t, "Off", c.powerState(id), "GracefulShutdown when off is harmless")

	c.reset(id, "On")
	c.waitPower(id, "On")
	c.reset(id, "ForceOff")
	assert.Equal(t, "Halted", runStrategy(apiVM(t, s, ns, name)))
	eventually(t, "the VMI deleted at once by ForceOff", func() bool { return apiVMI(t, s, ns, name) == nil })
	c.waitPower(id, "Off")

	c.reset(id, "PushPowerButton")
	c.waitPower(id, "On")
	c.reset(id, "PushPowerButton")
	c.waitPower(id, "Off")
}

// A shutdown from inside the guest must leave the machine Off (the Ironic deploy agent powers
// itself off); a reboot from inside keeps the same VMI.
func TestGuestInitiatedShutdownAndReboot(t *testing.T) {
	s := stack.Start(t, stack.Options{})
	c := client(t, s.URL, stack.Admin)
	const id, ns, name = "tenant-a.cp-1", "tenant-a", "cp-1"
	ctx := context.Background()

	c.reset(id, "On")
	c.waitPower(id, "On")
	before := apiVMI(t, s, ns, name).UID
	require.NoError(t, s.Sim.GuestReboot(ctx, ns, name))
	time.Sleep(500 * time.Millisecond)
	assert.Equal(t, before, apiVMI(t, s, ns, name).UID, "a guest reboot keeps the VMI")
	assert.Equal(t, "On", c.powerState(id))

	require.NoError(t, s.Sim.GuestShutdown(ctx, ns, name))
	c.waitPower(id, "Off")
	time.Sleep(time.Second) // longer than a simulated boot: nothing may restart it
	assert.Equal(t, "Off", c.powerState(id))
	assert.Equal(t, before, apiVMI(t, s, ns, name).UID, "no new VMI after a guest shutdown")

	c.reset(id, "On")
	c.waitPower(id, "On")
	assert.NotEqual(t, before, apiVMI(t, s, ns, name).UID)
}
