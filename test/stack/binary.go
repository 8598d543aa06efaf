package stack

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

// BuildServer builds cmd/kubevirt-redfish into dir and returns the binary's path; ldflags, when
// not empty, are go build's -ldflags. Building by import path works from any test directory.
func BuildServer(dir, ldflags string) (string, error) {
	bin := filepath.Join(dir, "kubevirt-redfish")
	args := []string{"build", "-o", bin}
	if ldflags != "" {
		args = append(args, "-ldflags", ldflags)
	}
	out, err := exec.Command("go", append(args, "github.com/kubevirt-redfish/kubevirt-redfish/cmd/kubevirt-redfish")...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/kubevirt-redfish: %v\n%s", err, out)
	}
	return bin, nil
}
