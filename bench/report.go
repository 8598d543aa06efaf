package main

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// markdown renders the report: the machine, the scaling summary, one table per fleet size,
// and the targets.
func markdown(rep *report) string {
	var b strings.Builder
	m, o := rep.Machine, rep.Options
	fmt.Fprintf(&b, "# kubevirt-redfish benchmark, %s\n\n", rep.Started.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "Machine: %d × %s, %d MB RAM, Linux %s, %s. Harness run time %s.\n\n", m.CPUs, m.CPU, m.MemoryMB, m.Kernel, m.Go, rep.Duration.Round(time.Second))
	fmt.Fprintf(&b, "VMs across %d namespaces, every other one running (with a Running VMI), %d VMs per hosting node. "+
		"Reads with %d connections (the collection also with 1): %s measured per benchmark in %d slices, each after %s of warm-up, "+
		"alternating with as long slices of the bare ceiling with as many connections; actions and logins with %d connections, "+
		"one slice of at most %s or %d requests. Ratios (×) are to that ceiling.\n\n",
		o.Namespaces, vmsPerNode, o.Conns, o.Duration, o.Rounds, (o.Warmup / time.Duration(max(1, o.Rounds))).Round(time.Millisecond),
		o.ActionConns, o.Duration, o.MaxWrites)

	b.WriteString("## Scaling\n\n")
	b.WriteString("| N VMs | load the fleet | start-up to ready (/readyz) | informers synced (logged) | RSS when ready | RSS peak serving systems | RSS peak with the collection at 64 conns | GET ComputerSystem req/s (× ceiling) | its p50 / p99 (× ceiling p99) | Systems collection p50, 1 conn | its body | Systems collection p50, 64 conns |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range rep.Sizes {
		cs := s.find("GET ComputerSystem", false, o.Conns)
		c1 := s.find("GET Systems collection", false, 1)
		c64 := s.find("GET Systems collection", false, o.Conns)
		csLat := "–"
		if cs != nil {
			csLat = fmt.Sprintf("%s / %s (%s)", ms(cs.Load.P50), ms(cs.Load.P99), ratio(float64(cs.Load.P99), float64(cs.Ceiling.Load.P99)))
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.N, secs(s.LoadTime), secs(s.Ready), secs(s.Synced),
			mb(s.RSSReady), mb(s.RSSServing), mb(s.RSSPeak), rpsRatio(cs), csLat, p50(c1), kb(s.CollectionBytes), p50(c64))
	}
	b.WriteString("\n")
	if len(rep.Sizes) >= 2 {
		b.WriteString(scaling(rep))
	}

	for _, s := range rep.Sizes {
		fmt.Fprintf(&b, "## N = %d VMs (%d running, on %d nodes) in %d namespaces\n\n", s.N, s.Running, s.Nodes, s.Namespaces)
		fmt.Fprintf(&b, "ComputerSystem body %d bytes; Systems collection body %s. Sessions: %s.\n\n", s.SystemBytes, kb(s.CollectionBytes), s.Sessions)
		b.WriteString("| benchmark | Accept-Encoding | conns | requests | req/s | × ceiling | p50 | × ceiling | p99 | × ceiling | server CPU per request | × ceiling | server cores | apiserver requests per request (reads + writes) | response body | ceiling req/s, p50, p99 | notes |\n")
		b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---|\n")
		for _, r := range s.Rows {
			b.WriteString(tableRow(r))
		}
		b.WriteString("\n")
	}
	b.WriteString(targets(rep))
	return b.String()
}

func (s *sizeResult) find(name string, gz bool, conns int) *row {
	for _, r := range s.Rows {
		if r.Name == name && r.Gzip == gz && r.Conns == conns {
			return r
		}
	}
	return nil
}

func tableRow(r *row) string {
	enc := "identity"
	if r.Gzip {
		enc = "gzip, deflate"
	}
	l, c := r.Load, r.Ceiling.Load
	body := "–"
	if l.Requests > 0 {
		body = kb(int(l.BodyBytes / int64(l.Requests)))
		if n := l.Encodings["gzip"]; n > 0 {
			body += fmt.Sprintf(" (gzip %d%%)", 100*n/l.Requests)
		}
	}
	note := r.Note
	if r.Ceiling.Note != "" {
		note = strings.TrimSpace(note + " ceiling: " + r.Ceiling.Note)
	}
	return fmt.Sprintf("| %s | %s | %d | %d | %.0f | %s | %s | %s | %s | %s | %s | %s | %.2f | %s + %s | %s | %.0f, %s, %s | %s |\n",
		r.Name, enc, r.Conns, l.Requests, l.RPS, ratio(l.RPS, c.RPS),
		ms(l.P50), ratio(float64(l.P50), float64(c.P50)),
		ms(l.P99), ratio(float64(l.P99), float64(c.P99)),
		us(r.CPUPerReq), ratio(float64(r.CPUPerReq), float64(r.Ceiling.CPUPerReq)), r.Cores,
		perReq(r.APIReadsPer), perReq(r.APIWritesPer), body, c.RPS, ms(c.P50), ms(c.P99), note)
}

