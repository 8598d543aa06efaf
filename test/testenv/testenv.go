// Package testenv runs a real etcd + kube-apiserver with the real KubeVirt and
// CDI CRDs installed, for integration tests. There are no controllers, no
// kubelet and no KubeVirt/CDI webhooks: objects are only stored and validated
// against the CRD schemas, which is exactly what a Redfish-to-KubeVirt
// translation layer needs to be tested against.
//
// The binaries and CRD YAMLs come from hack/tools.sh (built once per machine):
//
//	eval "$(hack/tools.sh env)"   # sets KRF_KUBE_APISERVER, KRF_ETCD, KRF_CRD_DIR
//	go test ./test/...
//
// Note there is no namespace controller, so deleted namespaces stay
// Terminating forever; use a fresh namespace per test instead.
package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Env is a running etcd + kube-apiserver with the KubeVirt and CDI CRDs installed.
type Env struct {
	Config         *rest.Config // admin credentials (user "admin" in group system:masters)
	KubeconfigPath string       // a kubeconfig file for the same admin, for starting the server binary
	Dir            string       // temp dir with data, certs and the etcd/kube-apiserver logs; removed by Stop

	logf      func(format string, args ...any)
	apiserver string   // binary path
	apiArgs   []string // flags, reused by StartAPIServer
	etcd      *Process
	api       *Process
	crds      []schema.GroupVersionResource // served by every CRD we installed
}

const (
	envAPIServer = "KRF_KUBE_APISERVER"
	envEtcd      = "KRF_ETCD"
	envCRDDir    = "KRF_CRD_DIR"

	// Generous: a cold start on a 2-core CI machine with several large CRD
	// schemas takes seconds, but a loaded machine can be much slower.
	readyTimeout = 2 * time.Minute

	// stopGrace bounds the wait after SIGTERM: kube-apiserver drains requests on SIGTERM, but
	// there is no need to wait for long-running watches.
	stopGrace = 5 * time.Second
)

// Start launches etcd and kube-apiserver on free 127.0.0.1 ports, installs
// every CRD from $KRF_CRD_DIR and waits until they can be served.
func Start(ctx context.Context) (*Env, error) {
	return start(ctx, log.Printf)
}

func start(ctx context.Context, logf func(string, ...any)) (env *Env, err error) {
	bins := map[string]string{}
	for _, name := range []string{envAPIServer, envEtcd, envCRDDir} {
		v := os.Getenv(name)
		if v == "" {
			return nil, fmt.Errorf("testenv: $%s is not set; run `make tools` (or eval \"$(hack/tools.sh env)\") first", name)
		}
		if _, err := os.Stat(v); err != nil {
			return nil, fmt.Errorf("testenv: $%s: %v; run `make tools` (or eval \"$(hack/tools.sh env)\") first", name, err)
		}
		bins[name] = v
	}

	dir, err := os.MkdirTemp("", "krf-testenv-")
	if err != nil {
		return nil, err
	}
	e := &Env{Dir: dir, logf: logf, apiserver: bins[envAPIServer]}
	defer func() {
		if err != nil {
			// Failing starts are usually explained by the process logs.
			err = fmt.Errorf("%w%s%s", err, logTail(e.etcd), logTail(e.api))
			e.Stop()
			env = nil
		}
	}()

	begin := time.Now()
	ports, err := freePorts(3)
	if err != nil {
		return e, err
	}
	etcdURL, err := e.startEtcd(ctx, bins[envEtcd], ports[0], ports[1])
	if err != nil {
		return e, err
	}
	etcdDone := time.Now()

	if err := e.configureAPIServer(etcdURL, ports[2]); err != nil {
		return e, err
	}
	if err := e.startAPIServer(ctx); err != nil {
		return e, err
	}
	apiDone := time.Now()

	if err := e.installCRDs(ctx, bins[envCRDDir]); err != nil {
		return e, err
	}
	logf("testenv: ready in %s (etcd %s, kube-apiserver %s, %d CRDs %s); dir %s",
		time.Since(begin).Round(time.Millisecond), etcdDone.Sub(begin).Round(time.Millisecond),
		apiDone.Sub(etcdDone).Round(time.Millisecond), len(e.crds), time.Since(apiDone).Round(time.Millisecond), dir)
	return e, nil
}

// Stop kills kube-apiserver and etcd and removes all their data. Safe to call
// more than once.
func (e *Env) Stop() {
	e.api.Stop(stopGrace)
	e.etcd.Stop(stopGrace)
	if e.Dir != "" {
		_ = os.RemoveAll(e.Dir)
	}
}

