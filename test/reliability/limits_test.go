package reliability

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"golang.org/x/crypto/bcrypt"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/config"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/server"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/stack"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/testenv"
)

// shortLimits are the production limits scaled down so the timeouts can be watched at work.
var shortLimits = server.Limits{
	ReadHeaderTimeout: 500 * time.Millisecond,
	ReadTimeout:       time.Second,
	WriteTimeout:      2 * time.Second,
	IdleTimeout:       time.Second,
	MaxHeaderBytes:    8 << 10,
}

// limitServer serves the real handler over the demo cluster on a real 127.0.0.1 listener
// with the given limits; it returns the address.
func limitServer(t *testing.T, l server.Limits) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dyn, err := sim.NewDemoCluster()
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.New(dyn, sim.Options{BootDelay: 50 * time.Millisecond, ShutdownDelay: 50 * time.Millisecond}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	hash, _ := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	f := config.File{
		Allowlist: []config.EntryFile{{Namespace: "tenant-a"}, {Namespace: "tenant-b"}},
		Users:     []config.UserFile{{Username: adminUser, PasswordHash: string(hash), Allow: []string{"*"}}},
	}
	cfg, err := f.Compile()
	if err != nil {
		t.Fatal(err)
	}
	client := kubevirt.NewClient(dyn, cfg.Namespaces(), zap.NewNop())
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := server.HTTPServer(ln.Addr().String(), server.New(cfg, client, zap.NewNop()), l)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// rawRequest sends a hand-written request on a new connection and returns the response.
func rawRequest(t *testing.T, addr, req string) (*http.Response, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, req); err != nil && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func basicAuthHeader() string {
	return "Authorization: Basic YWRtaW46cGFzc3dvcmQ=\r\n" // admin:password
}

// closedWithin reports how long the server took to close conn (reading until EOF or reset),
// failing when it stays open past max.
func closedWithin(t *testing.T, conn net.Conn, max time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(max))
	_, err := io.Copy(io.Discard, conn)
	took := time.Since(start)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for more than %v", max)
	}
	return took
}