// scaling derives per-VM slopes between the smallest and the largest fleet, and draws the
// curves.
func scaling(rep *report) string {
	var b strings.Builder
	lo, hi := rep.Sizes[0], rep.Sizes[len(rep.Sizes)-1]
	dn := float64(hi.N - lo.N)
	c := rep.Options.Conns
	pick := func(s *sizeResult, name string, conns int, f func(*row) float64) float64 {
		if r := s.find(name, false, conns); r != nil {
			return f(r)
		}
		return 0
	}
	p50Of := func(r *row) float64 { return float64(r.Load.P50) }
	b.WriteString("Slopes from the smallest to the largest fleet, and the curves (bars scaled to the largest value of each):\n\n```\n")
	fmt.Fprintf(&b, "RSS when ready            %+7.1f KB per VM   (%s at N=%d, %s at N=%d)\n",
		float64(hi.RSSReady-lo.RSSReady)/1024/dn, mb(lo.RSSReady), lo.N, mb(hi.RSSReady), hi.N)
	fmt.Fprintf(&b, "Systems collection p50    %+7.2f µs per VM   (1 connection)\n",
		(pick(hi, "GET Systems collection", 1, p50Of)-pick(lo, "GET Systems collection", 1, p50Of))/1e3/dn)
	fmt.Fprintf(&b, "informers synced          %+7.1f µs per VM\n", float64(hi.Synced-lo.Synced)/1e3/dn)
	fmt.Fprintf(&b, "GET ComputerSystem p50    %+7.3f ms from N=%d to N=%d (%d connections)\n",
		(pick(hi, "GET ComputerSystem", c, p50Of)-pick(lo, "GET ComputerSystem", c, p50Of))/1e6, lo.N, hi.N, c)
	b.WriteString("\n")
	bar := func(title, unit string, v func(*sizeResult) float64) {
		fmt.Fprintf(&b, "%s\n", title)
		top := 0.0
		for _, s := range rep.Sizes {
			top = math.Max(top, v(s))
		}
		for _, s := range rep.Sizes {
			n := 0
			if top > 0 {
				n = int(math.Round(40 * v(s) / top))
			}
			fmt.Fprintf(&b, "  N=%-6d %-40s %.3g %s\n", s.N, strings.Repeat("#", n), v(s), unit)
		}
	}
	bar("RSS when ready: linear in N", "MB", func(s *sizeResult) float64 { return float64(s.RSSReady) / (1 << 20) })
	bar("Systems collection p50, 1 connection: linear in N", "ms", func(s *sizeResult) float64 {
		return pick(s, "GET Systems collection", 1, p50Of) / 1e6
	})
	bar("informers synced: linear in N", "s", func(s *sizeResult) float64 { return s.Synced.Seconds() })
	bar(fmt.Sprintf("GET ComputerSystem server CPU per request, %d connections: flat in N", c), "µs", func(s *sizeResult) float64 {
		return pick(s, "GET ComputerSystem", c, func(r *row) float64 { return float64(r.CPUPerReq) / 1e3 })
	})
	bar(fmt.Sprintf("GET ComputerSystem throughput, × ceiling, %d connections: flat in N", c), "×", func(s *sizeResult) float64 {
		return pick(s, "GET ComputerSystem", c, func(r *row) float64 { return r.Load.RPS / r.Ceiling.Load.RPS })
	})
	b.WriteString("```\n\n")
	return b.String()
}

