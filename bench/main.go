// Command krf-bench is the benchmark harness of kubevirt-redfish (`make bench`).
//
// For every fleet size N it starts a real etcd + kube-apiserver with the real KubeVirt and CDI
// CRDs (test/testenv, the binaries of hack/tools.sh), loads N VMs across M namespaces with a
// running VMI for every other one, starts the real kubevirt-redfish binary against it and a
// bare net/http "ceiling" server next to it, and drives both with its own HTTP/1.1 load
// generator on 127.0.0.1. Per endpoint it reports requests/s, p50 and p99, the server's CPU and
// RSS (from /proc), and the apiserver requests each Redfish request caused (from the
// apiserver's own apiserver_request_total, before and after), every figure also as a ratio to
// the ceiling measured in the same run. See BENCHMARKS.md.
//
//	eval "$(hack/tools.sh env)"
//	go build -o bin/krf-bench ./bench && bin/krf-bench -server bin/kubevirt-redfish
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// deploymentEnv is the Go runtime's environment in deploy/base/deployment.yaml, which the
// server runs with unless -server-env sets a variable of it.
var deploymentEnv = []string{"GOMEMLIMIT=256MiB", "GOGC=60"}

type options struct {
	server      string
	sizes       []int
	namespaces  int
	conns       int
	actionConns int
	duration    time.Duration
	warmup      time.Duration
	rounds      int
	maxReads    int
	maxWrites   int
	loadWorkers int
	out         string
	// serverEnv is added to the server's environment (GODEBUG, GOMEMLIMIT, ... for experiments).
	serverEnv []string
	// startupOnly measures start-up and memory only, without the load.
	startupOnly bool
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "ceiling" {
		if err := runCeiling(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "ceiling:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	sizes := flag.String("n", "100,1000,10000", "fleet sizes N to measure, comma-separated")
	flag.StringVar(&o.server, "server", "bin/kubevirt-redfish", "the kubevirt-redfish binary to measure")
	flag.IntVar(&o.namespaces, "m", 10, "namespaces M the VMs are spread over")
	flag.IntVar(&o.conns, "c", 64, "connections of the read benchmarks")
	flag.IntVar(&o.actionConns, "action-c", 8, "connections of the action and login benchmarks")
	flag.DurationVar(&o.duration, "d", 4*time.Second, "measured time per benchmark (and as much again for its ceiling)")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured warm-up of each read benchmark (and of its ceiling), spread over its rounds")
	flag.IntVar(&o.rounds, "rounds", 4, "slices a read benchmark is cut into, alternating with slices of the ceiling")
	flag.IntVar(&o.maxReads, "max-reads", 500000, "request budget of a read benchmark (it ends at -d or at this count)")
	flag.IntVar(&o.maxWrites, "max-writes", 1000, "request budget of an action benchmark")
	flag.IntVar(&o.loadWorkers, "load-workers", 32, "parallel creates while loading the fleet")
	flag.StringVar(&o.out, "out", "bin/bench", "directory for results.md, results.json and the logs")
	flag.Func("server-env", "NAME=VALUE added to the server's environment (repeatable), e.g. GODEBUG=gctrace=1", func(v string) error {
		if !strings.Contains(v, "=") {
			return fmt.Errorf("%q is not NAME=VALUE", v)
		}
		o.serverEnv = append(o.serverEnv, v)
		return nil
	})
	flag.BoolVar(&o.startupOnly, "startup-only", false, "measure start-up and memory only, then stop")
	flag.Parse()
	for _, v := range deploymentEnv {
		name, _, _ := strings.Cut(v, "=")
		if !slices.ContainsFunc(o.serverEnv, func(e string) bool { return strings.HasPrefix(e, name+"=") }) {
			o.serverEnv = append([]string{v}, o.serverEnv...)
		}
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 2 {
			log.Fatalf("-n: %q is not a fleet size", s)
		}
		o.sizes = append(o.sizes, n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		log.Fatal(err)
	}
}

// report is everything one harness run measured.
type report struct {
	Started  time.Time     `json:"started"`
	Machine  machine       `json:"machine"`
	Options  reportOptions `json:"options"`
	Sizes    []*sizeResult `json:"sizes"`
	Duration time.Duration `json:"duration"`
}

type reportOptions struct {
	ServerEnv   []string      `json:"serverEnv"`
	Namespaces  int           `json:"namespaces"`
	Conns       int           `json:"conns"`
	ActionConns int           `json:"actionConns"`
	Duration    time.Duration `json:"duration"`
	Warmup      time.Duration `json:"warmup"`
	Rounds      int           `json:"rounds"`
	MaxReads    int           `json:"maxReads"`
	MaxWrites   int           `json:"maxWrites"`
}

type machine struct {
	CPU      string `json:"cpu"`
	CPUs     int    `json:"cpus"`
	MemoryMB int64  `json:"memoryMB"`
	Kernel   string `json:"kernel"`
	Go       string `json:"go"`
}

func run(ctx context.Context, o options) error {
	if _, err := os.Stat(o.server); err != nil {
		return fmt.Errorf("-server %s: %w (run `make build` first)", o.server, err)
	}
	server, err := filepath.Abs(o.server)
	if err != nil {
		return err
	}
	o.server = server
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	rep := &report{Started: time.Now(), Machine: describeMachine(), Options: reportOptions{
		ServerEnv: o.serverEnv, Namespaces: o.namespaces, Conns: o.conns, ActionConns: o.actionConns, Duration: o.duration,
		Warmup: o.warmup, Rounds: o.rounds, MaxReads: o.maxReads, MaxWrites: o.maxWrites}}
	for _, n := range o.sizes {
		res, err := runSize(ctx, o, n)
		if err != nil {
			return fmt.Errorf("N=%d: %w", n, err)
		}
		rep.Sizes = append(rep.Sizes, res)
		// Write what we have after every size: a later failure keeps the earlier results.
		rep.Duration = time.Since(rep.Started)
		if err := writeReport(o.out, rep); err != nil {
			return err
		}
	}
	md, _ := os.ReadFile(filepath.Join(o.out, "results.md"))
	fmt.Print(string(md))
	log.Printf("bench: done in %s; results in %s", time.Since(rep.Started).Round(time.Second), o.out)
	return nil
}

func writeReport(dir string, rep *report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "results.md"), []byte(markdown(rep)), 0o644)
}

func describeMachine() machine {
	m := machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && k == "MemTotal" {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				m.MemoryMB = kb >> 10
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}
