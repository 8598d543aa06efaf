package main

import (
	"context"
	"io"
	"os/signal"
	"syscall"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/preflight"
)

// runPreflight is `kubevirt-redfish preflight [flags]`: it checks the control-plane VMs of one
// target cluster against the HA rules and returns the exit code (0 no failure, 1 a rule
// failed, 2 usage or connection error). The work is in pkg/preflight (Command), where the
// tests drive it too.
func runPreflight(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return preflight.Command(ctx, args, stdout, stderr)
}
