// Command kubevirt-redfish serves a Redfish BMC for every allowlisted KubeVirt VirtualMachine.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/crypto/bcrypt"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/config"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/credentials"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/metrics"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/server"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sessions"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/tlsconfig"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

// shutdownGrace bounds how long in-flight requests may finish after SIGTERM.
const shutdownGrace = 20 * time.Second

type options struct {
	configPath  string
	kubeconfig  string
	listen      string
	logLevel    string
	demo        bool
	leaderElect bool
	namespace   string
	// pprofListen is the address of a net/http/pprof listener; empty serves none.
	pprofListen string
	// insecureHTTP overrides tls.insecureHTTP when the flag is given.
	insecureHTTP *bool
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "preflight" {
		os.Exit(runPreflight(os.Args[2:], os.Stdout, os.Stderr))
	}
	var o options
	flag.StringVar(&o.configPath, "config", "", "path of the YAML configuration file")
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then in-cluster)")
	flag.StringVar(&o.listen, "listen", "", "listen address, overriding the configuration")
	flag.StringVar(&o.logLevel, "log-level", "", "debug, info, warn or error, overriding the configuration")
	flag.BoolVar(&o.demo, "demo", false, "serve an in-memory demo cluster with simulated VMs (no cluster needed)")
	flag.BoolVar(&o.leaderElect, "leader-elect", true, "run background loops only on the replica holding the Lease "+leaseName+" in $POD_NAMESPACE")
	flag.StringVar(&o.namespace, "namespace", podNamespace(), "the server's own namespace, where sessions, the leader Lease and passwordSecret Secrets live (default: $POD_NAMESPACE, then the service account's namespace, then kubevirt-redfish)")
	flag.StringVar(&o.pprofListen, "pprof-listen", "", "address of a Go profiling (net/http/pprof) listener, e.g. 127.0.0.1:6060; off when empty. It has no authentication: keep it on localhost")
	insecure := flag.Bool("insecure-http", false, "serve plain HTTP instead of HTTPS, overriding tls.insecureHTTP (the demo defaults to true)")
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "insecure-http" {
			o.insecureHTTP = insecure
		}
	})
	if *showVersion {
		fmt.Println(version)
		return
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "kubevirt-redfish:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	cfg, err := loadConfig(o)
	if err != nil {
		return err
	}
	log, err := newLogger(cfg.LogLevel)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	httpErrorLog := routeLibraryLogs(log)

	// sig ends at SIGTERM. ctx, under which the caches, sessions, credential watches and leader
	// election run, ends with it only until the server listens; from then on it ends after the
	// HTTP server drained, so that requests in flight at SIGTERM keep live caches.
	sig, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopEarly := context.AfterFunc(sig, cancel)

	dyn, rc, err := clusterClient(ctx, o)
	if err != nil {
		return err
	}
	m := metrics.New()
	client := kubevirt.NewClient(dyn, cfg.Namespaces(), log)
	client.UseMetrics(m)
	client.CDROMHotplug = cfg.Media.Hotplug
	started := time.Now()
	if err := client.Start(ctx); err != nil {
		return err
	}
	log.Info("informer caches synced", zap.Strings("namespaces", cfg.Namespaces()), zap.Duration("took", time.Since(started)))
	// Leadership ends at SIGTERM: the Lease is released at once, so that another replica takes
	// the background loops over without waiting for it to expire.
	leading, stopLeading := context.WithCancel(ctx)
	defer stopLeading()
	leaderDone := make(chan struct{})
	if rc == nil || !o.leaderElect {
		close(leaderDone)
		go client.RunBackground(ctx)
	} else {
		go func() {
			defer close(leaderDone)
			if err := runLeaderElected(leading, rc, o.namespace, log, client.RunBackground); err != nil {
				log.Error("leader election", zap.Error(err))
			}
		}()
	}

	store := sessions.New(dyn, sessions.Options{Namespace: o.namespace, Timeout: cfg.Sessions.Timeout,
		MaxLifetime: cfg.Sessions.MaxLifetime, MaxPerUser: cfg.Sessions.MaxPerUser, Log: log})
	store.Run(ctx)
	wait, cancelWait := context.WithTimeout(ctx, 30*time.Second)
	if err := store.WaitSynced(wait); err != nil {
		// Serve anyway: logins fail (and clients fall back to Basic) until Secrets can be read.
		log.Error("sessions are not available yet", zap.Error(err))
	}
	cancelWait()
	handler := server.New(cfg, client, log, server.WithMetrics(m), server.WithSessions(store))
	creds := credentials.New(cfg, credentials.Options{Namespace: o.namespace, Dyn: dyn, Apply: handler.SetConfig, Log: log})
	if err := creds.Start(ctx); err != nil {
		return err
	}
	tlsConfig, err := serving(ctx, cfg, log)
	if err != nil {
		return err
	}

	if o.pprofListen != "" {
		go servePprof(o.pprofListen, log)
	}
	srv := server.HTTPServer(cfg.Listen, handler, server.DefaultLimits)
	srv.TLSConfig = tlsConfig
	srv.ErrorLog = httpErrorLog
	errc := make(chan error, 1)
	go func() {
		if tlsConfig != nil {
			errc <- srv.ListenAndServeTLS("", "")
		} else {
			errc <- srv.ListenAndServe()
		}
	}()
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
	}
	log.Info("serving Redfish", zap.String("url", scheme+"://"+cfg.Listen+"/redfish/v1"), zap.String("version", version))
	if o.demo {
		printDemoBanner(scheme + "://" + cfg.Listen)
	}
	stopEarly()
	select {
	case err := <-errc:
		return err
	case <-sig.Done():
	}
	log.Info("shutting down", zap.Duration("grace", shutdownGrace))
	sctx, cancelShutdown := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancelShutdown()
	stopLeading()
	err = srv.Shutdown(sctx)
	cancel()
	select { // the Lease release
	case <-leaderDone:
	case <-sctx.Done():
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func loadConfig(o options) (*config.Config, error) {
	var cfg *config.Config
	var err error
	switch {
	case o.configPath != "":
		cfg, err = config.Load(o.configPath)
	case o.demo:
		cfg, err = demoConfig()
	default:
		return nil, errors.New("--config is required (or --demo for the in-memory demo)")
	}
	if err != nil {
		return nil, err
	}
	if o.listen != "" {
		cfg.Listen = o.listen
	}
	if o.logLevel != "" {
		cfg.LogLevel = o.logLevel
	}
	if o.insecureHTTP != nil {
		cfg.TLS.InsecureHTTP = *o.insecureHTTP
		if !cfg.TLS.InsecureHTTP && o.demo {
			cfg.TLS.SelfSignedNames = append(cfg.TLS.SelfSignedNames, "127.0.0.1")
		}
	}
	return cfg, nil
}

// demoConfig exposes the demo tenants to admin/password (everything) and to tenant-a-admin
// (tenant-a only), so the allowlist can be seen at work.
func demoConfig() (*config.Config, error) {
	hash, err := bcrypt.GenerateFromPassword([]byte("password"), bcrypt.DefaultCost)
	if err != nil {
		return nil, err
	}
	f := config.File{
		Listen: "127.0.0.1:8000",
		// make run serves plain HTTP; --insecure-http=false serves HTTPS with a self-signed
		// certificate.
		TLS: config.TLSFile{InsecureHTTP: true},
		Allowlist: []config.EntryFile{
			{Name: "tenant-a", Namespace: "tenant-a"},
			{Name: "tenant-b", Namespace: "tenant-b"},
		},
		Users: []config.UserFile{
			{Username: "admin", PasswordHash: string(hash), Allow: []string{"*"}},
			{Username: "tenant-a-admin", PasswordHash: string(hash), Allow: []string{"tenant-a"}},
		},
	}
	return f.Compile()
}

// clusterClient connects to the cluster: --kubeconfig, then $KUBECONFIG, then in-cluster. In
// demo mode it builds the in-memory cluster (no rest.Config) and starts the simulator on it.
func clusterClient(ctx context.Context, o options) (dynamic.Interface, *rest.Config, error) {
	if o.demo {
		dyn, err := sim.NewDemoCluster()
		if err != nil {
			return nil, nil, err
		}
		s := sim.New(dyn, sim.Options{BootDelay: 2 * time.Second, ShutdownDelay: 2 * time.Second})
		return dyn, nil, s.Run(ctx)
	}
	rc, err := restConfig(o.kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	streamInitialLists()
	rc.QPS, rc.Burst = 50, 100
	rc.UserAgent = "kubevirt-redfish/" + version
	rc.Wrap(kubevirt.RetryWatches)
	dyn, err := dynamic.NewForConfig(rc)
	return dyn, rc, err
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	rc, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig, no $KUBECONFIG and not in a cluster: %w", err)
	}
	return rc, nil
}

func newLogger(level string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("log level: %w", err)
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(lvl)
	return zc.Build()
}

func printDemoBanner(base string) {
	fmt.Printf(`
kubevirt-redfish demo: an in-memory cluster with simulated VMs (no cluster needed)

  Redfish service:  %[1]s/redfish/v1
  Credentials:      admin / password          (all tenants)
                    tenant-a-admin / password (tenant-a only)
  Systems:          tenant-a.cp-0  tenant-a.cp-1  tenant-a.cp-2  tenant-b.cp-0

  curl -s -u admin:password %[1]s/redfish/v1/Systems/tenant-a.cp-0
  curl -s -u admin:password -X POST -H 'Content-Type: application/json' \
       -d '{"ResetType":"On"}' %[1]s/redfish/v1/Systems/tenant-a.cp-0/Actions/ComputerSystem.Reset

`, base)
}

// serving returns the TLS configuration of the listener, or nil for plain HTTP (only when
// tls.insecureHTTP says so). The certificate files are re-read every reloadInterval; without
// them a self-signed certificate is generated.
func serving(ctx context.Context, cfg *config.Config, log *zap.Logger) (*tls.Config, error) {
	if cfg.TLS.InsecureHTTP {
		log.Warn("serving plain HTTP (tls.insecureHTTP): credentials cross the network in clear unless a proxy terminates TLS in front")
		return nil, nil
	}
	if cfg.TLS.CertFile != "" {
		src, err := tlsconfig.Load(cfg.TLS.CertFile, cfg.TLS.KeyFile, log)
		if err != nil {
			return nil, err
		}
		go src.Watch(ctx, cfg.ReloadInterval)
		return tlsconfig.ServerConfig(src), nil
	}
	names := cfg.TLS.SelfSignedNames
	if host, _, err := net.SplitHostPort(cfg.Listen); err == nil && host != "" && host != "0.0.0.0" && host != "::" {
		names = append(names, host)
	}
	src, err := tlsconfig.SelfSigned(names)
	if err != nil {
		return nil, err
	}
	log.Warn("no tls.certFile configured: serving a self-signed certificate generated at start; clients must skip verification or trust it, and it changes at every restart",
		zap.Strings("names", src.Certificate().Leaf.DNSNames), zap.Time("notAfter", src.Certificate().Leaf.NotAfter))
	return tlsconfig.ServerConfig(src), nil
}
