package reliability

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/stack"
)

// A register is one field of one VM that the race rounds write: its value after every
// successful request is what that request asked for.
type register struct{ vm, field string }

// write is one request of a round.
type write struct {
	reg        register
	value      string // what the field holds if this request wins
	method     string
	path, body string
	// filled in when it ran
	start, end time.Time
	status     int
	code, msg  string
}

// writeFor builds the request that sets field of vm to value.
func writeFor(vm, field, value string) *write {
	w := &write{reg: register{vm, field}, value: value}
	switch field {
	case "boot":
		w.method, w.path, w.body = http.MethodPatch, sysPath(vm), bootBody(value, "Continuous")
	case "led":
		w.method, w.path, w.body = http.MethodPatch, sysPath(vm), fmt.Sprintf(`{"IndicatorLED":%q}`, value)
	case "secureboot":
		w.method, w.path, w.body = http.MethodPatch, sysPath(vm)+"/SecureBoot", fmt.Sprintf(`{"SecureBootEnable":%s}`, value)
	case "power":
		rt := map[string]string{"Once": "On", "Halted": "ForceOff"}[value]
		w.method, w.path, w.body = http.MethodPost, resetPath(vm), fmt.Sprintf(`{"ResetType":%q}`, rt)
	case "media":
		if value == "" {
			w.method, w.path = http.MethodPost, ejectPath(vm)
		} else {
			w.method, w.path, w.body = http.MethodPost, insertPath(vm), fmt.Sprintf(`{"Image":%q}`, value)
		}
	}
	return w
}

// fieldOf reads a register's value from the VM in the apiserver.
func fieldOf(vm *virtv1.VirtualMachine, field string) string {
	switch field {
	case "boot":
		return string(kubevirt.Boot(vm).Target)
	case "led":
		return string(kubevirt.IndicatorLEDOf(vm))
	case "secureboot":
		return fmt.Sprint(kubevirt.SecureBootEnabled(vm.Spec.Template.Spec.Domain))
	case "power":
		return string(kubevirt.RunStrategy(vm))
	case "media":
		return kubevirt.MediaOf(kubevirt.Machine{VM: vm}).Image
	}
	return ""
}

var raceFields = []string{"boot", "led", "secureboot", "power", "media"}

// runRound fires every write at once (all wait on one gate) and returns them when all have
// answered. Every answer must be a success or a 409 that says why.
func runRound(t *testing.T, cl *client, writes []*write) (ok, conflicts int) {
	t.Helper()
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range writes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			w.start = time.Now()
			r := cl.do(w.method, w.path, w.body)
			w.end = time.Now()
			if r.err != nil {
				t.Errorf("%s %s: %v", w.method, w.path, r.err)
				return
			}
			w.status, w.code, w.msg = r.status, r.errorCode(), r.errorMessage()
		}()
	}
	close(gate)
	wg.Wait()
	for _, w := range writes {
		switch {
		case w.status >= 200 && w.status < 300:
			ok++
		case w.status == http.StatusConflict:
			conflicts++
			if !strings.HasSuffix(w.code, ".ResourceInUse") || len(w.msg) < 20 {
				t.Errorf("409 without a reason for %s %s: %s %q", w.method, w.path, w.code, w.msg)
			}
		default:
			t.Errorf("%s %s %s: %d %s %s", w.method, w.path, w.body, w.status, w.code, w.msg)
		}
	}
	return ok, conflicts
}

// candidates are the values a register may hold after a round: those of the successful
// writes that no other successful write of the register followed (started after it
// answered). With no successful write, the value before the round.
func candidates(writes []*write, reg register, before string) map[string]bool {
	var succ []*write
	for _, w := range writes {
		if w.reg == reg && w.status >= 200 && w.status < 300 {
			succ = append(succ, w)
		}
	}
	out := map[string]bool{}
	if len(succ) == 0 {
		out[before] = true
		return out
	}
	for _, w := range succ {
		last := true
		for _, o := range succ {
			if o.start.After(w.end) {
				last = false
				break
			}
		}
		if last {
			out[w.value] = true
		}
	}
	return out
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, fmt.Sprintf("%q", k))
	}
	sort.Strings(out)
	return out
}

