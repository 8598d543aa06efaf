package reliability

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubevirt-redfish/kubevirt-redfish/test/stack"
)

// soakDuration is $KRF_SOAK_DURATION (a Go duration), 75 s by default: `make soak` runs 10m.
func soakDuration(t *testing.T) time.Duration {
	if v := os.Getenv("KRF_SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("KRF_SOAK_DURATION: %v", err)
		}
		return d
	}
	return 75 * time.Second
}

// soakRate is the steady request rate.
const soakRate = 25

type soakPoint struct {
	at       time.Duration
	st       procStats
	requests int
}

// A steady mixed load (reads, power, boot, Secure Boot, LED, media, sessions) against the real
// server binary: zero unexpected answers (no 5xx, no 4xx but 409 conflicts), and RSS, heap and
// goroutines flat from the end of the warm-up to the end. The curve is logged, and written to
// $KRF_RELIABILITY_OUT/soak.csv when set.
func TestSoak(t *testing.T) {
	duration := soakDuration(t)
	c := startCluster(t)
	img := stack.NewImageServer(t, 256<<10)
	srv := c.startServer(t, "")
	cl := newClient(srv.url())
	tok, _ := cl.login(t)
	tc := cl.withToken(tok)
	sushy := newClient(srv.url())
	sushy.closeEveryT = true // sushy sends Connection: close

	var media [3]atomic.Int64
	insertEject := func(id string, n *atomic.Int64) op {
		return op{name: "Insert/Eject " + id, action: true, run: func(ctx context.Context) result {
			i := n.Add(1)
			if i%2 == 1 {
				return cl.doCtx(ctx, http.MethodPost, insertPath(id), fmt.Sprintf(`{"Image":"%s/img-%d.iso"}`, img.URL, (i/2)%3))
			}
			return cl.doCtx(ctx, http.MethodPost, ejectPath(id), "")
		}}
	}
	ops := []op{
		getOp(cl, "GET system", sysPath("tenant-a.cp-0")),
		getOp(tc, "GET systems (session)", "/redfish/v1/Systems"),
		alternating(sushy, "Reset cp-0", http.MethodPost, resetPath("tenant-a.cp-0"), `{"ResetType":"On"}`, `{"ResetType":"ForceOff"}`),
		getOp(sushy, "GET media (close)", mediaPath("tenant-a.cp-1")),
		alternating(cl, "Boot PATCH cp-1", http.MethodPatch, sysPath("tenant-a.cp-1"), bootBody("Cd", "Once"), bootBody("Hdd", "Continuous"), bootBody("Pxe", "Continuous")),
		getOp(tc, "GET tasks (session)", "/redfish/v1/TaskService/Tasks"),
		insertEject("tenant-a.cp-2", &media[0]),
		getOp(cl, "GET manager", "/redfish/v1/Managers/tenant-b.cp-0"),
		alternating(cl, "SecureBoot cp-2", http.MethodPatch, sysPath("tenant-a.cp-2")+"/SecureBoot", `{"SecureBootEnable":true}`, `{"SecureBootEnable":false}`),
		getOp(tc, "GET system expand (session)", sysPath("tenant-b.cp-0")+"?$expand=.($levels=1)"),
		loginLogout(cl),
		alternating(cl, "LED tenant-b", http.MethodPatch, sysPath("tenant-b.cp-0"), `{"IndicatorLED":"Lit"}`, `{"IndicatorLED":"Off"}`),
		getOp(cl, "GET chassis", "/redfish/v1/Chassis"),
		insertEject("tenant-a.cp-1", &media[1]),
		alternating(cl, "Reset tenant-b", http.MethodPost, resetPath("tenant-b.cp-0"), `{"ResetType":"On"}`, `{"ResetType":"GracefulShutdown"}`),
		getOp(cl, "GET root", "/redfish/v1/"),
	}

	load := startLoad(soakRate, 64, ops)
	start := time.Now()
	every := 5 * time.Second
	if duration > 5*time.Minute {
		every = 10 * time.Second
	}
	var curve []soakPoint
	for time.Since(start) < duration {
		time.Sleep(every)
		curve = append(curve, soakPoint{at: time.Since(start), st: srv.stats(), requests: len(load.snapshot())})
	}
	samples := load.stop()
	rest := settledStats(t, srv, cl, procStats{})

	// Every answer is expected.
	conflicts, unexpected := 0, 0
	for _, s := range samples {
		switch {
		case s.res.err != nil, s.res.status >= 500, s.res.status >= 400 && s.res.status != http.StatusConflict:
			unexpected++
			if unexpected <= 20 {
				t.Errorf("%s at %s: %v", s.op, s.start.Format("15:04:05.000"), s.res)
			}
		case s.res.status == http.StatusConflict:
			conflicts++
		}
	}
	if n := load.skipped.Load(); n > 0 {
		t.Errorf("%d ticks skipped: requests piled up", n)
	}

	// The curve, and flatness after the warm-up (the first fifth, at least 15 s).
	var b strings.Builder
	b.WriteString("seconds,requests,goroutines,rss_mib,heap_inuse_mib\n")
	for _, p := range curve {
		fmt.Fprintf(&b, "%.0f,%d,%d,%.1f,%.1f\n", p.at.Seconds(), p.requests, p.st.Goroutines, mib(p.st.RSS), mib(p.st.HeapInuse))
	}
	t.Logf("soak curve (%v at %d req/s):\n%s", duration, soakRate, b.String())
	if dir := os.Getenv("KRF_RELIABILITY_OUT"); dir != "" {
		_ = os.MkdirAll(dir, 0o755)
		_ = os.WriteFile(filepath.Join(dir, "soak.csv"), []byte(b.String()), 0o644)
	}
	warm := max(duration/5, 15*time.Second)
	var steady []soakPoint
	for _, p := range curve {
		if p.at >= warm {
			steady = append(steady, p)
		}
	}
	if len(steady) < 4 {
		t.Fatalf("too few samples after the warm-up: %d", len(steady))
	}
	first, last := medianStats(steady[:3]), medianStats(steady[len(steady)-3:])
	t.Logf("after warm-up: %v; at the end: %v; at rest: %v", first, last, rest)
	if last.Goroutines > first.Goroutines+15 {
		t.Errorf("goroutines grew from %d to %d", first.Goroutines, last.Goroutines)
	}
	if last.RSS > first.RSS*5/4+10<<20 {
		t.Errorf("RSS grew from %.1f MiB to %.1f MiB", mib(first.RSS), mib(last.RSS))
	}
	if last.HeapInuse > first.HeapInuse*3/2+8<<20 {
		t.Errorf("heap in use grew from %.1f MiB to %.1f MiB", mib(first.HeapInuse), mib(last.HeapInuse))
	}
	sm := summarize(samples)
	record(t, "soak", map[string]any{
		"duration_s":               duration.Seconds(),
		"rate_per_s":               soakRate,
		"requests":                 len(samples),
		"unexpected_answers":       unexpected,
		"conflicts_409":            conflicts,
		"p99_ms":                   ms(sm.p99),
		"max_ms":                   ms(sm.maxTook),
		"rss_mib_start_end":        []float64{round1(mib(first.RSS)), round1(mib(last.RSS))},
		"heap_inuse_mib_start_end": []float64{round1(mib(first.HeapInuse)), round1(mib(last.HeapInuse))},
		"goroutines_start_end":     []int{first.Goroutines, last.Goroutines},
		"at_rest_after":            rest.String(),
		"rss_slope_mib_per_min":    round1(slope(steady)),
	})
}

// medianStats takes the median of each figure.
func medianStats(ps []soakPoint) procStats {
	g := make([]int, len(ps))
	r := make([]int64, len(ps))
	h := make([]int64, len(ps))
	for i, p := range ps {
		g[i], r[i], h[i] = p.st.Goroutines, p.st.RSS, p.st.HeapInuse
	}
	sort.Ints(g)
	sort.Slice(r, func(i, j int) bool { return r[i] < r[j] })
	sort.Slice(h, func(i, j int) bool { return h[i] < h[j] })
	return procStats{Goroutines: g[len(g)/2], RSS: r[len(r)/2], HeapInuse: h[len(h)/2]}
}

// slope is the least-squares RSS trend in MiB per minute.
func slope(ps []soakPoint) float64 {
	var n, sx, sy, sxx, sxy float64
	for _, p := range ps {
		x, y := p.at.Minutes(), mib(p.st.RSS)
		n++
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}
