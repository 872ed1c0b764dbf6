package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/broker/datadir"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/tier"
	"github.com/strata-log/strata/tier/objstore"
)

// shutdownTimeout bounds the broker's drain on SIGTERM/SIGINT; requests
// still running after it are cut off and the logs closed anyway.
const shutdownTimeout = 30 * time.Second

func runServe(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("serve", c)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: strata serve [flags]\n\nEvery flag can also be set by STRATA_<NAME> (--data-dir → STRATA_DATA_DIR); flags win.")
		fs.PrintDefaults()
	}
	cfg, err := parseServe(args, c.getenv, fs)
	if err != nil {
		return err
	}
	log := newServeLogger(c.stderr, cfg)
	// metadata tags its own lines (component=etcd|metadata).
	cfg.embedded.Logger = log
	cfg.metadata.Logger = log
	cfg.broker.Logger = log // the broker tags its lines (component=broker|controller|group|...)
	s := &server{cfg: cfg, log: log, stdout: c.stdout}
	return s.run(ctx)
}

// server is one `strata serve` process: the pieces it started, closed in
// reverse order. Owned by the goroutine running run.
type server struct {
	cfg    serveConfig
	log    *slog.Logger
	stdout io.Writer // gets the one "serving" line scripts wait for

	dirLock  *datadir.Lock
	http     *httpServer
	embedded *metadata.Embedded
	store    *metadata.Store
	bucket   *tier.Bucket
	broker   *broker.Broker
}

// run starts everything, waits for ctx (the signal context) to end, then
// shuts down. A nil return means a clean shutdown (exit 0).
func (s *server) run(ctx context.Context) error {
	defer s.closeAll()
	if err := s.start(ctx); err != nil {
		if ctx.Err() != nil { // SIGTERM while a start step waited: an orderly stop
			s.log.Info("stopped while starting", "interrupted", err.Error())
			return nil
		}
		return err
	}
	s.http.setReady(true)
	fmt.Fprintf(s.stdout, "strata: serving kafka on %s\n", s.broker.Addr())
	<-ctx.Done()
	s.log.Info("signal received, shutting down", "timeout", shutdownTimeout)
	s.http.setReady(false)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err := s.broker.Shutdown(shutdownCtx)
	s.broker = nil
	if err != nil {
		return fmt.Errorf("broker shutdown: %w", err)
	}
	return nil
}

