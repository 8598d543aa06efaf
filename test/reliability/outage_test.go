package reliability

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/stack"
)

// outageFor is how long kube-apiserver stays down.
const outageFor = 30 * time.Second

// hangLimit bounds any request, outage or not: a BMC client must get an answer, not a hang.
// (Answers take milliseconds; the margin is for a loaded 2-core CI machine.)
const hangLimit = 5 * time.Second

// The real kube-apiserver stops for 30 s while a mixed load runs against the real server
// binary: reads keep answering from the informer caches, actions fail fast with 503 and
// Retry-After, and when the apiserver is back everything recovers without a restart, down to
// the goroutine count and heap of before.
func TestAPIServerOutage(t *testing.T) {
	c := startCluster(t)
	img := stack.NewImageServer(t, 256<<10)
	srv := c.startServer(t, "")
	pid := srv.pid()
	cl := newClient(srv.url())
	tok, _ := cl.login(t)
	tc := cl.withToken(tok)

	var media atomic.Int64
	ops := []op{
		getOp(cl, "GET system", sysPath("tenant-a.cp-0")),
		alternating(cl, "Reset", http.MethodPost, resetPath("tenant-a.cp-0"), `{"ResetType":"On"}`, `{"ResetType":"ForceOff"}`),
		getOp(tc, "GET system (session)", sysPath("tenant-a.cp-1")),
		alternating(cl, "Boot PATCH", http.MethodPatch, sysPath("tenant-a.cp-1"), bootBody("Pxe", "Continuous"), bootBody("Hdd", "Continuous")),
		getOp(cl, "GET systems", "/redfish/v1/Systems"),
		{name: "Insert/Eject", action: true, run: func(ctx context.Context) result {
			if media.Add(1)%2 == 1 {
				return cl.doCtx(ctx, http.MethodPost, insertPath("tenant-a.cp-2"), fmt.Sprintf(`{"Image":%q}`, img.URL+"/boot.iso"))
			}
			return cl.doCtx(ctx, http.MethodPost, ejectPath("tenant-a.cp-2"), "")
		}},
		getOp(tc, "GET media (session)", mediaPath("tenant-a.cp-2")),
		getOp(cl, "GET tasks", "/redfish/v1/TaskService/Tasks"),
		loginLogout(cl),
		getOp(tc, "GET manager (session)", "/redfish/v1/Managers/tenant-b.cp-0"),
	}

	// Warm up (connections, caches, bcrypt cache), then take the baseline at rest.
	warm := startLoad(20, 64, ops)
	time.Sleep(5 * time.Second)
	for _, s := range warm.stop() {
		if s.res.err != nil || s.res.status >= 500 {
			t.Fatalf("warm-up %s: %v", s.op, s.res)
		}
	}
	baseline := settledStats(t, srv, cl, procStats{})
	t.Logf("baseline at rest: %v", baseline)

	load := startLoad(20, 64, ops)
	time.Sleep(3 * time.Second)
	stopBegin := time.Now()
	if err := c.Env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	t.Logf("kube-apiserver stopping at %s, stopped at %s; down for %v", stopBegin.Format("15:04:05.000"), down.Format("15:04:05.000"), outageFor)
	readyDown := eventually(t, 30*time.Second, "/readyz to report the outage", func() bool {
		r := newClient(srv.url()).do(http.MethodGet, "/readyz", "")
		return r.err == nil && r.status == http.StatusServiceUnavailable
	})
	time.Sleep(time.Until(down.Add(outageFor)))

	upBegin := time.Now()
	if err := c.Env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	t.Logf("kube-apiserver starting at %s, ready at %s", upBegin.Format("15:04:05.000"), up.Format("15:04:05.000"))

	// Recovery, measured from the moment the apiserver is ready again:
	//   - the first action that succeeds;
	//   - the caches: a VM created straight in the apiserver shows up as a system;
	//   - /readyz back to 200.
	probe := sim.ControlPlaneVM("tenant-b", "outage-probe", 40)
	createVM(t, c.Dyn, probe)
	var actionAt, cacheAt, readyAt, leaderAt time.Time
	var wg sync.WaitGroup
	wait := func(at *time.Time, what string, cond func() bool) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(2 * time.Minute)
			for !cond() && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			*at = time.Now()
			if !cond() {
				t.Errorf("%s did not recover within 2 minutes", what)
			}
		}()
	}
	probeClient := newClient(srv.url())
	wait(&actionAt, "a Boot PATCH", func() bool {
		return probeClient.do(http.MethodPatch, sysPath("tenant-b.cp-0"), bootBody("Pxe", "Continuous")).status == http.StatusOK
	})
	wait(&cacheAt, "the caches (a VM created after the outage)", func() bool {
		return probeClient.do(http.MethodGet, sysPath("tenant-b.outage-probe"), "").status == http.StatusOK
	})
	wait(&readyAt, "/readyz", func() bool {
		return probeClient.do(http.MethodGet, "/readyz", "").status == http.StatusOK
	})
	wait(&leaderAt, "the leader Lease", func() bool {
		return srv.logCount("leading: running background loops") >= 2
	})
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	actionRec := actionAt.Sub(up)
	cacheRec := cacheAt.Sub(up)
	readyRec := readyAt.Sub(up)
	recovered := actionAt
	if cacheAt.After(recovered) {
		recovered = cacheAt
	}

	time.Sleep(10 * time.Second) // the load runs on after recovery
	samples := load.stop()
	if !srv.alive() || srv.pid() != pid {
		t.Fatal("the server restarted or died during the outage")
	}

	// Judge every request by when it ran.
	var outage, after, all []sample
	outage = within(samples, down, upBegin)
	after = within(samples, recovered.Add(2*time.Second), time.Now())
	all = samples
	var violations []string
	for _, s := range all {
		at := s.start.Format("15:04:05.000")
		// Requests sent while kube-apiserver drains (SIGTERM) wait for it, within the action
		// timeout; once it is gone, nothing may take long.
		// The same holds while it starts again and until the caches caught up.
		limit := hangLimit
		if s.start.Before(down) || !s.start.Before(upBegin) && s.start.Before(recovered) {
			limit = 35 * time.Second
		}
		switch {
		case s.res.err != nil:
			violations = append(violations, fmt.Sprintf("%s at %s: transport error %v", s.op, at, s.res.err))
		case s.res.took > limit:
			violations = append(violations, fmt.Sprintf("%s at %s took %v (%d)", s.op, at, s.res.took, s.res.status))
		case s.res.status >= 500 && s.res.status != http.StatusServiceUnavailable:
			violations = append(violations, fmt.Sprintf("%s at %s: %v", s.op, at, s.res))
		case s.res.status == http.StatusServiceUnavailable && s.res.header.Get("Retry-After") == "":
			violations = append(violations, fmt.Sprintf("%s at %s: 503 without Retry-After: %v", s.op, at, s.res))
		}
	}
	for i, v := range violations {
		if i == 20 {
			t.Errorf("... and %d more", len(violations)-20)
			break
		}
		t.Error(v)
	}
	reads200, gets503, actions503, actionsOK := 0, 0, 0, 0
	for _, s := range outage {
		switch {
		case !s.action && s.res.status == http.StatusOK:
			reads200++
		case !s.action && s.res.status != http.StatusOK:
			if s.res.status != http.StatusServiceUnavailable {
				t.Errorf("read %s during the outage: %v", s.op, s.res)
			}
			gets503++
		case s.action && s.res.status == http.StatusServiceUnavailable:
			actions503++
			msg := s.res.errorMessage()
			if !strings.Contains(msg, "Kubernetes API server") && !strings.Contains(msg, "could not be stored") {
				t.Errorf("%s: the 503 does not say why: %q", s.op, msg)
			}
		case s.action && s.res.status < 300:
			actionsOK++ // nothing to change: answered from the cache
		case s.action:
			t.Errorf("action %s during the outage: %v", s.op, s.res)
		}
	}
	for _, s := range after {
		if s.res.status >= 300 && s.res.status != http.StatusConflict {
			t.Errorf("%s after recovery: %v", s.op, s.res)
		}
	}
	if n := load.skipped.Load(); n > 0 {
		t.Errorf("%d load ticks found %d requests outstanding: something hangs", n, load.maxInFlight)
	}
	if actions503 == 0 {
		t.Error("no action was refused during the outage: was the apiserver really down?")
	}

	// The background loops run again: the leader Lease, lost during the outage, was won back
	// (above), and a one-time boot override is consumed by the next boot.
	leaderRec := max(0, leaderAt.Sub(up))
	cl.must(t, http.StatusOK, http.MethodPatch, sysPath("tenant-b.cp-0"), bootBody("Hdd", "Continuous"))
	cl.must(t, http.StatusOK, http.MethodPatch, sysPath("tenant-b.cp-0"), bootBody("Pxe", "Once"))
	cl.must(t, http.StatusNoContent, http.MethodPost, resetPath("tenant-b.cp-0"), `{"ResetType":"On"}`)
	eventuallyf(t, 2*time.Minute, "the Once override to be consumed after the outage", func() (bool, string) {
		b := cl.get(t, sysPath("tenant-b.cp-0"))
		boot := b["Boot"].(map[string]any)
		// Consumed, the Once override gives way to the Continuous one it was set over.
		return b["PowerState"] == "On" && boot["BootSourceOverrideTarget"] == "Hdd" && boot["BootSourceOverrideEnabled"] == "Continuous",
			fmt.Sprintf("PowerState %v, Boot %v/%v", b["PowerState"], boot["BootSourceOverrideTarget"], boot["BootSourceOverrideEnabled"])
	})
	cl.must(t, http.StatusNoContent, http.MethodPost, resetPath("tenant-b.cp-0"), `{"ResetType":"ForceOff"}`)

	// Everything returns to the baseline once the load is gone.
	final := settledStats(t, srv, cl, baseline)
	t.Logf("at rest after recovery: %v", final)
	if final.Goroutines > baseline.Goroutines+5 {
		t.Errorf("goroutines: %d before the outage, %d after", baseline.Goroutines, final.Goroutines)
	}
	if final.HeapInuse > baseline.HeapInuse*3/2+8<<20 {
		t.Errorf("heap in use: %.1f MiB before the outage, %.1f MiB after", mib(baseline.HeapInuse), mib(final.HeapInuse))
	}
	sumOutage := summarize(outage)
	record(t, "outage", map[string]any{
		"outage_seconds":                     outageFor.Seconds(),
		"requests_total":                     len(all),
		"requests_during_outage":             len(outage),
		"reads_during_outage_200":            reads200,
		"reads_during_outage_503":            gets503,
		"actions_during_outage_503":          actions503,
		"actions_during_outage_noop_2xx":     actionsOK,
		"max_latency_during_outage_ms":       ms(sumOutage.maxTook),
		"p99_latency_during_outage_ms":       ms(sumOutage.p99),
		"readyz_503_after_ms":                ms(readyDown),
		"recovery_first_action_ms":           ms(actionRec),
		"recovery_cache_ms":                  ms(cacheRec),
		"recovery_readyz_ms":                 ms(readyRec),
		"recovery_leader_ms":                 ms(leaderRec),
		"apiserver_restart_ms":               ms(up.Sub(upBegin)),
		"goroutines_before_after":            []int{baseline.Goroutines, final.Goroutines},
		"heap_inuse_mib_before_after":        []float64{round1(mib(baseline.HeapInuse)), round1(mib(final.HeapInuse))},
		"rss_mib_before_after":               []float64{round1(mib(baseline.RSS)), round1(mib(final.RSS))},
		"outcomes_during_outage":             sumOutage.byKey,
		"violations":                         len(violations),
		"server_restarted":                   srv.pid() != pid,
		"client_go_reflector_errors_in_logs": srv.logCount("connection refused"),
	})
}

func round1(f float64) float64 { return float64(int(f*10+0.5)) / 10 }

// settledStats closes the client's idle connections and waits for the server's goroutine
// count to settle (and, given a baseline, to come back to it), then returns the figures.
func settledStats(t *testing.T, srv *proc, cl *client, baseline procStats) procStats {
	t.Helper()
	cl.hc.CloseIdleConnections()
	var last procStats
	deadline := time.Now().Add(90 * time.Second)
	stable := 0
	for time.Now().Before(deadline) {
		st := srv.stats()
		back := baseline.Goroutines == 0 ||
			st.Goroutines <= baseline.Goroutines+5 && st.HeapInuse <= baseline.HeapInuse*3/2+8<<20
		if st.Goroutines == last.Goroutines && back {
			stable++
		} else {
			stable = 0
		}
		last = st
		if stable >= 3 {
			break
		}
		time.Sleep(time.Second)
	}
	return last
}