// Body and header size limits, and 415 for a body that is not JSON, on a real listener.
func TestInputLimits(t *testing.T) {
	addr := limitServer(t, shortLimits)
	cl := newClient("http://" + addr)
	reset := resetPath("tenant-a.cp-0")

	t.Run("body over 1 MiB is 413", func(t *testing.T) {
		big := `{"ResetType":"On","Pad":"` + strings.Repeat("x", 1<<20) + `"}`
		r := cl.do(http.MethodPost, reset, big)
		if r.status != http.StatusRequestEntityTooLarge || r.errorCode() == "" {
			t.Fatalf("1 MiB + %d bytes: %v", len(big)-(1<<20), r)
		}
		// Without a Content-Length (chunked), the limit holds as the body streams in.
		pr, pw := io.Pipe()
		go func() {
			_, _ = io.WriteString(pw, `{"Pad":"`)
			for i := 0; i < 2<<10; i++ {
				if _, err := io.WriteString(pw, strings.Repeat("y", 1<<10)); err != nil {
					return
				}
			}
			pw.Close()
		}()
		req, _ := http.NewRequest(http.MethodPatch, cl.base+sysPath("tenant-a.cp-0"), pr)
		req.SetBasicAuth(adminUser, password)
		req.Header.Set("Content-Type", "application/json")
		resp, err := cl.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		pr.CloseWithError(io.ErrClosedPipe)
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("chunked 2 MiB body: %d", resp.StatusCode)
		}
		// Exactly 1 MiB is read, and judged on its content.
		atLimit := `{"Pad":"` + strings.Repeat("x", 1<<20-len(`{"Pad":""}`)) + `"}`
		if r := cl.do(http.MethodPatch, sysPath("tenant-a.cp-0"), atLimit); r.status != http.StatusBadRequest {
			t.Fatalf("a body of exactly 1 MiB: %v", r)
		}
	})

	t.Run("headers past the limit are 431", func(t *testing.T) {
		resp, _ := rawRequest(t, addr, "GET /redfish/v1/ HTTP/1.1\r\nHost: x\r\nX-Pad: "+strings.Repeat("p", 16<<10)+"\r\n\r\n")
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("16 KiB header with an 8 KiB limit: %d", resp.StatusCode)
		}
		resp, _ = rawRequest(t, addr, "GET /redfish/v1/ HTTP/1.1\r\nHost: x\r\nX-Pad: "+strings.Repeat("p", 2<<10)+"\r\n\r\n")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("2 KiB header: %d", resp.StatusCode)
		}
	})

	t.Run("a body that is not JSON is 415", func(t *testing.T) {
		for _, tc := range []struct {
			method, path, ct, body string
			want                   int
		}{
			{http.MethodPost, reset, "text/plain", `{"ResetType":"On"}`, http.StatusUnsupportedMediaType},
			{http.MethodPost, reset, "application/x-www-form-urlencoded", `ResetType=On`, http.StatusUnsupportedMediaType},
			{http.MethodPost, reset, "application/xml", `<ResetType>On</ResetType>`, http.StatusUnsupportedMediaType},
			{http.MethodPatch, sysPath("tenant-a.cp-0"), "multipart/form-data; boundary=x", `--x--`, http.StatusUnsupportedMediaType},
			{http.MethodPost, "/redfish/v1/SessionService/Sessions", "text/plain", `{"UserName":"admin","Password":"password"}`, http.StatusUnsupportedMediaType},
			{http.MethodPost, insertPath("tenant-a.cp-1"), "application/octet-stream", `{"Image":"http://127.0.0.1/x.iso"}`, http.StatusUnsupportedMediaType},
			{http.MethodPost, reset, "application/json; charset=utf-8", `{"ResetType":"ForceOff"}`, http.StatusNoContent},
			{http.MethodPost, reset, "Application/JSON", `{"ResetType":"ForceOff"}`, http.StatusNoContent},
			{http.MethodPost, reset, "", `{"ResetType":"ForceOff"}`, http.StatusNoContent}, // no Content-Type: read as JSON
			// sushy: EjectMedia with no body and no Content-Type, and its retry with {}.
			{http.MethodPost, ejectPath("tenant-a.cp-1"), "", "", http.StatusNoContent},
			{http.MethodPost, ejectPath("tenant-a.cp-1"), "application/json", "{}", http.StatusNoContent},
			{http.MethodPost, ejectPath("tenant-a.cp-1"), "text/plain", "", http.StatusNoContent}, // no body, nothing to misread
		} {
			req, _ := http.NewRequest(tc.method, cl.base+tc.path, strings.NewReader(tc.body))
			if tc.body == "" {
				req.Body, req.ContentLength = http.NoBody, 0
			}
			if tc.ct != "" {
				req.Header.Set("Content-Type", tc.ct)
			}
			if !strings.Contains(tc.path, "/Sessions") {
				req.SetBasicAuth(adminUser, password)
			}
			resp, err := cl.hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s %s with %q: %d, want %d: %s", tc.method, tc.path, tc.ct, resp.StatusCode, tc.want, b)
			}
			if tc.want == http.StatusUnsupportedMediaType && !strings.Contains(string(b), "HeaderInvalid") {
				t.Errorf("415 without the Redfish envelope: %s", b)
			}
		}
	})
}

