package reliability

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubevirt-redfish/kubevirt-redfish/test/stack"
)

// rrProxy is a small round-robin reverse proxy on 127.0.0.1, as a Service or Route in front
// of the replicas would be; every response says which replica served it (X-Served-By).
type rrProxy struct {
	*httptest.Server
	next atomic.Uint64
}

func newRRProxy(t *testing.T, backends ...string) *rrProxy {
	t.Helper()
	var targets []*url.URL
	for _, b := range backends {
		u, err := url.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, u)
	}
	p := &rrProxy{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			i := int(p.next.Add(1)-1) % len(targets)
			pr.SetURL(targets[i])
			pr.SetXForwarded()
			pr.Out.Header.Set("X-Replica", strconv.Itoa(i))
		},
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Set("X-Served-By", resp.Request.Header.Get("X-Replica"))
			return nil
		},
	}
	p.Server = httptest.NewServer(rp)
	t.Cleanup(p.Close)
	return p
}

// Two replicas behind a round-robin proxy answer consistently: a session opened on one works
// on the other at once and ends on both at logout, the media and boot state written through
// one is what both show, and a resource has the same ETag on both, so If-Match works whichever
// replica a PATCH reaches.
func TestTwoReplicasBehindAProxy(t *testing.T) {
	s := stack.Start(t, stack.Options{})
	second := s.AddServer(t)
	proxy := newRRProxy(t, s.URL, second)
	cl := newClient(proxy.URL)
	direct := []*client{newClient(s.URL), newClient(second)}
	img := stack.NewImageServer(t, 64<<10)
	figures := map[string]any{}

	// Sessions: log in through the proxy (one replica), use the token through both.
	tok, loc := cl.login(t)
	tc := cl.withToken(tok)
	served := map[string]int{}
	for i := 0; i < 20; i++ {
		r := tc.must(t, http.StatusOK, http.MethodGet, sysPath("tenant-a.cp-0"), "")
		served[r.header.Get("X-Served-By")]++
	}
	if served["0"] == 0 || served["1"] == 0 {
		t.Fatalf("the proxy did not spread requests: %v", served)
	}
	var sessions [2][]byte
	for i, d := range direct {
		r := d.withToken(tok).must(t, http.StatusOK, http.MethodGet, loc, "")
		sessions[i] = r.body
		coll := d.withToken(tok).get(t, "/redfish/v1/SessionService/Sessions")
		if !containsMember(coll, loc) {
			t.Errorf("replica %d does not list the session %s: %v", i, loc, coll)
		}
	}
	if !bytes.Equal(sessions[0], sessions[1]) {
		t.Errorf("the session differs between replicas:\n%s\n%s", sessions[0], sessions[1])
	}
	// Logging in on one replica and going straight to the other works at once, every time.
	for i := 0; i < 10; i++ {
		tok2, loc2 := direct[i%2].login(t)
		direct[(i+1)%2].withToken(tok2).must(t, http.StatusOK, http.MethodGet, "/redfish/v1/Systems", "")
		direct[(i+1)%2].withToken(tok2).must(t, http.StatusNoContent, http.MethodDelete, loc2, "")
	}

	// Media, boot and power written through the proxy: how long until both replicas show it,
	// and how many reads right after the answer still saw the old state.
	var stale, reads int
	var worst time.Duration
	converge := func(what string, ok func(*client) bool) {
		t.Helper()
		start := time.Now()
		for i := 0; i < 2; i++ {
			reads++
			if !ok(direct[i]) {
				stale++
			}
		}
		for !ok(direct[0]) || !ok(direct[1]) {
			if time.Since(start) > 10*time.Second {
				t.Fatalf("the replicas did not agree on %s within 10 s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
		worst = max(worst, time.Since(start))
	}
	for i := 0; i < 10; i++ {
		id := []string{"tenant-a.cp-1", "tenant-b.cp-0"}[i%2]
		image := fmt.Sprintf("%s/iso-%d.iso", img.URL, i)
		cl.must(t, http.StatusNoContent, http.MethodPost, insertPath(id), fmt.Sprintf(`{"Image":%q}`, image))
		converge("the media of "+id, func(d *client) bool { return d.get(t, mediaPath(id))["Image"] == image })
		target := []string{"Pxe", "Hdd", "Cd"}[i%3]
		cl.must(t, http.StatusOK, http.MethodPatch, sysPath(id), bootBody(target, "Continuous"))
		converge("the boot override of "+id, func(d *client) bool {
			return d.get(t, sysPath(id))["Boot"].(map[string]any)["BootSourceOverrideTarget"] == target
		})
		if i%2 == 0 {
			cl.must(t, http.StatusNoContent, http.MethodPost, ejectPath(id), "")
			converge("the eject on "+id, func(d *client) bool { return d.get(t, mediaPath(id))["Inserted"] == false })
		}
	}
	cl.must(t, http.StatusNoContent, http.MethodPost, resetPath("tenant-a.cp-2"), `{"ResetType":"On"}`)
	converge("power on", func(d *client) bool {
		ps := d.get(t, sysPath("tenant-a.cp-2"))["PowerState"]
		return ps == "PoweringOn" || ps == "On"
	})
	t.Logf("writes through the proxy: %d of %d reads right after the answer were stale; both replicas agreed within %v", stale, reads, worst)
	figures["reads_right_after_write"] = reads
	figures["stale_reads_right_after_write"] = stale
	figures["replicas_agree_within_ms"] = ms(worst)

	// The same representation, so the same ETag, on both replicas: If-Match taken from one
	// replica is honoured by the other.
	// (Each PATCH changes the resource: wait for both replicas to show it before the next.)
	for i := 0; i < 4; i++ {
		var etag string
		eventuallyf(t, 10*time.Second, "the same ETag on both replicas", func() (bool, string) {
			a, b := direct[0].do(http.MethodGet, sysPath("tenant-a.cp-1"), ""), direct[1].do(http.MethodGet, sysPath("tenant-a.cp-1"), "")
			etag = a.header.Get("ETag")
			return etag == b.header.Get("ETag"), fmt.Sprintf("\n%s\n%s", a.body, b.body)
		})
		req, _ := http.NewRequest(http.MethodPatch, direct[(i+1)%2].base+sysPath("tenant-a.cp-1"),
			bytes.NewReader([]byte(bootBody([]string{"Pxe", "Hdd"}[i%2], "Continuous"))))
		req.SetBasicAuth(adminUser, password)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("If-Match", etag)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("PATCH with the other replica's ETag: %d", resp.StatusCode)
		}
	}

	// Tasks: both replicas list the same imports.
	eventually(t, 10*time.Second, "the same Task list on both replicas", func() bool {
		a, _ := json.Marshal(direct[0].get(t, "/redfish/v1/TaskService/Tasks")["Members"])
		b, _ := json.Marshal(direct[1].get(t, "/redfish/v1/TaskService/Tasks")["Members"])
		return bytes.Equal(a, b)
	})

	// Logout through the proxy ends the session on both replicas.
	tc.must(t, http.StatusNoContent, http.MethodDelete, loc, "")
	start := time.Now()
	eventually(t, 10*time.Second, "the token to be refused by both replicas", func() bool {
		return direct[0].withToken(tok).do(http.MethodGet, "/redfish/v1/Systems", "").status == http.StatusUnauthorized &&
			direct[1].withToken(tok).do(http.MethodGet, "/redfish/v1/Systems", "").status == http.StatusUnauthorized
	})
	figures["logout_effective_on_both_within_ms"] = ms(time.Since(start))
	figures["requests_per_replica_sample"] = served
	record(t, "replicas", figures)
}

func containsMember(coll map[string]any, uri string) bool {
	members, _ := coll["Members"].([]any)
	for _, m := range members {
		if mm, ok := m.(map[string]any); ok && mm["@odata.id"] == uri {
			return true
		}
	}
	return false
}
