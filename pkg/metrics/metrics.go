// Package metrics holds the Prometheus collectors of kubevirt-redfish. Labels are bounded:
// routes are chi templates ("/redfish/v1/Systems/{id}"), never raw ids.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the collectors, registered on their own registry.
type Metrics struct {
	Registry        *prometheus.Registry
	Requests        *prometheus.CounterVec
	RequestDuration *prometheus.HistogramVec
	Actions         *prometheus.CounterVec
	APIErrors       *prometheus.CounterVec
	InformersSynced prometheus.Gauge
	AuthFailures    *prometheus.CounterVec
	ActiveSessions  prometheus.Gauge
	ImportsRunning  prometheus.Gauge
	ImportDuration  prometheus.Histogram
	// MediaOrphansDeleted counts per-VM media DataVolumes the background sweep deleted because
	// their VM did not reference them: an InsertMedia interrupted between creating the volume
	// and patching the VM, or an eject whose delete never happened.
	MediaOrphansDeleted prometheus.Counter
	// SystemInfo is 1 per exposed system, labelled with the hosting node of its running VMI,
	// so alerts can say which physical failure domain holds which tenant's control plane.
	SystemInfo *prometheus.GaugeVec
}

// New creates and registers the collectors, plus the Go and process collectors.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubevirt_redfish_http_requests_total", Help: "HTTP requests by route template, method and status code.",
		}, []string{"route", "method", "code"}),
		RequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kubevirt_redfish_http_request_duration_seconds", Help: "HTTP request latency by route template and method.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "method"}),
		Actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubevirt_redfish_actions_total", Help: "Redfish actions (reset types, boot changes, media insert/eject) by result.",
		}, []string{"action", "result"}),
		APIErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubevirt_redfish_apiserver_errors_total", Help: "Failed Kubernetes API requests by operation.",
		}, []string{"operation"}),
		InformersSynced: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubevirt_redfish_informers_synced", Help: "1 when every informer cache has synced.",
		}),
		AuthFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubevirt_redfish_auth_failures_total", Help: "Rejected authentications by method (basic, session, login).",
		}, []string{"method"}),
		ActiveSessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubevirt_redfish_sessions_active", Help: "Redfish sessions currently valid.",
		}),
		ImportsRunning: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubevirt_redfish_media_imports_in_progress", Help: "Virtual media imports not finished yet.",
		}),
		ImportDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kubevirt_redfish_media_import_duration_seconds", Help: "Time from InsertMedia to a ready volume.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14),
		}),
		MediaOrphansDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubevirt_redfish_media_orphans_deleted_total", Help: "Per-VM media DataVolumes deleted because their VM did not reference them.",
		}),
		SystemInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubevirt_redfish_system_info", Help: "One series per exposed system: its namespace, hosting node (empty when off), power state and health.",
		}, []string{"system", "namespace", "node", "power_state", "health"}),
	}
	m.Registry.MustRegister(m.SystemInfo, m.Requests, m.RequestDuration, m.Actions, m.APIErrors, m.InformersSynced,
		m.AuthFailures, m.ActiveSessions, m.ImportsRunning, m.ImportDuration, m.MediaOrphansDeleted,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Result labels an action outcome by HTTP status class.
func Result(status int) string {
	switch {
	case status < 400:
		return "success"
	case status < 500:
		return "client_error"
	}
	return "server_error"
}