// Slowloris: connections that trickle their headers or body, or sit idle, are cut off by the
// timeouts, and meanwhile other clients are served at once.
func TestSlowClientsCannotHoldTheServer(t *testing.T) {
	addr := limitServer(t, shortLimits)
	cl := newClient("http://" + addr)
	const slow = 100

	// 100 connections send a request line and then one header byte every 100 ms.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var longest time.Duration
	for i := 0; i < slow; i++ {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			_, _ = io.WriteString(conn, "GET /redfish/v1/Systems HTTP/1.1\r\nHost: x\r\nX-Slow: ")
			go func() {
				for time.Since(start) < 10*time.Second {
					if _, err := conn.Write([]byte("a")); err != nil {
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}()
			took := closedWithin(t, conn, 10*time.Second)
			mu.Lock()
			longest = max(longest, took)
			mu.Unlock()
		}()
	}
	// Normal clients are served meanwhile.
	var worst time.Duration
	for i := 0; i < 20; i++ {
		r := cl.do(http.MethodGet, sysPath("tenant-a.cp-0"), "")
		if r.status != http.StatusOK {
			t.Fatalf("a normal request among slowloris connections: %v", r)
		}
		worst = max(worst, r.took)
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	t.Logf("%d slowloris connections cut after at most %v (ReadHeaderTimeout %v); normal GETs meanwhile took at most %v",
		slow, longest.Round(time.Millisecond), shortLimits.ReadHeaderTimeout, worst.Round(time.Millisecond))
	if longest > shortLimits.ReadHeaderTimeout+2*time.Second {
		t.Errorf("a slow header held a connection for %v", longest)
	}
	if worst > 3*time.Second {
		t.Errorf("normal requests slowed down to %v", worst)
	}

	// A body trickled one byte at a time is cut off by ReadTimeout.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "POST "+resetPath("tenant-a.cp-0")+" HTTP/1.1\r\nHost: x\r\n"+basicAuthHeader()+
		"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	go func() {
		for i := 0; i < 100; i++ {
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	took := closedWithin(t, conn, 10*time.Second)
	t.Logf("a trickled body was cut after %v (ReadTimeout %v)", took.Round(time.Millisecond), shortLimits.ReadTimeout)
	if took > shortLimits.ReadTimeout+2*time.Second {
		t.Errorf("a slow body held a connection for %v", took)
	}

	// An idle keep-alive connection is closed by IdleTimeout.
	conn2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	_, _ = io.WriteString(conn2, "GET /redfish/v1/ HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(conn2)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	start := time.Now()
	_ = conn2.SetReadDeadline(start.Add(10 * time.Second))
	_, err = br.ReadByte()
	idle := time.Since(start)
	t.Logf("an idle keep-alive connection was closed after %v (IdleTimeout %v)", idle.Round(time.Millisecond), shortLimits.IdleTimeout)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || idle > shortLimits.IdleTimeout+2*time.Second {
		t.Errorf("an idle connection stayed open for %v", idle)
	}
	record(t, "limits", map[string]any{
		"slowloris_connections":       slow,
		"slowloris_cut_after_ms":      ms(longest),
		"normal_get_max_ms_meanwhile": ms(worst),
		"slow_body_cut_after_ms":      ms(took),
		"idle_conn_closed_after_ms":   ms(idle),
		"short_limits_read_header_ms": ms(shortLimits.ReadHeaderTimeout),
		"short_limits_read_ms":        ms(shortLimits.ReadTimeout),
		"short_limits_idle_ms":        ms(shortLimits.IdleTimeout),
		"production_limits":           fmt.Sprintf("%+v", server.DefaultLimits),
	})
}

// The binary serves with the production limits (server.DefaultLimits): a 100 KiB header is
// refused, a slowloris connection is cut after ReadHeaderTimeout.
func TestBinaryLimits(t *testing.T) {
	addr := stack.FreeAddr(t)
	p, err := testenv.StartProcess(exec.Command(serverBinary(t), "--demo", "--listen", addr), filepath.Join(t.TempDir(), "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	eventually(t, time.Minute, "the demo server", func() bool {
		resp, err := http.Get("http://" + addr + "/redfish/v1/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	_, _ = io.WriteString(slow, "GET /redfish/v1/ HTTP/1.1\r\nHost: x\r\n")

	resp, _ := rawRequest(t, addr, "GET /redfish/v1/ HTTP/1.1\r\nHost: x\r\nX-Pad: "+strings.Repeat("p", 100<<10)+"\r\n\r\n")
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("100 KiB of headers: %d", resp.StatusCode)
	}
	cl := newClient("http://" + addr)
	if r := cl.do(http.MethodPost, resetPath("tenant-a.cp-0"), `{"Pad":"`+strings.Repeat("x", 1<<20)+`"}`); r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over 1 MiB: %v", r)
	}
	took := closedWithin(t, slow, server.DefaultLimits.ReadHeaderTimeout+5*time.Second)
	t.Logf("the binary cut a connection that never finished its headers after %v", took.Round(time.Millisecond))
}
