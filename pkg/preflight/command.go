package preflight

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"
)

// Exit codes of Command.
const (
	ExitOK    = 0 // no rule failed (warnings allowed)
	ExitFail  = 1 // at least one rule failed
	ExitUsage = 2 // bad flags, or the cluster could not be read
)

const usage = `Usage: kubevirt-redfish preflight --namespace NS [--selector LABELS] [--kubeconfig PATH] [-o table|json]

Checks that the VirtualMachines backing one virtualized control plane survive the maintenance
of the hosting cluster: distinct nodes, a PodDisruptionBudget, evictionStrategy None, the QEMU
guest agent, Guaranteed resources, live placement and N+1 spare capacity. Prints one line per
rule per VM with the remediation to apply. See docs/preflight.md.

Exit status: 0 no failure (warnings allowed), 1 a rule failed, 2 usage or connection error.

Flags:
`

// Command is `kubevirt-redfish preflight`: it parses args, reads the cluster, prints the
// report to stdout and returns the exit code. Errors go to stderr.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("preflight", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var namespace, selector, kubeconfig, output string
	var timeout time.Duration
	fs.StringVar(&namespace, "namespace", "", "namespace of the control-plane VMs (required)")
	fs.StringVar(&namespace, "n", "", "shorthand for --namespace")
	fs.StringVar(&selector, "selector", "", "label selector on the VirtualMachines' own labels, e.g. cluster=tenant-a (default: all VMs of the namespace)")
	fs.StringVar(&selector, "l", "", "shorthand for --selector")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then in-cluster)")
	fs.StringVar(&output, "o", "table", "output format: table or json")
	fs.StringVar(&output, "output", "table", "same as -o")
	fs.DurationVar(&timeout, "timeout", 30*time.Second, "how long reading the cluster may take")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "kubevirt-redfish preflight: "+format+"\n", a...)
		return ExitUsage
	}
	switch {
	case fs.NArg() > 0:
		return fail("unexpected argument %q (see --help)", fs.Arg(0))
	case namespace == "":
		return fail("--namespace is required (see --help)")
	case output != "table" && output != "json":
		return fail("-o must be table or json, not %q", output)
	}

	rc, err := RESTConfig(kubeconfig)
	if err != nil {
		return fail("%v", err)
	}
	rc.UserAgent = "kubevirt-redfish-preflight"
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	in, notes, err := Load(ctx, rc, namespace, selector)
	if err != nil {
		return fail("%v", err)
	}
	if len(in.VMs) == 0 {
		what := "no VirtualMachines in namespace " + namespace
		if selector != "" {
			what += " match selector " + selector
		}
		return fail("%s: nothing to check", what)
	}

	r := NewReport(in, selector, notes)
	if output == "json" {
		err = r.WriteJSON(stdout)
	} else {
		err = r.WriteTable(stdout)
	}
	if err != nil {
		return fail("writing the report: %v", err)
	}
	if r.Summary.Fail > 0 {
		return ExitFail
	}
	return ExitOK
}
