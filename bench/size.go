package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/kubevirt-redfish/kubevirt-redfish/test/testenv"
)

// sizeResult is what one fleet size measured.
type sizeResult struct {
	N          int `json:"n"`
	Namespaces int `json:"namespaces"`
	Running    int `json:"running"`
	// LoadTime is how long creating the fleet took (N VMs and N/2 VMIs).
	LoadTime time.Duration `json:"loadTime"`
	// Ready is exec to the first /readyz 200; Synced the informer sync time the server logged.
	Ready  time.Duration `json:"ready"`
	Synced time.Duration `json:"synced"`
	// RSS of the server when ready, its peak (VmHWM) after the per-system reads (before the
	// collections), at the end, and its peak over the whole run.
	RSSReady   int64 `json:"rssReady"`
	RSSServing int64 `json:"rssServing"`
	RSSEnd     int64 `json:"rssEnd"`
	RSSPeak    int64 `json:"rssPeak"`
	// Body sizes of a ComputerSystem and of the Systems collection (identity encoding).
	SystemBytes     int    `json:"systemBytes"`
	CollectionBytes int    `json:"collectionBytes"`
	Sessions        string `json:"sessions"`
	// Nodes is how many hosting nodes the running VMIs are spread over.
	Nodes int    `json:"nodes"`
	Rows  []*row `json:"rows"`
}

// row is one measured benchmark.
type row struct {
	Name   string      `json:"name"`
	Gzip   bool        `json:"gzip"`
	Conns  int         `json:"conns"`
	Target string      `json:"target"` // "server" or "ceiling"
	Load   *loadResult `json:"load"`
	// Server CPU over the whole benchmark (warm-up included), per second and per request.
	Cores     float64       `json:"cores"`
	CPUPerReq time.Duration `json:"cpuPerRequest"`
	RSS       int64         `json:"rss"`
	// ClientCores is the load generator's (and harness's) CPU.
	ClientCores float64 `json:"clientCores"`
	// API is the apiserver requests the benchmark caused, by verb; per Redfish request below.
	API          apiCounts `json:"api"`
	APIReadsPer  float64   `json:"apiReadsPerRequest"`
	APIWritesPer float64   `json:"apiWritesPerRequest"`
	Note         string    `json:"note,omitempty"`
	// Ceiling is the bare ceiling, measured with the same connections in slices alternating
	// with this benchmark's.
	Ceiling *row `json:"ceiling,omitempty"`
}

const gzipHeader = "Accept-Encoding: gzip, deflate" // what python-requests sends

type readBench struct {
	name  string
	conns int
	path  func(string) string
}

