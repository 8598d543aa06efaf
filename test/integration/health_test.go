package integration

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/stack"
)

func powerOnAll(t *testing.T, c rf, ids ...string) {
	t.Helper()
	for _, id := range ids {
		c.reset(id, "On")
		c.waitPower(id, "On")
	}
}

// Three control-plane VMs squeezed onto one hosting node: each reports a Warning that names the
// node and its neighbours, and the node's chassis contains all three.
func TestPlacementViolationAndNodeCorrelation(t *testing.T) {
	s := stack.Start(t, stack.Options{Sim: sim.Options{Nodes: []string{"node-1"}}})
	c := client(t, s.URL, stack.Admin)
	ids := []string{"tenant-a.cp-0", "tenant-a.cp-1", "tenant-a.cp-2"}
	powerOnAll(t, c, ids...)

	for _, id := range ids {
		st := c.get("/redfish/v1/Systems/" + id)["Status"].(map[string]any)
		assert.Equal(t, "Warning", st["Health"], id)
		conds := st["Conditions"].([]any)
		require.Len(t, conds, 1)
		msg := conds[0].(map[string]any)["Message"].(string)
		assert.Contains(t, msg, "shares hosting node node-1")
		chassis := c.get("/redfish/v1/Chassis/" + id)
		assert.Equal(t, "/redfish/v1/Chassis/Node-node-1", chassis["Links"].(map[string]any)["ContainedBy"].(map[string]any)["@odata.id"])
	}
	node := c.get("/redfish/v1/Chassis/Node-node-1")
	var contains []string
	for _, l := range node["Links"].(map[string]any)["Contains"].([]any) {
		contains = append(contains, l.(map[string]any)["@odata.id"].(string))
	}
	assert.Equal(t, []string{"/redfish/v1/Chassis/tenant-a.cp-0", "/redfish/v1/Chassis/tenant-a.cp-1", "/redfish/v1/Chassis/tenant-a.cp-2"}, contains)

	// Another tenant sees neither the node (it runs nothing of theirs) nor tenant-a's VMs.
	b := client(t, s.URL, stack.TenantBAdmin)
	code, _ := b.do(http.MethodGet, "/redfish/v1/Chassis/Node-node-1", nil)
	assert.Equal(t, http.StatusNotFound, code)

	// The node shows in the metrics, so alerts can name the failure domain.
	resp, err := http.Get(s.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	assert.Contains(t, string(body), `kubevirt_redfish_system_info{health="Warning",namespace="tenant-a",node="node-1",power_state="On",system="tenant-a.cp-0"} 1`)

	// Powered off, a VM leaves the node and its warning clears for the others.
	c.reset("tenant-a.cp-2", "ForceOff")
	c.waitPower("tenant-a.cp-2", "Off")
	st := c.get("/redfish/v1/Systems/tenant-a.cp-2")["Status"].(map[string]any)
	assert.Equal(t, "OK", st["Health"])
	_, linked := c.get("/redfish/v1/Chassis/tenant-a.cp-2")["Links"].(map[string]any)["ContainedBy"]
	assert.False(t, linked, "a VM that is off runs on no node")
	msg := c.get("/redfish/v1/Systems/tenant-a.cp-0")["Status"].(map[string]any)["Conditions"].([]any)[0].(map[string]any)["Message"].(string)
	assert.True(t, strings.HasSuffix(msg, "with cp-1; losing that node loses etcd quorum."), msg)
}

// Spread over three nodes, the same VMs are healthy, each on its own node.
func TestHealthyPlacement(t *testing.T) {
	s := stack.Start(t, stack.Options{})
	c := client(t, s.URL, stack.Admin)
	ids := []string{"tenant-a.cp-0", "tenant-a.cp-1", "tenant-a.cp-2"}
	powerOnAll(t, c, ids...)
	nodes := map[string]bool{}
	for _, id := range ids {
		assert.Equal(t, "OK", c.get("/redfish/v1/Systems/" + id)["Status"].(map[string]any)["Health"], id)
		nodes[c.get("/redfish/v1/Chassis/" + id)["Links"].(map[string]any)["ContainedBy"].(map[string]any)["@odata.id"].(string)] = true
	}
	assert.Len(t, nodes, 3)
}