// 100 parallel mixed operations (Reset, Boot PATCH, IndicatorLED, SecureBoot, InsertMedia,
// EjectMedia), first all on one VM, then spread over four: no update is lost, the final VM
// spec is what the successful answers imply, conflicts are retried or reported as 409 with a
// reason, and the VM never references a media volume that is gone.
func TestRaces(t *testing.T) {
	s := stack.Start(t, stack.Options{})
	cl := newClient(s.URL)
	img := stack.NewImageServer(t, 64<<10)
	images := []string{img.URL + "/a.iso", img.URL + "/b.iso", img.URL + "/c.iso"}
	values := map[string][]string{
		"boot":       {"Pxe", "Hdd", "Cd"},
		"led":        {"Lit", "Blinking", "Off"},
		"secureboot": {"true", "false"},
		"power":      {"Once", "Halted"},
		"media":      append([]string{""}, images...),
	}
	figures := map[string]any{}

	for _, scope := range []struct {
		name string
		vms  []string
	}{
		{"one VM", []string{"tenant-a.cp-0"}},
		{"four VMs", []string{"tenant-a.cp-0", "tenant-a.cp-1", "tenant-a.cp-2", "tenant-b.cp-0"}},
	} {
		t.Run(scope.name, func(t *testing.T) {
			var totalOK, totalConflicts, rounds int
			// Uniform rounds: every write of a register asks for the same value, so the final
			// spec is known exactly and any lost update shows. Mixed rounds: random values,
			// checked against what the order of the answers allows.
			plan := []string{"uniform", "uniform", "mixed", "uniform", "mixed", "mixed"}
			for ri, kind := range plan {
				before := map[register]string{}
				for _, id := range scope.vms {
					ns, name, _ := kubevirt.ParseSystemID(id)
					vm := apiVM(t, s.Dyn, ns, name)
					for _, f := range raceFields {
						before[register{id, f}] = fieldOf(vm, f)
					}
				}
				target := map[register]string{}
				var writes []*write
				for i := 0; i < 100; i++ {
					id := scope.vms[i%len(scope.vms)]
					f := raceFields[(i/len(scope.vms))%len(raceFields)]
					reg := register{id, f}
					vals := values[f]
					var v string
					if kind == "uniform" {
						if _, ok := target[reg]; !ok {
							// A value other than the current one, so every register changes.
							for {
								v = vals[rand.IntN(len(vals))]
								if v != before[reg] {
									break
								}
							}
							target[reg] = v
						}
						v = target[reg]
					} else {
						v = vals[rand.IntN(len(vals))]
					}
					writes = append(writes, writeFor(id, f, v))
				}
				rand.Shuffle(len(writes), func(i, j int) { writes[i], writes[j] = writes[j], writes[i] })
				ok, conflicts := runRound(t, cl, writes)
				totalOK += ok
				totalConflicts += conflicts
				rounds++
				for _, id := range scope.vms {
					ns, name, _ := kubevirt.ParseSystemID(id)
					vm := apiVM(t, s.Dyn, ns, name)
					for _, f := range raceFields {
						reg := register{id, f}
						got := fieldOf(vm, f)
						want := candidates(writes, reg, before[reg])
						if !want[got] {
							t.Errorf("round %d (%s), %s %s: the VM holds %q; the answers allow only %v", ri, kind, id, f, got, keys(want))
						}
					}
					media := kubevirt.MediaOf(kubevirt.Machine{VM: vm})
					if media.Inserted {
						if _, err := s.Dyn.Resource(kubevirt.DataVolumeResource).Namespace(ns).Get(t.Context(), media.DataVolume, metav1GetOptions()); err != nil {
							t.Errorf("round %d: %s references media volume %s, which is gone: %v", ri, id, media.DataVolume, err)
						}
					}
					checkMatchesCluster(t, cl, s.Dyn, id)
				}
				if t.Failed() {
					t.FailNow()
				}
			}
			orphans := orphanMediaVolumes(t, s.Dyn)
			t.Logf("%d rounds of 100 parallel writes: %d succeeded, %d answered 409; %d orphan media volumes", rounds, totalOK, totalConflicts, len(orphans))
			figures[scope.name] = map[string]any{"rounds": rounds, "writes": rounds * 100, "succeeded": totalOK,
				"conflicts_409": totalConflicts, "orphan_media_datavolumes": len(orphans)}
		})
	}
	record(t, "races", figures)
}

func metav1GetOptions() metav1.GetOptions { return metav1.GetOptions{} }