func runSize(ctx context.Context, o options, n int) (*sizeResult, error) {
	res := &sizeResult{N: n, Namespaces: o.namespaces, Nodes: nodesFor(n)}
	dir := filepath.Join(o.out, "n"+strconv.Itoa(n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	dir, _ = filepath.Abs(dir)
	log.Printf("bench: N=%d: starting etcd and kube-apiserver", n)
	env, err := testenv.Start(ctx)
	if err != nil {
		return nil, err
	}
	defer env.Stop()
	m := min(o.namespaces, n)
	for j := range m {
		if err := env.CreateNamespace(ctx, namespaceName(j)); err != nil {
			return nil, err
		}
	}
	if err := env.CreateNamespace(ctx, serverNamespace); err != nil {
		return nil, err
	}
	begin := time.Now()
	fl, err := loadFleet(ctx, env.Config, n, m, o.loadWorkers, log.Printf)
	if err != nil {
		return nil, err
	}
	res.LoadTime = time.Since(begin)
	res.Namespaces, res.Running = m, len(fl.running)
	log.Printf("bench: N=%d: loaded %d VMs and %d VMIs in %d namespaces in %s", n, n, len(fl.running), m, res.LoadTime.Round(time.Millisecond))

	srv, err := startServer(ctx, o.server, dir, env.KubeconfigPath, fl.namespaces, o.serverEnv)
	if err != nil {
		return nil, err
	}
	defer srv.Stop(stopGrace)
	res.Ready, res.Synced = srv.ready, srv.synced
	u, _ := readUsage(srv.Pid())
	res.RSSReady = u.RSS
	log.Printf("bench: N=%d: kubevirt-redfish ready in %s (informers synced in %s), RSS %d MB", n,
		res.Ready.Round(time.Millisecond), res.Synced.Round(time.Millisecond), u.RSS>>20)

	if o.startupOnly {
		time.Sleep(3 * time.Second) // let the collector settle
		u, _ = readUsage(srv.Pid())
		res.RSSEnd, res.RSSPeak = u.RSS, u.HWM
		log.Printf("bench: N=%d: RSS %d MB 3 s later, peak %d MB", n, u.RSS>>20, u.HWM>>20)
		return res, nil
	}
	basic := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(benchUser+":"+benchPassword))
	body, err := fetch(srv.addr, "/redfish/v1/Systems/"+fl.ids[0], basic)
	if err != nil {
		return nil, err
	}
	res.SystemBytes = len(body)
	coll, err := fetch(srv.addr, "/redfish/v1/Systems", basic)
	if err != nil {
		return nil, err
	}
	res.CollectionBytes = len(coll)
	if want := fmt.Sprintf(`"Members@odata.count":%d`, n); !bytes.Contains(coll, []byte(want)) {
		return nil, fmt.Errorf("the Systems collection does not hold %d members", n)
	}
	ceil, err := startCeiling(dir, body)
	if err != nil {
		return nil, err
	}
	defer ceil.Stop(stopGrace)

	headers := func(gz bool, auth string) []string {
		h := []string{auth, "Accept: application/json"}
		if gz {
			h = append(h, gzipHeader)
		}
		return h
	}
	// GETs rotate over all systems: worker w's k-th request reads system w + k*conns.
	rotate := func(conns int, ids []string, path func(id string) string, h []string) func(w, seq int) request {
		reqs := make([]request, len(ids))
		for i, id := range ids {
			reqs[i] = newRequest("GET", path(id), h, nil)
		}
		return func(w, seq int) request { return reqs[(w+seq*conns)%len(reqs)] }
	}
	system := func(id string) string { return "/redfish/v1/Systems/" + id }
	media := func(id string) string { return "/redfish/v1/Systems/" + id + "/VirtualMedia/Cd" }
	collection := func(string) string { return "/redfish/v1/Systems" }
	// The ceiling ignores the path; its requests look like the ComputerSystem GETs.
	ceilIDs := fl.ids[:min(len(fl.ids), 1000)]
	ceilNext := func(conns int) func(w, seq int) request {
		return rotate(conns, ceilIDs, system, headers(false, basic))
	}
	b := &bencher{o: o, env: env, srv: srv, ceil: ceil, res: res, ceilNext: ceilNext}

	// Per-system reads first; the RSS peak so far is the server's under the polling load
	// installers put on it. The collections (up to ~0.5 MB each at N=10,000) come after.
	readRows := func(rows []readBench) error {
		for _, gz := range []bool{false, true} {
			h := headers(gz, basic)
			for _, s := range rows {
				r, err := b.read(s.name, gz, s.conns, rotate(s.conns, fl.ids, s.path, h))
				if err != nil {
					return err
				}
				res.Rows = append(res.Rows, r)
			}
		}
		return nil
	}
	if err := readRows([]readBench{
		{"GET ComputerSystem", o.conns, system},
		{"GET VirtualMedia member", o.conns, media},
	}); err != nil {
		return nil, err
	}

	// Sessions: log in (each login writes one Secret), then read with the tokens.
	tokens, avail, err := b.sessions(fl)
	if err != nil {
		return nil, err
	}
	res.Sessions = avail
	if len(tokens) > 0 {
		for _, gz := range []bool{false, true} {
			// Worker w uses token w mod len(tokens): the logins above opened one per worker.
			next := func(conns int) func(w, seq int) request {
				reqs := make([][]request, len(tokens))
				for t, tok := range tokens {
					h := headers(gz, "X-Auth-Token: "+tok)
					reqs[t] = make([]request, 0, len(fl.ids))
					for _, id := range fl.ids {
						reqs[t] = append(reqs[t], newRequest("GET", system(id), h, nil))
					}
				}
				return func(w, seq int) request { return reqs[w%len(tokens)][(w+seq*conns)%len(fl.ids)] }
			}
			r, err := b.read("GET ComputerSystem (session)", gz, o.conns, next(o.conns))
			if err != nil {
				return nil, err
			}
			res.Rows = append(res.Rows, r)
		}
	}

	u, _ = readUsage(srv.Pid())
	res.RSSServing = u.HWM
	if err := readRows([]readBench{
		{"GET Systems collection", 1, collection},
		{"GET Systems collection", o.conns, collection},
	}); err != nil {
		return nil, err
	}

	// Actions. Every worker owns its own VMs, so no two requests race on one VM (a conflict
	// would cost a re-read) and every request changes something.
	ac := o.actionConns
	h := headers(false, basic)
	r, err := b.write("PATCH Boot (Pxe/Hdd, Continuous)", ac, 200, cycle(ac, fl.halted, func(id string, visit int) request {
		target := []string{"Pxe", "Hdd"}[visit%2]
		return newRequest("PATCH", system(id), h, []byte(`{"Boot":{"BootSourceOverrideTarget":"`+target+`","BootSourceOverrideEnabled":"Continuous"}}`))
	}))
	if err != nil {
		return nil, err
	}
	res.Rows = append(res.Rows, r)
	r, err = b.write("POST Reset On/ForceOff (stopped VM)", ac, 204, cycle(ac, fl.halted, func(id string, visit int) request {
		rt := []string{"On", "ForceOff"}[visit%2]
		return newRequest("POST", system(id)+"/Actions/ComputerSystem.Reset", h, []byte(`{"ResetType":"`+rt+`"}`))
	}))
	if err != nil {
		return nil, err
	}
	res.Rows = append(res.Rows, r)
	// A running VM once: patch runStrategy Halted and delete its VMI, the most a reset writes.
	r, err = b.write("POST Reset ForceOff (running VM)", ac, 204, once(ac, fl.running, func(id string) request {
		return newRequest("POST", system(id)+"/Actions/ComputerSystem.Reset", h, []byte(`{"ResetType":"ForceOff"}`))
	}))
	if err != nil {
		return nil, err
	}
	res.Rows = append(res.Rows, r)

	u, _ = readUsage(srv.Pid())
	res.RSSEnd, res.RSSPeak = u.RSS, u.HWM
	return res, nil
}

// bencher runs benchmarks against one fleet.
type bencher struct {
	o    options
	env  *testenv.Env
	srv  *server
	ceil *server
	res  *sizeResult
	// ceilNext makes the ceiling's requests for a connection count.
	ceilNext func(conns int) func(w, seq int) request
}

// read measures a GET in o.rounds slices, each after a short warm-up, alternating with slices
// of the ceiling.
func (b *bencher) read(name string, gz bool, conns int, next func(w, seq int) request) (*row, error) {
	rounds := max(1, b.o.rounds)
	return b.paired(name, gz, rounds, scenario{addr: b.srv.addr, conns: conns, duration: b.o.duration / time.Duration(rounds),
		max: b.o.maxReads / rounds, warmup: b.o.warmup / time.Duration(rounds), expect: http.StatusOK, next: next})
}

// write measures an action in one slice (its requests change state from one to the next),
// after a slice of the ceiling.
func (b *bencher) write(name string, conns, expect int, next func(w, seq int) request) (*row, error) {
	return b.paired(name, false, 1, scenario{addr: b.srv.addr, conns: conns, duration: b.o.duration,
		max: b.o.maxWrites, expect: expect, next: next})
}

// paired runs sc in rounds slices, each preceded by a slice of the ceiling with as many
// connections, reading the CPU and RSS of the process serving each slice and the apiserver's
// request counters around the whole. The machine's background load changes over seconds;
// alternating slices make the two sides see the same.
func (b *bencher) paired(name string, gz bool, rounds int, sc scenario) (*row, error) {
	ctx := context.Background()
	ceilSc := scenario{addr: b.ceil.addr, conns: sc.conns, duration: sc.duration, max: b.o.maxReads / rounds,
		warmup: b.o.warmup / time.Duration(max(1, b.o.rounds)), expect: http.StatusOK, next: b.ceilNext(sc.conns)}
	r := &row{Name: name, Gzip: gz, Conns: sc.conns, Target: "server"}
	c := &row{Name: "bare ceiling", Conns: sc.conns, Target: "ceiling"}
	var side [2]struct {
		cpu, wall, client time.Duration
		rss               int64
		load              *loadResult
	}
	before, err := b.apiCounts(ctx)
	if err != nil {
		return nil, err
	}
	for range rounds {
		for i, run := range []struct {
			p  *server
			sc scenario
		}{{b.ceil, ceilSc}, {b.srv, sc}} {
			u0, err := readUsage(run.p.Pid())
			if err != nil {
				return nil, err
			}
			self0, _ := readUsage(os.Getpid())
			load, err := run.sc.run()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			u1, err := readUsage(run.p.Pid())
			if err != nil {
				return nil, err
			}
			self1, _ := readUsage(os.Getpid())
			s := &side[i]
			s.cpu += u1.CPU - u0.CPU
			s.wall += u1.Taken.Sub(u0.Taken)
			s.client += self1.CPU - self0.CPU
			s.rss = u1.RSS
			if s.load == nil {
				s.load = load
			} else {
				s.load.add(load)
			}
		}
	}
	after, err := b.apiCounts(ctx)
	if err != nil {
		return nil, err
	}
	for i, out := range []*row{c, r} {
		s := side[i]
		out.Load, out.RSS = s.load, s.rss
		out.Cores, out.ClientCores = s.cpu.Seconds()/s.wall.Seconds(), s.client.Seconds()/s.wall.Seconds()
		if s.load.Total > 0 {
			out.CPUPerReq = s.cpu / time.Duration(s.load.Total)
		}
		if s.load.Errors > 0 {
			out.Note = fmt.Sprintf("%d errors, first: %s", s.load.Errors, s.load.FirstErr)
		}
	}
	// The ceiling never calls the apiserver: all of the delta is the server's.
	r.API = after.delta(before)
	if r.Load.Total > 0 {
		reads, writes := r.API.split()
		r.APIReadsPer, r.APIWritesPer = reads/float64(r.Load.Total), writes/float64(r.Load.Total)
	}
	r.Ceiling = c
	enc := "identity"
	if gz {
		enc = "gzip accepted"
	}
	l := r.Load
	log.Printf("bench: N=%d: %-36s %-13s c=%-2d %7.0f req/s (%.2f× ceiling)  p50 %-8s p99 %-8s (%.2f×)  cpu %.2f  api %s%s", b.res.N, name, enc, sc.conns,
		l.RPS, l.RPS/c.Load.RPS, ms(l.P50), ms(l.P99), float64(l.P99)/float64(c.Load.P99), r.Cores, r.API, notePrefix(r.Note))
	return r, nil
}

func notePrefix(s string) string {
	if s == "" {
		return ""
	}
	return "  (" + s + ")"
}

func (b *bencher) apiCounts(ctx context.Context) (apiCounts, error) {
	text, err := b.env.MetricsText(ctx)
	if err != nil {
		return nil, err
	}
	return parseAPICounts(text)
}

// sessions measures session logins and returns the tokens they got. A server without the
// SessionService login is reported, not failed on.
func (b *bencher) sessions(fl *fleet) ([]string, string, error) {
	login := []byte(`{"UserName":"` + benchUser + `","Password":"` + benchPassword + `"}`)
	resp, err := http.Post("http://"+b.srv.addr+"/redfish/v1/SessionService/Sessions", "application/json", bytes.NewReader(login))
	if err != nil {
		return nil, "", err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("X-Auth-Token") == "" {
		why := fmt.Sprintf("not available: POST /redfish/v1/SessionService/Sessions answered %d", resp.StatusCode)
		log.Printf("bench: N=%d: sessions %s", b.res.N, why)
		return nil, why, nil
	}
	conns := b.o.actionConns
	tokens := make([]string, conns)
	req := newRequest("POST", "/redfish/v1/SessionService/Sessions", []string{"Accept: application/json"}, login)
	sc := scenario{addr: b.srv.addr, conns: conns, duration: b.o.duration, max: b.o.maxWrites, expect: http.StatusCreated,
		next: func(int, int) request { return req },
		seen: func(w int, r *response) { tokens[w] = r.token }}
	r, err := b.paired("POST Sessions (login)", false, 1, sc)
	if err != nil {
		return nil, "", err
	}
	b.res.Rows = append(b.res.Rows, r)
	var out []string
	for _, t := range tokens {
		if t != "" {
			out = append(out, t)
		}
	}
	return out, "available", nil
}

// cycle gives each of conns workers its own share of ids (i mod conns) and has it go round
// them; visit counts the rounds, so that alternating requests change something every time.
func cycle(conns int, ids []string, req func(id string, visit int) request) func(w, seq int) request {
	shares := share(conns, ids)
	return func(w, seq int) request {
		s := shares[w]
		if len(s) == 0 {
			return nil
		}
		return req(s[seq%len(s)], seq/len(s))
	}
}

// once is cycle without the rounds: each id is sent once.
func once(conns int, ids []string, req func(id string) request) func(w, seq int) request {
	shares := share(conns, ids)
	return func(w, seq int) request {
		if seq >= len(shares[w]) {
			return nil
		}
		return req(shares[w][seq])
	}
}

func share(conns int, ids []string) [][]string {
	shares := make([][]string, conns)
	for i, id := range ids {
		shares[i%conns] = append(shares[i%conns], id)
	}
	return shares
}

// fetch GETs a path with net/http (identity encoding) and returns the body of a 200.
func fetch(addr, path, authHeader string) ([]byte, error) {
	req, err := http.NewRequest("GET", "http://"+addr+path, nil)
	if err != nil {
		return nil, err
	}
	k, v, _ := cutHeader(authHeader)
	req.Header.Set(k, v)
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d: %s", path, resp.StatusCode, body)
	}
	return body, nil
}

func cutHeader(h string) (string, string, bool) {
	k, v, ok := bytes.Cut([]byte(h), []byte(": "))
	return string(k), string(v), ok
}
