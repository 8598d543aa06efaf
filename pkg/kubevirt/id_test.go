package kubevirt

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSystemIDRoundTrip(t *testing.T) {
	for _, tc := range []struct{ ns, name string }{
		{"tenant-a", "cp-0"},
		{"tenant-a", "cp.0"},
		{"a", "b"},
		{"tenant-b", "node.example.com"},
	} {
		id := SystemID(tc.ns, tc.name)
		ns, name, ok := ParseSystemID(id)
		assert.True(t, ok, id)
		assert.Equal(t, tc.ns, ns, id)
		assert.Equal(t, tc.name, name, id)
	}
}

func TestParseSystemID(t *testing.T) {
	tests := []struct {
		name     string
		id       string
		wantNS   string
		wantName string
		wantOK   bool
	}{
		{"plain", "tenant-a.cp-0", "tenant-a", "cp-0", true},
		{"split at first dot", "tenant-a.cp.0", "tenant-a", "cp.0", true},
		{"vm name with several dots", "ns.worker.rack-1.example", "ns", "worker.rack-1.example", true},
		{"single character parts", "a.b", "a", "b", true},
		{"digits", "0.1", "0", "1", true},
		{"namespace of 63 characters", strings.Repeat("n", 63) + ".vm", strings.Repeat("n", 63), "vm", true},
		{"vm name of 253 characters", "ns." + strings.Repeat("v", 253), "ns", strings.Repeat("v", 253), true},

		{"empty", "", "", "", false},
		{"only a dot", ".", "", "", false},
		{"no dot", "tenant-a", "", "", false},
		{"empty namespace", ".cp-0", "", "", false},
		{"empty name", "tenant-a.", "", "", false},
		{"double dot gives a name starting with a dot", "tenant-a..cp", "", "", false},
		{"name ending with a dot", "tenant-a.cp-0.", "", "", false},
		{"uppercase namespace", "Tenant-A.cp-0", "", "", false},
		{"underscore in namespace", "tenant_a.cp-0", "", "", false},
		{"namespace starting with a dash", "-tenant.cp-0", "", "", false},
		{"namespace ending with a dash", "tenant-.cp-0", "", "", false},
		{"namespace of 64 characters", strings.Repeat("n", 64) + ".vm", "", "", false},
		{"uppercase name", "tenant-a.CP-0", "", "", false},
		{"slash in name", "tenant-a.cp/0", "", "", false},
		{"space in name", "tenant-a.cp 0", "", "", false},
		{"vm name of 254 characters", "ns." + strings.Repeat("v", 254), "", "", false},
		{"percent-encoded garbage", "tenant-a.%2e%2e", "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns, name, ok := ParseSystemID(tc.id)
			assert.Equal(t, tc.wantOK, ok)
			assert.Equal(t, tc.wantNS, ns)
			assert.Equal(t, tc.wantName, name)
		})
	}
}
