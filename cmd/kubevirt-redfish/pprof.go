package main

import (
	"net/http"
	"net/http/pprof"
	"time"

	"go.uber.org/zap"
)

// servePprof serves Go's profiles (CPU, heap, goroutines) on their own listener, never on the
// Redfish one: they have no authentication and can stall the process while they run.
func servePprof(addr string, log *zap.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Warn("serving Go profiles without authentication", zap.String("url", "http://"+addr+"/debug/pprof/"))
	if err := srv.ListenAndServe(); err != nil {
		log.Error("profiling listener", zap.Error(err))
	}
}
