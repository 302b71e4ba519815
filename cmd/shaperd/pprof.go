package main

import (
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"time"
)

// PprofEnv names an environment variable with a listen address (e.g.
// 127.0.0.1:6060) on which shaperd serves net/http/pprof, for profiling a
// running daemon. Unset: no profiling endpoint.
const PprofEnv = "SHAPERD_PPROF"

// servePprof starts the pprof endpoint when PprofEnv is set.
func servePprof(logger *slog.Logger) {
	addr := os.Getenv(PprofEnv)
	if addr == "" {
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil {
			logger.Error("pprof endpoint stopped", "addr", addr, "err", err)
		}
	}()
	logger.Info("pprof endpoint listening", "addr", addr)
}
