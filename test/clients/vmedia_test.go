package clients

import (
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// vmediaSteps are the steps of sushy_ironic.py --flow vmedia, in order: a ramdisk deploy
// through the redfish-virtual-media boot interface, then a live-ISO deploy.
var vmediaSteps = []string{
	"connect", "get_system", "managers", "find_virtual_media",
	// Ramdisk deploy: power off, eject every inserted CD, insert, Cd+Once, On (waits for the
	// import), the boot consumes the override; eject, Hdd+Continuous, reboot.
	"leftover_media", "force_off_if_on", "eject_all_cd", "insert_ramdisk", "ramdisk_shown_at_once",
	"set_boot_cd_once", "power_on_waits_for_import", "once_consumed_by_boot", "ramdisk_import_task_completed",
	"eject_after_deploy", "set_boot_hdd_continuous", "ironic_reboot", "disk_boot_kept_after_reboot",
	// Live ISO: power off, eject, insert, Cd+Continuous, On; the ISO and the override stay.
	"live_force_off", "live_eject_all_cd", "insert_live_iso", "live_iso_shown_at_once",
	"set_boot_cd_continuous", "live_power_on_waits_for_import", "live_iso_kept", "live_reboot",
	"live_iso_kept_after_reboot", "live_import_task_completed",
	"teardown", "vmedia_paths", "close",
}

// Images are served slowly enough for the power-on to be seen waiting for the import
// (Ironic's first power poll comes after 1 s): 4 MiB in 64 KiB chunks, 60 ms apart, ~3.8 s.
const (
	vmediaImageSize  = 4 << 20
	vmediaChunkDelay = 60 * time.Millisecond
)

// TestSushyVirtualMediaFlow runs Ironic's virtual media deploys through the real sushy, once
// per Ironic generation: current Ironic finds the drive under System.VirtualMedia, Ironic 21
// (Debian's) only under the Managers of Links.ManagedBy, and the script fails if that run
// requests the System's VirtualMedia collection.
func TestSushyVirtualMediaFlow(t *testing.T) {
	t.Parallel()
	version := requireSushy(t)
	t.Logf("sushy %s (%s)", version, python())

	t.Run("current ironic via System.VirtualMedia", func(t *testing.T) {
		t.Parallel()
		st := startServer(t)
		img := newSlowImageServer(t, vmediaImageSize, vmediaChunkDelay)
		runSushy(t, st, sushyRun{user: st.User, system: "/redfish/v1/Systems/tenant-a.cp-0", steps: vmediaSteps,
			args: []string{"--flow", "vmedia", "--vmedia-via", "system", "--image-base-url", img.URL}})
		t.Logf("image server (Go): %s", img.summary())
	})
	t.Run("ironic 21 via Manager.VirtualMedia only", func(t *testing.T) {
		// The images come from the script's own Python HTTP server; the simulated importer
		// (in this process) downloads them from it.
		t.Parallel()
		st := startServer(t)
		runSushy(t, st, sushyRun{user: st.User, system: "/redfish/v1/Systems/tenant-a.cp-1", steps: vmediaSteps,
			args: []string{"--flow", "vmedia", "--vmedia-via", "manager",
				"--image-size", strconv.Itoa(vmediaImageSize),
				"--image-chunk-delay", strconv.FormatFloat(vmediaChunkDelay.Seconds(), 'f', -1, 64)}})
	})
}

// slowImageServer serves a fake ISO of size bytes at every path, one 64 KiB chunk per delay,
// and counts the bytes sent per path.
type slowImageServer struct {
	*httptest.Server
	size  int
	delay time.Duration

	mu   sync.Mutex
	sent map[string]int64
	reqs int
}

func newSlowImageServer(t *testing.T, size int, delay time.Duration) *slowImageServer {
	t.Helper()
	s := &slowImageServer{size: size, delay: delay, sent: map[string]int64{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *slowImageServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.reqs++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(s.size))
	if r.Method == http.MethodHead {
		return
	}
	chunk := make([]byte, 64<<10)
	for left := s.size; left > 0; left -= len(chunk) {
		if left < len(chunk) {
			chunk = chunk[:left]
		}
		select {
		case <-time.After(s.delay):
		case <-r.Context().Done():
			return // the importer gave up: an eject cancels the import
		}
		n, err := w.Write(chunk)
		s.mu.Lock()
		s.sent[r.URL.Path] += int64(n)
		s.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (s *slowImageServer) summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	paths := make([]string, 0, len(s.sent))
	for p := range s.sent {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b strings.Builder
	b.WriteString(strconv.Itoa(s.reqs) + " requests; bytes sent:")
	for _, p := range paths {
		b.WriteString(" " + p + "=" + strconv.FormatInt(s.sent[p], 10))
	}
	return b.String()
}