func (s *server) start(ctx context.Context) error {
	if err := os.MkdirAll(s.cfg.dataDir, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	// First, before any port or the embedded etcd (whose own lock would
	// block a second broker silently).
	var err error
	if s.dirLock, err = datadir.Acquire(s.cfg.dataDir); err != nil {
		return err
	}
	s.log.Info("starting", "version", version, "node_id", s.cfg.broker.NodeID, "data_dir", s.cfg.dataDir,
		"durability", s.cfg.durabilityName, "object_store", s.cfg.objectStore.String())
	if s.http, err = startHTTP(s.cfg.http, s.log, s.probeMetadata); err != nil {
		return err
	}
	if s.cfg.pprof {
		s.http.servePprof()
	}
	s.cfg.broker.AdvertiseHTTP = httpAdvertisement(s.cfg.advertiseHTTP, s.cfg.http, s.http.addr)
	s.log.Info("opening the object store", "object_store", s.cfg.objectStore.String())
	if s.bucket, err = tier.OpenURL(ctx, s.cfg.objectStoreRaw, s.log.With("component", "objstore")); err != nil {
		return fmt.Errorf("object store: %w", err)
	}
	if err := s.probeBucket(ctx); err != nil {
		return err
	}
	s.cfg.broker.ObjectStore = s.bucket
	endpoints := s.cfg.etcdEndpoints
	if len(endpoints) == 0 {
		s.log.Info("starting the embedded etcd", "dir", s.cfg.embedded.Dir)
		if s.embedded, err = metadata.StartEmbeddedContext(ctx, s.cfg.embedded); err != nil {
			return fmt.Errorf("embedded etcd: %w", err)
		}
		endpoints = s.embedded.Endpoints()
		s.log.Info("embedded etcd started", "dir", s.cfg.embedded.Dir, "endpoints", endpoints)
	}
	s.cfg.metadata.Endpoints = endpoints
	s.log.Info("connecting to etcd", "endpoints", endpoints)
	if s.store, err = metadata.Open(ctx, s.cfg.metadata); err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	if s.cfg.saslBootstrapUsers != "" {
		if _, err := bootstrapScramUsers(ctx, s.store, s.cfg.saslBootstrapUsers, s.log); err != nil {
			return err
		}
	}
	b, err := broker.New(s.cfg.broker, s.store)
	if err != nil {
		return err
	}
	if err := b.Start(ctx); err != nil {
		return err
	}
	s.broker = b
	s.http.serveTier(b, s.bucket)
	return nil
}

// startProbeTimeout bounds the object-store probe at start.
const startProbeTimeout = 15 * time.Second

// How often /readyz probes the bucket again: after a success, and after a
// failure (sooner, so that a recovered store shows soon).
const (
	bucketCheckInterval     = 30 * time.Second
	bucketFailCheckInterval = 3 * time.Second
)

// probeBucket writes, reads and deletes a small object before the broker
// starts, so that wrong credentials, missing permissions or a missing
// bucket stop it at once with the reason, not at its first upload. An
// unreachable store (an outage, a store still starting) does not stop it:
// the hot tail does not need the bucket, uploads wait, and /readyz reports
// the bucket until it answers.
func (s *server) probeBucket(ctx context.Context) error {
	check := &cachedCheck{ttl: bucketCheckInterval, failTTL: bucketFailCheckInterval, check: func(ctx context.Context) error {
		return tier.ProbeBucket(ctx, s.bucket.Backend, s.cfg.metadata.Cluster, s.cfg.broker.NodeID)
	}}
	probeCtx, cancel := context.WithTimeout(ctx, startProbeTimeout)
	defer cancel()
	start := time.Now()
	err := check.check(probeCtx)
	check.record(err)
	s.http.addReadyCheck("bucket", check.run)
	switch {
	case err == nil:
		s.log.Info("object store answers", "probe", time.Since(start).Round(time.Millisecond))
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case objstore.IsTransient(err) || errors.Is(err, context.DeadlineExceeded):
		s.log.Warn("object store unreachable at start: serving the hot tail; uploads wait for it and /readyz reports it",
			"object_store", s.cfg.objectStore.String(), "err", err)
		return nil
	}
	return fmt.Errorf("object store %s: %w", s.cfg.objectStore.String(), err)
}

// probeMetadata is /readyz's etcd check: a read of the cluster id.
// REQUIRES: called only while the server is ready (store open).
func (s *server) probeMetadata(ctx context.Context) error {
	if s.store == nil {
		return errors.New("metadata store not open")
	}
	_, err := s.store.ClusterID(ctx)
	return err
}

// closeAll stops what start started, newest first. The broker is shut down
// here only when run did not get to its orderly shutdown (a start error).
func (s *server) closeAll() {
	if s.broker != nil {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		if err := s.broker.Shutdown(ctx); err != nil {
			s.log.Warn("broker shutdown", "err", err)
		}
		cancel()
	}
	if s.http != nil {
		s.http.close()
	}
	if s.store != nil {
		if err := s.store.Close(); err != nil {
			s.log.Warn("metadata close", "err", err)
		}
	}
	if s.embedded != nil {
		if err := s.embedded.Close(); err != nil {
			s.log.Warn("embedded etcd close", "err", err)
		}
	}
	if err := s.dirLock.Release(); err != nil {
		s.log.Warn("data dir lock release", "err", err)
	}
	s.log.Info("stopped")
}

// newServeLogger is the process logger: --log-format text or json on
// stderr, at --log-level.
func newServeLogger(w io.Writer, cfg serveConfig) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.logLevel}
	if cfg.logJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
