package kubevirt

import (
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// ImportState is the Redfish TaskState of an image import.
type ImportState string

// Import states.
const (
	ImportRunning   ImportState = "Running"
	ImportCompleted ImportState = "Completed"
	ImportException ImportState = "Exception"
)

// Import is the progress of a VM's media DataVolume: the namespace's download of the image,
// then the clone into the VM's own volume.
type Import struct {
	State   ImportState
	Percent int
	Message string
	Started time.Time
	Ended   time.Time
}

// ImportOf derives the import status from the VM's media DataVolume and the namespace's image
// cache DataVolume (nil when gone).
func ImportOf(media, cache *cdiv1.DataVolume) Import {
	imp := Import{State: ImportRunning, Started: media.CreationTimestamp.Time}
	if media.Status.Phase == cdiv1.Succeeded {
		imp.State, imp.Percent, imp.Message = ImportCompleted, 100, "The image was imported."
		imp.Ended = readySince(media)
		return imp
	}
	// CDI retries a failing importer for ever and reports why on the Running condition; the
	// task shows that as an Exception and recovers if a retry succeeds.
	for _, dv := range []*cdiv1.DataVolume{cache, media} {
		if dv == nil {
			continue
		}
		if msg, failed := importFailure(dv); failed {
			imp.State, imp.Message = ImportException, msg
			imp.Percent = progress(dv)
			return imp
		}
	}
	switch {
	case cache == nil:
		imp.Message = "Waiting for the image download."
	case cache.Status.Phase == cdiv1.Succeeded:
		imp.Percent, imp.Message = 99, "Copying the image into the VM's volume."
	default:
		imp.Percent = progress(cache)
		imp.Message = "Downloading the image (" + string(orNA(cache.Status.Phase)) + ")."
	}
	return imp
}

func orNA(p cdiv1.DataVolumePhase) cdiv1.DataVolumePhase {
	if p == "" {
		return "Pending"
	}
	return p
}

// failureReasons are the condition reasons with which CDI reports a failing import or clone:
// download and TLS errors, a truncated or oversized image, missing credentials, a bad claim.
var failureReasons = map[string]bool{
	"Error": true, "ImagePullFailed": true, "CreateContainerConfigError": true, "ErrClaimNotValid": true,
}

func importFailure(dv *cdiv1.DataVolume) (string, bool) {
	if dv.Status.Phase == cdiv1.Failed {
		return "The image import failed: " + conditionMessage(dv, cdiv1.DataVolumeRunning), true
	}
	for _, c := range dv.Status.Conditions {
		if c.Status == corev1.ConditionFalse && failureReasons[c.Reason] {
			msg := c.Message
			if msg == "" {
				msg = c.Reason
			}
			return "The image import failed: " + msg, true
		}
	}
	return "", false
}

func conditionMessage(dv *cdiv1.DataVolume, t cdiv1.DataVolumeConditionType) string {
	for _, c := range dv.Status.Conditions {
		if c.Type == t && c.Message != "" {
			return c.Message
		}
	}
	return "see DataVolume " + dv.Namespace + "/" + dv.Name
}

func readySince(dv *cdiv1.DataVolume) time.Time {
	for _, c := range dv.Status.Conditions {
		if c.Type == cdiv1.DataVolumeReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// progress parses CDI's "37.50%" (or "N/A").
func progress(dv *cdiv1.DataVolume) int {
	f, err := strconv.ParseFloat(strings.TrimSuffix(string(dv.Status.Progress), "%"), 64)
	if err != nil || f < 0 {
		return 0
	}
	if f > 100 {
		f = 100
	}
	return int(f)
}
