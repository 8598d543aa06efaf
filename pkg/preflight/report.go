package preflight

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Report identifiers of the JSON output (see docs/preflight.md). A change that breaks
// consumers bumps ReportAPIVersion.
const (
	ReportAPIVersion = "preflight.kubevirt-redfish.io/v1"
	ReportKind       = "PreflightReport"
)

// Report is the JSON document `kubevirt-redfish preflight -o json` prints.
type Report struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Namespace and Selector say which VMs were checked.
	Namespace string `json:"namespace"`
	Selector  string `json:"selector"`
	// VMs are the names of the checked VMs, sorted.
	VMs []string `json:"vms"`
	// Results holds one entry per rule per VM, sorted by VM and then in rule order.
	Results []Result `json:"results"`
	Summary Summary  `json:"summary"`
	// Notes say what the loader could not read and how that limits the checks.
	Notes []string `json:"notes"`
}

// NewReport checks in and wraps the results.
func NewReport(in Input, selector string, notes []string) Report {
	r := Report{
		APIVersion: ReportAPIVersion, Kind: ReportKind,
		Namespace: in.Namespace, Selector: selector,
		VMs: []string{}, Results: Check(in), Notes: append([]string{}, notes...),
	}
	for _, vm := range newCluster(in).names {
		r.VMs = append(r.VMs, vm)
	}
	if r.Results == nil {
		r.Results = []Result{}
	}
	r.Summary = Summarize(r.Results)
	return r
}

// WriteJSON writes the report as indented JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// WriteTable writes one line per rule per VM (VM, RULE, RESULT, MESSAGE), each warning and
// failure followed by its remediation, indented, then the notes and a summary line.
func (r Report) WriteTable(w io.Writer) error {
	b := &strings.Builder{}
	sel := ""
	if r.Selector != "" {
		sel = ", selector " + r.Selector
	}
	fmt.Fprintf(b, "Preflight of the control-plane VMs in namespace %s%s: %s\n\n", r.Namespace, sel, list(r.VMs))
	vmW, ruleW := len("VM"), len("RULE")
	for _, res := range r.Results {
		vmW, ruleW = max(vmW, len(res.VM)), max(ruleW, len(res.Rule))
	}
	line := func(vm, rule, verdict, msg string) {
		fmt.Fprintf(b, "%-*s  %-*s  %-6s  %s\n", vmW, vm, ruleW, rule, verdict, msg)
	}
	line("VM", "RULE", "RESULT", "MESSAGE")
	const indent = "    "
	seen := map[string]string{} // remediation -> where it was first printed
	for _, res := range r.Results {
		line(res.VM, string(res.Rule), strings.ToUpper(string(res.Verdict)), res.Message)
		fix := res.Remediation
		if fix == "" {
			continue
		}
		if first, ok := seen[fix]; ok {
			fmt.Fprintf(b, "%sremediation: as for %s above\n", indent, first)
			continue
		}
		seen[fix] = res.VM + " " + string(res.Rule)
		if !strings.HasSuffix(fix, "\n") { // advice, not YAML
			fmt.Fprintf(b, "%sremediation: %s\n", indent, strings.TrimSpace(fix))
			continue
		}
		fmt.Fprintf(b, "%sremediation (YAML to add):\n", indent)
		for _, l := range strings.Split(strings.TrimRight(fix, "\n"), "\n") {
			fmt.Fprintf(b, "%s  %s\n", indent, l)
		}
	}
	b.WriteString("\n")
	for _, n := range r.Notes {
		fmt.Fprintf(b, "Note: %s\n", n)
	}
	s := r.Summary
	fmt.Fprintf(b, "Summary: %d VMs, %d checks: %d pass, %d warn, %d fail: %s\n",
		len(r.VMs), len(r.Results), s.Pass, s.Warn, s.Fail, strings.ToUpper(string(s.Verdict)))
	_, err := io.WriteString(w, b.String())
	return err
}
