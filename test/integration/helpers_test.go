package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/stack"
)

// rf is a tiny Redfish client for one user against one server.
type rf struct {
	t    *testing.T
	base string
	user string
}

func client(t *testing.T, base, user string) rf { return rf{t, base, user} }

func (c rf) do(method, path string, body any) (int, map[string]any) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(c.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	require.NoError(c.t, err)
	req.SetBasicAuth(c.user, stack.Password)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	var out map[string]any
	if len(raw) > 0 {
		require.NoError(c.t, json.Unmarshal(raw, &out), "body: %s", raw)
	}
	return resp.StatusCode, out
}

func (c rf) get(path string) map[string]any {
	c.t.Helper()
	code, body := c.do(http.MethodGet, path, nil)
	require.Equal(c.t, http.StatusOK, code, "GET %s: %v", path, body)
	return body
}

func (c rf) reset(id, resetType string) {
	c.t.Helper()
	code, body := c.do(http.MethodPost, "/redfish/v1/Systems/"+id+"/Actions/ComputerSystem.Reset", map[string]string{"ResetType": resetType})
	require.Equal(c.t, http.StatusNoContent, code, "%s on %s: %v", resetType, id, body)
}

func (c rf) powerState(id string) string {
	return c.get("/redfish/v1/Systems/" + id)["PowerState"].(string)
}

// waitPower polls like Ironic does until the system reports want.
func (c rf) waitPower(id, want string) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := c.powerState(id)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: PowerState %s, want %s", id, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func boot(body map[string]any) map[string]any { return body["Boot"].(map[string]any) }

// apiVM reads a VM straight from the apiserver (not from any cache).
func apiVM(t *testing.T, s *stack.Stack, ns, name string) *virtv1.VirtualMachine {
	t.Helper()
	u, err := s.Dyn.Resource(kubevirt.VMResource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	vm := &virtv1.VirtualMachine{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, vm))
	return vm
}

// apiVMI reads a VMI from the apiserver; nil when there is none.
func apiVMI(t *testing.T, s *stack.Stack, ns, name string) *virtv1.VirtualMachineInstance {
	t.Helper()
	u, err := s.Dyn.Resource(kubevirt.VMIResource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	vmi := &virtv1.VirtualMachineInstance{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, vmi))
	return vmi
}

func runStrategy(vm *virtv1.VirtualMachine) string { return string(kubevirt.RunStrategy(vm)) }

// eventually polls cond for up to 30 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func mustString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
