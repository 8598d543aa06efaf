package main

import (
	"os"

	clientfeatures "k8s.io/client-go/features"
)

// streamInitialLists makes the informers fill their caches from a watch that streams the
// existing objects (client-go's WatchListClient, the apiserver's sendInitialEvents) instead
// of one LIST. A LIST of 10,000 VirtualMachines arrives as one response that is held, decoded
// and converted at once; streamed, each object is converted as it arrives and the response is
// never whole in memory: at 10,000 VMs the process is ~80 MB smaller when ready (BENCHMARKS.md).
// An apiserver that cannot stream answers with an error and client-go falls back to LIST.
// KUBE_FEATURE_WatchListClient, when set, still decides, as in any client-go program.
func streamInitialLists() {
	if _, set := os.LookupEnv("KUBE_FEATURE_" + string(clientfeatures.WatchListClient)); set {
		return
	}
	clientfeatures.ReplaceFeatureGates(watchListGates{clientfeatures.FeatureGates()})
}

type watchListGates struct{ clientfeatures.Gates }

func (g watchListGates) Enabled(f clientfeatures.Feature) bool {
	return f == clientfeatures.WatchListClient || g.Gates.Enabled(f)
}
