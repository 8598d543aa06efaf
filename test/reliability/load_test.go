package reliability

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// op is one kind of request of a mixed load.
type op struct {
	name   string
	action bool // changes something (vs. a read)
	run    func(ctx context.Context) result
}

// sample is one request the load sent.
type sample struct {
	op         string
	action     bool
	start, end time.Time
	res        result
}

// loadGen sends ops, cycling through the list, at a steady rate: a request starts every
// 1/rate whatever the previous ones do, up to maxInFlight outstanding (a tick finding that
// many is counted as skipped: hanging requests show up there).
type loadGen struct {
	rate        float64
	ops         []op
	maxInFlight int

	mu       sync.Mutex
	samples  []sample
	skipped  atomic.Int64
	inFlight atomic.Int64
	wg       sync.WaitGroup
	stopped  chan struct{}
	cancel   context.CancelFunc
}

func startLoad(rate float64, maxInFlight int, ops []op) *loadGen {
	ctx, cancel := context.WithCancel(context.Background())
	l := &loadGen{rate: rate, ops: ops, maxInFlight: maxInFlight, stopped: make(chan struct{}), cancel: cancel}
	go l.loop(ctx)
	return l
}

func (l *loadGen) loop(ctx context.Context) {
	defer close(l.stopped)
	tick := time.NewTicker(time.Duration(float64(time.Second) / l.rate))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if int(l.inFlight.Load()) >= l.maxInFlight {
			l.skipped.Add(1)
			continue
		}
		o := l.ops[i%len(l.ops)]
		l.inFlight.Add(1)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer l.inFlight.Add(-1)
			rctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			s := sample{op: o.name, action: o.action, start: time.Now()}
			s.res = o.run(rctx)
			s.end = time.Now()
			l.mu.Lock()
			l.samples = append(l.samples, s)
			l.mu.Unlock()
		}()
	}
}

// stop ends the load and waits for the requests in flight.
func (l *loadGen) stop() []sample {
	l.cancel()
	<-l.stopped
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]sample(nil), l.samples...)
	sort.Slice(out, func(i, j int) bool { return out[i].start.Before(out[j].start) })
	return out
}

// snapshot returns the samples so far.
func (l *loadGen) snapshot() []sample {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]sample(nil), l.samples...)
}

// within keeps the samples that started at or after from and ended before to.
func within(ss []sample, from, to time.Time) []sample {
	var out []sample
	for _, s := range ss {
		if !s.start.Before(from) && s.end.Before(to) {
			out = append(out, s)
		}
	}
	return out
}

// summary counts outcomes per op and status.
type summary struct {
	n       int
	byKey   map[string]int
	maxTook time.Duration
	p99     time.Duration
}

func summarize(ss []sample) summary {
	sm := summary{byKey: map[string]int{}}
	var durs []time.Duration
	for _, s := range ss {
		sm.n++
		key := s.op + " " + statusText(s.res)
		sm.byKey[key]++
		durs = append(durs, s.res.took)
		if s.res.took > sm.maxTook {
			sm.maxTook = s.res.took
		}
	}
	if len(durs) > 0 {
		sort.Slice(durs, func(i, j int) bool { return durs[i] < durs[j] })
		sm.p99 = durs[(len(durs)*99)/100]
	}
	return sm
}

func statusText(r result) string {
	if r.err != nil {
		return "transport-error"
	}
	return fmt.Sprint(r.status)
}

func (sm summary) String() string {
	keys := make([]string, 0, len(sm.byKey))
	for k := range sm.byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%d requests, p99 %v, max %v:", sm.n, sm.p99.Round(time.Millisecond), sm.maxTook.Round(time.Millisecond))
	for _, k := range keys {
		fmt.Fprintf(&b, " [%s]×%d", k, sm.byKey[k])
	}
	return b.String()
}

// Ops shared by the outage and soak loads.

func getOp(c *client, name, path string) op {
	return op{name: name, run: func(ctx context.Context) result { return c.doCtx(ctx, http.MethodGet, path, "") }}
}

// alternating returns an action op that cycles through bodies.
func alternating(c *client, name, method, path string, bodies ...string) op {
	var n atomic.Int64
	return op{name: name, action: true, run: func(ctx context.Context) result {
		b := bodies[int(n.Add(1)-1)%len(bodies)]
		return c.doCtx(ctx, method, path, b)
	}}
}

// loginLogout opens a session, reads through it and closes it: three requests, reported as
// the first that did not succeed (or the logout).
func loginLogout(c *client) op {
	return op{name: "session", action: true, run: func(ctx context.Context) result {
		anon := *c
		anon.user, anon.token = "", ""
		r := anon.doCtx(ctx, http.MethodPost, "/redfish/v1/SessionService/Sessions", fmt.Sprintf(`{"UserName":%q,"Password":%q}`, c.user, c.pass))
		if r.err != nil || r.status != http.StatusCreated {
			return r
		}
		tc := c.withToken(r.header.Get("X-Auth-Token"))
		if g := tc.doCtx(ctx, http.MethodGet, "/redfish/v1/Systems", ""); g.err != nil || g.status != http.StatusOK {
			return g
		}
		d := tc.doCtx(ctx, http.MethodDelete, r.header.Get("Location"), "")
		d.took += r.took
		return d
	}}
}