// StopAPIServer stops only kube-apiserver (etcd and its data stay), to
// simulate an API outage. Requests fail with "connection refused" afterwards.
func (e *Env) StopAPIServer() error {
	if e.api == nil || e.api.Exited() {
		return errors.New("testenv: kube-apiserver is not running")
	}
	e.api.Stop(stopGrace)
	return nil
}

// StartAPIServer starts kube-apiserver again on the same port against the same
// etcd, and waits until it is ready and serves the CRDs again.
func (e *Env) StartAPIServer() error {
	if e.api != nil && !e.api.Exited() {
		return errors.New("testenv: kube-apiserver is already running")
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	begin := time.Now()
	if err := e.startAPIServer(ctx); err != nil {
		return fmt.Errorf("%w%s", err, logTail(e.api))
	}
	if err := e.waitServable(ctx); err != nil {
		return err
	}
	e.logf("testenv: kube-apiserver restarted in %s", time.Since(begin).Round(time.Millisecond))
	return nil
}

// CreateNamespace creates a namespace (there is no namespace controller, so
// it never needs to become "Active" asynchronously: it is usable at once).
func (e *Env) CreateNamespace(ctx context.Context, name string) error {
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	return err
}

// MetricsText returns the raw Prometheus text of kube-apiserver's /metrics,
// e.g. to count apiserver_request_total. Note the call itself is counted too.
func (e *Env) MetricsText(ctx context.Context) (string, error) {
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return "", err
	}
	b, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	return string(b), err
}

// ---- etcd ----

func (e *Env) startEtcd(ctx context.Context, bin string, clientPort, peerPort int) (string, error) {
	var err error
	clientURL := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	e.etcd, err = startProcess(filepath.Join(e.Dir, "etcd.log"), bin,
		"--name=testenv",
		"--data-dir="+filepath.Join(e.Dir, "etcd"),
		"--listen-client-urls="+clientURL,
		"--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=testenv="+peerURL,
		// Data is thrown away after the test; fsync only costs time.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	)
	if err != nil {
		return "", err
	}
	err = e.poll(ctx, e.etcd, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, clientURL+"/health", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return "", fmt.Errorf("testenv: etcd did not become healthy: %w", err)
	}
	return clientURL, nil
}

// ---- kube-apiserver ----

// configureAPIServer picks the port, writes certs, keys, the token file and
// the kubeconfig, and fills e.Config and e.apiArgs.
func (e *Env) configureAPIServer(etcdURL string, port int) error {
	certPEM, keyPEM, err := selfSignedServingCert()
	if err != nil {
		return err
	}
	saKeyPEM, err := ecKeyPEM()
	if err != nil {
		return err
	}
	tokenBytes := make([]byte, 16)
	if _, err := rand.Read(tokenBytes); err != nil {
		return err
	}
	token := hex.EncodeToString(tokenBytes)

	files := map[string][]byte{
		"serving.crt": certPEM,
		"serving.key": keyPEM,
		"sa.key":      saKeyPEM,
		// token,user,uid,"groups": system:masters bypasses RBAC entirely.
		"tokens.csv": []byte(token + `,admin,admin-uid,"system:masters"` + "\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(e.Dir, name), data, 0o600); err != nil {
			return err
		}
	}
	p := func(name string) string { return filepath.Join(e.Dir, name) }
	e.apiArgs = []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + p("certs"), // unused with explicit certs, but keeps it out of /var/run
		"--tls-cert-file=" + p("serving.crt"),
		"--tls-private-key-file=" + p("serving.key"),
		"--token-auth-file=" + p("tokens.csv"),
		// RBAC, so tests with restricted users/service accounts are meaningful.
		"--authorization-mode=RBAC",
		// Required since 1.20 even if nobody requests tokens.
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p("sa.key"),
		"--service-account-signing-key-file=" + p("sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		// No controllers run here; keep background work and moving parts low.
		"--enable-priority-and-fairness=false",
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	}

	e.Config = &rest.Config{
		Host:            "https://127.0.0.1:" + strconv.Itoa(port),
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: certPEM},
		// client-go's default 5 QPS would make tests slow for no benefit.
		QPS:   200,
		Burst: 400,
	}

	kc := clientcmdapi.NewConfig()
	kc.Clusters["testenv"] = &clientcmdapi.Cluster{Server: e.Config.Host, CertificateAuthorityData: certPEM}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "testenv"
	e.KubeconfigPath = p("kubeconfig")
	return clientcmd.WriteToFile(*kc, e.KubeconfigPath)
}

