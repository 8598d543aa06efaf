package main

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
)

// apiCounts are apiserver_request_total counters summed over the resources kubevirt-redfish
// touches (see counted), by verb. WATCH is left out: a watch is one long request, counted when
// it ends, whatever happened meanwhile.
type apiCounts map[string]float64

// counted reports whether a request for (group, resource) is one kubevirt-redfish can cause.
// Requests the apiserver makes to itself (its identity Lease heartbeats, the system namespaces
// controller) and the harness's own scrape of /metrics (a non-resource request) are not.
func counted(group, resource string) bool {
	switch group {
	case "kubevirt.io", "cdi.kubevirt.io":
		return true
	case "":
		switch resource {
		case "secrets", "configmaps", "persistentvolumeclaims":
			return true
		}
	}
	return false
}

func parseAPICounts(text string) (apiCounts, error) {
	out := apiCounts{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	const name = "apiserver_request_total{"
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			return nil, fmt.Errorf("bad metric line %q", line)
		}
		labels := parseLabels(line[len(name):end])
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			return nil, fmt.Errorf("bad metric value in %q", line)
		}
		if labels["verb"] == "WATCH" || !counted(labels["group"], labels["resource"]) {
			continue
		}
		out[labels["verb"]] += v
	}
	return out, sc.Err()
}

// parseLabels parses `a="x",b="y"` (label values here never hold quotes or commas).
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok {
			out[k] = strings.Trim(v, `"`)
		}
	}
	return out
}

// delta is after minus before.
func (a apiCounts) delta(before apiCounts) apiCounts {
	out := apiCounts{}
	for k, v := range a {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func isWrite(verb string) bool {
	switch verb {
	case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY":
		return true
	}
	return false
}

// split returns the reads (GET, LIST) and the writes.
func (a apiCounts) split() (reads, writes float64) {
	for verb, v := range a {
		if isWrite(verb) {
			writes += v
		} else {
			reads += v
		}
	}
	return reads, writes
}

// String is e.g. "PATCH 1000, DELETE 500".
func (a apiCounts) String() string {
	var parts []string
	for _, verb := range []string{"GET", "LIST", "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY"} {
		if v := a[verb]; v != 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", verb, v))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
