package preflight

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The command's usage and connection errors; the runs against a cluster are in
// test/preflight.
func TestCommandErrors(t *testing.T) {
	dir := t.TempDir()
	unreachable := filepath.Join(dir, "kubeconfig")
	// Port 1 on localhost refuses connections.
	assert.NoError(t, os.WriteFile(unreachable, []byte(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:1
    insecure-skip-tls-verify: true
users:
- name: u
  user:
    token: x
contexts:
- name: c
  context:
    cluster: c
    user: u
current-context: c
`), 0o600))
	t.Setenv("KUBECONFIG", "")

	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string // prefix
	}{
		{"no namespace", nil, ExitUsage, "kubevirt-redfish preflight: --namespace is required (see --help)\n"},
		{"bad output", []string{"-n", "x", "-o", "yaml"}, ExitUsage, "kubevirt-redfish preflight: -o must be table or json, not \"yaml\"\n"},
		{"stray argument", []string{"-n", "x", "extra"}, ExitUsage, "kubevirt-redfish preflight: unexpected argument \"extra\" (see --help)\n"},
		{"unknown flag", []string{"--nope"}, ExitUsage, "flag provided but not defined: -nope\n"},
		{"help", []string{"--help"}, ExitOK, "Usage: kubevirt-redfish preflight --namespace NS [--selector LABELS] [--kubeconfig PATH] [-o table|json]\n"},
		{"missing kubeconfig", []string{"-n", "x", "--kubeconfig", filepath.Join(dir, "absent")}, ExitUsage, "kubevirt-redfish preflight: "},
		{"unreachable cluster", []string{"-n", "x", "--kubeconfig", unreachable, "--timeout", "5s"}, ExitUsage,
			"kubevirt-redfish preflight: listing VirtualMachines in x: "},
		{"bad selector", []string{"-n", "x", "--kubeconfig", unreachable, "-l", "a in (b"}, ExitUsage,
			"kubevirt-redfish preflight: invalid selector \"a in (b\": "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Command(t.Context(), tc.args, &stdout, &stderr)
			assert.Equal(t, tc.code, code, stderr.String())
			assert.Empty(t, stdout.String())
			assert.True(t, strings.HasPrefix(stderr.String(), tc.stderr), "stderr: %s", stderr.String())
		})
	}
}