// startAPIServer starts kube-apiserver with e.apiArgs and waits for /readyz.
func (e *Env) startAPIServer(ctx context.Context) error {
	var err error
	// Append so the log of a previous run (before StopAPIServer) is kept.
	e.api, err = startProcess(filepath.Join(e.Dir, "kube-apiserver.log"), e.apiserver, e.apiArgs...)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	err = e.poll(ctx, e.api, func(ctx context.Context) (bool, error) {
		err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("testenv: kube-apiserver did not become ready: %w", err)
	}
	return nil
}

// ---- CRDs ----

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRDs creates every *.yaml/*.json in dir and waits for each CRD to be
// Established and for all its served versions to answer a List.
func (e *Env) installCRDs(ctx context.Context, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	jsonFiles, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	files = append(files, jsonFiles...)
	if len(files) == 0 {
		return fmt.Errorf("testenv: no CRD files in $%s=%s; run `make tools`", envCRDDir, dir)
	}
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	var names []string
	for _, f := range files {
		obj, err := readObject(f)
		if err != nil {
			return err
		}
		if _, err := dyn.Resource(crdGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("testenv: create CRD from %s: %w", f, err)
		}
		names = append(names, obj.GetName())
		group, _, _ := unstructured.NestedString(obj.Object, "spec", "group")
		plural, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "plural")
		versions, _, _ := unstructured.NestedSlice(obj.Object, "spec", "versions")
		for _, v := range versions {
			v, _ := v.(map[string]any)
			if served, _ := v["served"].(bool); served {
				name, _ := v["name"].(string)
				e.crds = append(e.crds, schema.GroupVersionResource{Group: group, Version: name, Resource: plural})
			}
		}
	}

	// Established means the API is accepted; it is served once discovery and
	// the handler caught up, which the List below waits for.
	for _, name := range names {
		err := e.poll(ctx, e.api, func(ctx context.Context) (bool, error) {
			crd, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, c := range conds {
				c, _ := c.(map[string]any)
				if c["type"] == "Established" && c["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("testenv: CRD %s not established: %w", name, err)
		}
	}
	established := time.Now()
	if err := e.waitServable(ctx); err != nil {
		return err
	}
	// kube-apiserver delays every create of a custom resource by 2s while its
	// CRD became Established less than 2s ago (an HA safeguard in
	// apiextensions-apiserver's customresource_handler.go). Wait that out here
	// so tests don't see a mysterious 2s first create.
	time.Sleep(time.Until(established.Add(2 * time.Second)))
	return nil
}

// waitServable waits until a List of every served CRD version succeeds.
func (e *Env) waitServable(ctx context.Context) error {
	cfg := rest.CopyConfig(e.Config)
	cfg.WarningHandler = rest.NoWarnings{} // "v1alpha3 is deprecated" noise
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, gvr := range e.crds {
		var lastErr error
		err := e.poll(ctx, e.api, func(ctx context.Context) (bool, error) {
			_, lastErr = dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
			return lastErr == nil, nil
		})
		if err != nil {
			return fmt.Errorf("testenv: %s not servable: %w (last error: %v)", gvr, err, lastErr)
		}
	}
	return nil
}

func readObject(path string) (*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	obj := &unstructured.Unstructured{}
	if err := utilyaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&obj.Object); err != nil {
		return nil, fmt.Errorf("testenv: parse %s: %w", path, err)
	}
	return obj, nil
}

// ---- helpers ----

// poll runs cond every 100ms until it returns true, ctx expires, the overall
// readyTimeout passes, or p exits (no point waiting for a dead process).
func (e *Env) poll(ctx context.Context, p *Process, cond wait.ConditionWithContextFunc) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("%s exited: %v", filepath.Base(p.Cmd.Path), p.Err())
		}
		return cond(ctx)
	})
}

// freePorts asks the kernel for n distinct free ports on 127.0.0.1. Between
// closing them here and the children binding them another process could take
// one; that is unlikely enough to accept, and much simpler than passing
// listening sockets to etcd and kube-apiserver.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close() // keep open until all are picked, so they differ
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// selfSignedServingCert returns a self-signed certificate for 127.0.0.1 and
// localhost that doubles as its own CA, so clients can trust exactly it.
func selfSignedServingCert() (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "testenv-kube-apiserver"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// ecKeyPEM returns a new P-256 private key; kube-apiserver derives the
// service-account verification key from it as well.
func ecKeyPEM() ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// startProcess starts bin, its output appended to logPath.
func startProcess(logPath, bin string, args ...string) (*Process, error) {
	p, err := StartProcess(exec.Command(bin, args...), logPath)
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	return p, nil
}

// logTail returns the last lines of a process log, formatted for an error
// message, or "" if there is none. nil-safe.
func logTail(p *Process) string {
	if p == nil {
		return ""
	}
	tail := p.Tail(20)
	if tail == "" {
		return ""
	}
	return fmt.Sprintf("\n--- last lines of %s ---\n%s", p.Log, tail)
}