// targets checks the targets.
func targets(rep *report) string {
	var b strings.Builder
	b.WriteString("## Targets\n\n")
	check := func(ok bool, format string, args ...any) {
		mark := "PASS"
		if !ok {
			mark = "MISS"
		}
		fmt.Fprintf(&b, "- %s %s\n", mark, fmt.Sprintf(format, args...))
	}
	c := rep.Options.Conns
	for _, s := range rep.Sizes {
		for _, gz := range []bool{false, true} {
			r := s.find("GET ComputerSystem", gz, c)
			if r == nil {
				continue
			}
			enc := "identity"
			if gz {
				enc = "gzip accepted"
			}
			ceil := r.Ceiling.Load
			check(r.Load.RPS >= 0.5*ceil.RPS, "N=%d GET ComputerSystem (%s, %d conns): %.0f req/s = %.2f × the ceiling's %.0f (≥ 0.5)", s.N, enc, c, r.Load.RPS, r.Load.RPS/ceil.RPS, ceil.RPS)
			check(r.Load.P99 <= 2*ceil.P99, "N=%d GET ComputerSystem (%s, %d conns): p99 %s = %.2f × the ceiling's %s (≤ 2)", s.N, enc, c, ms(r.Load.P99), float64(r.Load.P99)/float64(ceil.P99), ms(ceil.P99))
		}
		gets, getAPI := 0, 0.0
		for _, r := range s.Rows {
			if strings.HasPrefix(r.Name, "GET ") {
				gets += r.Load.Total
				rd, wr := r.API.split()
				getAPI += rd + wr
			}
		}
		check(getAPI == 0, "N=%d apiserver requests caused by %d GETs: %.0f (0)", s.N, gets, getAPI)
		for _, r := range s.Rows {
			if strings.HasPrefix(r.Name, "GET ") || r.Load.Total == 0 {
				continue
			}
			check(r.APIReadsPer == 0 && r.APIWritesPer <= 2, "N=%d %s: %.2f writes and %.2f reads per request (≤ 2 writes, no reads): %s", s.N, r.Name, r.APIWritesPer, r.APIReadsPer, r.API)
		}
	}
	if len(rep.Sizes) > 0 {
		s := rep.Sizes[len(rep.Sizes)-1]
		if r := s.find("GET Systems collection", false, 1); r != nil {
			check(r.Load.P50 < 50*time.Millisecond, "N=%d Systems collection p50 %s, 1 connection (< 50 ms)", s.N, ms(r.Load.P50))
		}
		if r := s.find("GET Systems collection", true, 1); r != nil {
			check(r.Load.P50 < 50*time.Millisecond, "N=%d Systems collection p50 %s, 1 connection, gzip accepted (< 50 ms)", s.N, ms(r.Load.P50))
		}
		if r := s.find("GET Systems collection", false, c); r != nil {
			fmt.Fprintf(&b, "- (for information) N=%d Systems collection p50 %s with %d connections: %.0f req/s on %.2f server cores\n", s.N, ms(r.Load.P50), c, r.Load.RPS, r.Cores)
		}
		if s.RSSServing > 0 {
			check(s.RSSServing < 250<<20, "N=%d server RSS peak %s from start-up through the per-system GETs and logins, %s when ready (< 250 MB)", s.N, mb(s.RSSServing), mb(s.RSSReady))
		} else { // -startup-only: no GETs were served
			check(s.RSSPeak < 250<<20, "N=%d server RSS peak %s through start-up, %s when ready (< 250 MB)", s.N, mb(s.RSSPeak), mb(s.RSSReady))
		}
		fmt.Fprintf(&b, "- (for information) N=%d server RSS peak %s over the whole run, with %d connections fetching the %s Systems collection and the actions\n", s.N, mb(s.RSSPeak), c, kb(s.CollectionBytes))
		check(s.Ready < 10*time.Second, "N=%d start-up to ready %s, informers synced in %s (< 10 s)", s.N, secs(s.Ready), secs(s.Synced))
	}
	b.WriteString("\n")
	return b.String()
}

func ratio(v, ceil float64) string {
	if ceil == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", v/ceil)
}

func rpsRatio(r *row) string {
	if r == nil {
		return "–"
	}
	return fmt.Sprintf("%.0f (%.2f×)", r.Load.RPS, r.Load.RPS/r.Ceiling.Load.RPS)
}

func p50(r *row) string {
	if r == nil {
		return "–"
	}
	return ms(r.Load.P50)
}

func perReq(v float64) string {
	if v == 0 {
		return "0"
	}
	return fmt.Sprintf("%.2f", v)
}

func ms(d time.Duration) string {
	switch {
	case d == 0:
		return "–"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	}
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/1e3) }

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func mb(v int64) string { return fmt.Sprintf("%.0f MB", float64(v)/(1<<20)) }

func kb(v int) string {
	if v < 1024 {
		return fmt.Sprintf("%d B", v)
	}
	return fmt.Sprintf("%.1f KB", float64(v)/1024)
}
