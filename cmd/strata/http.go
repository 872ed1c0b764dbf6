package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readyProbeTimeout bounds /readyz's etcd round trip.
const readyProbeTimeout = 2 * time.Second

// httpServer serves /healthz, /readyz and /metrics. Metrics live in a
// registry owned here (no global registration); packages will expose
// snapshots that cmd maps to Prometheus (STYLE.md, habit 8).
type httpServer struct {
	srv   *http.Server
	mux   *http.ServeMux
	addr  net.Addr
	ready atomic.Bool // broker started; false again once shutdown begins
	up    prometheus.Gauge
	probe func(context.Context) error // etcd
	// checks are /readyz's further checks (the bucket), added at start.
	checksMu sync.Mutex
	checks   []readyCheck
	log      *slog.Logger
	serveErr chan error
	reg      *prometheus.Registry
	// tier answers /v1/tier/status once the broker runs (nil before).
	tier atomic.Pointer[tierSource]
}

// startHTTP binds addr and serves in the background. probe checks etcd for
// /readyz; it is called only while ready is set.
func startHTTP(addr string, log *slog.Logger, probe func(context.Context) error) (*httpServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("http listener: %w", err)
	}
	h := &httpServer{addr: ln.Addr(), probe: probe, log: log, serveErr: make(chan error, 1)}
	reg := prometheus.NewRegistry()
	h.reg = reg
	h.up = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "strata_up", Help: "1 while the broker is started and serving, 0 otherwise.",
	})
	reg.MustRegister(h.up,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo())
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", h.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /v1/tier/status", h.tierStatus)
	mux.HandleFunc("GET /v1/tier/manifest", h.tierManifest)
	mux.HandleFunc("POST /v1/restore/topic", h.restoreTopic)
	h.mux = mux
	h.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { h.serveErr <- h.srv.Serve(ln) }()
	log.Info("http listening", "addr", h.addr.String(), "paths", "/healthz /readyz /metrics /v1/tier/status /v1/tier/manifest /v1/restore/topic")
	return h, nil
}

func buildInfo() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "strata_build_info", Help: "Always 1; the version label says which build runs.",
		ConstLabels: prometheus.Labels{"version": version},
	})
	g.Set(1)
	return g
}

// servePprof adds Go's profiler under /debug/pprof/ (--pprof): CPU and heap
// profiles of a running broker, for the benchmark suite and operators. Off by
// default: a profile reveals internals and costs CPU while it runs.
func (h *httpServer) servePprof() {
	h.mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	h.mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	h.mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	h.mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	h.mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	h.log.Info("serving Go profiles on /debug/pprof/", "addr", h.addr.String())
}

func (h *httpServer) setReady(ready bool) {
	h.ready.Store(ready)
	if ready {
		h.up.Set(1)
	} else {
		h.up.Set(0)
	}
}

// readyCheck is one named /readyz check.
type readyCheck struct {
	name  string
	check func(context.Context) error
}

// addReadyCheck adds a check /readyz runs after etcd's.
func (h *httpServer) addReadyCheck(name string, check func(context.Context) error) {
	h.checksMu.Lock()
	defer h.checksMu.Unlock()
	h.checks = append(h.checks, readyCheck{name, check})
}

// readyz answers 200 only when the broker is started and every check
// passes. The body has a line per check, "[+]name ok" or "[-]name: reason"
// (Kubernetes' verbose form), then "ready" or "not ready".
func (h *httpServer) readyz(w http.ResponseWriter, r *http.Request) {
	if !h.ready.Load() {
		http.Error(w, "not ready: broker not started", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyProbeTimeout)
	defer cancel()
	h.checksMu.Lock()
	checks := append([]readyCheck{{"etcd", h.probe}}, h.checks...)
	h.checksMu.Unlock()
	var body strings.Builder
	ok := true
	for _, c := range checks {
		if err := c.check(ctx); err != nil {
			ok = false
			fmt.Fprintf(&body, "[-]%s: %v\n", c.name, err)
		} else {
			fmt.Fprintf(&body, "[+]%s ok\n", c.name)
		}
	}
	if !ok {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, body.String()+"not ready\n")
		return
	}
	fmt.Fprint(w, body.String()+"ready\n")
}

// cachedCheck runs a costly check at most once per ttl (failTTL after a
// failure, so that recovery shows soon) and answers with the last result
// in between: the bucket probe is four requests, and a readiness poll
// every few seconds should not cost four each time.
type cachedCheck struct {
	ttl, failTTL time.Duration
	check        func(context.Context) error
	mu           sync.Mutex
	at           time.Time // when err was found; zero: never run
	err          error
}

func (c *cachedCheck) run(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ttl := c.ttl
	if c.err != nil {
		ttl = c.failTTL
	}
	if !c.at.IsZero() && time.Since(c.at) < ttl {
		return c.err
	}
	c.err, c.at = c.check(ctx), time.Now()
	return c.err
}

// record stores a result found elsewhere (the probe at start).
func (c *cachedCheck) record(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err, c.at = err, time.Now()
}

// close stops serving, giving open requests a moment to finish.
func (h *httpServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		h.log.Warn("http shutdown", "err", err)
	}
	if err := <-h.serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		h.log.Warn("http server", "err", err)
	}
}
