package metadata

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zapcore"
)

// maxCASAttempts bounds a compare-and-swap retry loop. Every failed attempt
// means another writer succeeded, so the loop makes progress; the bound only
// turns a pathological storm into an error.
const maxCASAttempts = 100

// Store is the etcd-backed metadata of one cluster. Its methods are safe for
// concurrent use.
type Store struct {
	cfg    Config
	keys   keys
	client *clientv3.Client
	log    *slog.Logger

	// baseCtx ends at Close; keepalive and watch goroutines derive from it.
	baseCtx    context.Context
	cancelBase context.CancelFunc
	// background counts keepalive goroutines; Close waits for them so that
	// they can revoke their leases before the client closes.
	background sync.WaitGroup
	closeOnce  sync.Once
}

// Open connects to etcd and checks that it answers.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(reconnectParams(cfg.DialTimeout))},
		Logger:      zapToSlog(cfg.Logger, zapcore.ErrorLevel, nil),
	})
	if err != nil {
		return nil, fmt.Errorf("metadata: connect to etcd %v: %w", cfg.Endpoints, err)
	}
	s := &Store{cfg: cfg, keys: newKeys(cfg.Cluster), client: client, log: cfg.Logger.With("component", "metadata")}
	s.baseCtx, s.cancelBase = context.WithCancel(context.Background())
	probeCtx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if _, err := client.Get(probeCtx, s.keys.clusterID()); err != nil {
		s.cancelBase()
		client.Close()
		return nil, fmt.Errorf("metadata: etcd %v does not answer: %w", cfg.Endpoints, err)
	}
	return s, nil
}

// reconnectMaxDelay caps the wait between attempts to reach an etcd that
// is down. gRPC's default grows to two minutes, which kept a broker from
// etcd long after an outage ended; Kafka's clients cap theirs at a second
// (reconnect.backoff.max.ms). Attempts are cheap for a handful of brokers.
const reconnectMaxDelay = time.Second

// reconnectParams is gRPC's connection backoff with its delay capped at
// reconnectMaxDelay; each attempt may take up to dialTimeout.
func reconnectParams(dialTimeout time.Duration) grpc.ConnectParams {
	b := backoff.DefaultConfig
	b.BaseDelay = 100 * time.Millisecond
	b.MaxDelay = reconnectMaxDelay
	return grpc.ConnectParams{Backoff: b, MinConnectTimeout: dialTimeout}
}

// Close revokes broker registrations made through this store, stops its
// watches and closes the client. Safe to call twice.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.cancelBase()
		s.background.Wait()
		err = s.client.Close()
	})
	return err
}

// Client exposes the etcd client for the controller election
// (client/v3/concurrency) under ControllerPrefix. Other writes belong in
// this package.
func (s *Store) Client() *clientv3.Client { return s.client }

// Cluster returns the cluster name.
func (s *Store) Cluster() string { return s.cfg.Cluster }

// requestCtx bounds one etcd call by RequestTimeout and by Close.
func (s *Store) requestCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	stop := context.AfterFunc(s.baseCtx, cancel)
	return ctx, func() { stop(); cancel() }
}

// get reads one key; nil kv when absent.
func (s *Store) get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	ctx, cancel := s.requestCtx(ctx)
	defer cancel()
	resp, err := s.client.Get(ctx, key, opts...)
	if err != nil {
		return nil, s.wrapErr(err)
	}
	return resp, nil
}

// txn runs one transaction.
func (s *Store) txn(ctx context.Context, cmps []clientv3.Cmp, then []clientv3.Op, orElse ...clientv3.Op) (*clientv3.TxnResponse, error) {
	ctx, cancel := s.requestCtx(ctx)
	defer cancel()
	resp, err := s.client.Txn(ctx).If(cmps...).Then(then...).Else(orElse...).Commit()
	if err != nil {
		return nil, s.wrapErr(err)
	}
	return resp, nil
}

func (s *Store) wrapErr(err error) error {
	if s.baseCtx.Err() != nil {
		return fmt.Errorf("%w: %v", ErrClosed, err)
	}
	return fmt.Errorf("metadata: etcd: %w", err)
}

// ClusterID returns the cluster id, creating it on first use (CAS:
// create-if-absent, so concurrent first callers agree).
func (s *Store) ClusterID(ctx context.Context) (string, error) {
	key := s.keys.clusterID()
	resp, err := s.get(ctx, key)
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 1 {
		return string(resp.Kvs[0].Value), nil
	}
	id, err := newClusterID()
	if err != nil {
		return "", err
	}
	tr, err := s.txn(ctx,
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(key, id)},
		clientv3.OpGet(key))
	if err != nil {
		return "", err
	}
	if tr.Succeeded {
		return id, nil
	}
	kvs := tr.Responses[0].GetResponseRange().Kvs
	if len(kvs) != 1 {
		return "", errors.New("metadata: cluster id vanished while being created")
	}
	return string(kvs[0].Value), nil
}

// AllocateProducerIDs reserves a block of count producer ids cluster-wide
// (CAS on producer-ids/next) and returns the first. Blocks never overlap.
func (s *Store) AllocateProducerIDs(ctx context.Context, count int64) (int64, error) {
	const maxBlock = 1 << 24
	if count <= 0 || count > maxBlock {
		return 0, fmt.Errorf("metadata: producer id block of %d, want 1..%d", count, maxBlock)
	}
	key := s.keys.producerIDs()
	for attempt := 0; attempt < maxCASAttempts; attempt++ {
		resp, err := s.get(ctx, key)
		if err != nil {
			return 0, err
		}
		next, modRev := int64(0), int64(0) // absent key: ModRevision compares as 0
		if len(resp.Kvs) == 1 {
			if next, err = decodeCounter(resp.Kvs[0].Value); err != nil {
				return 0, err
			}
			modRev = resp.Kvs[0].ModRevision
		}
		if next > (1<<63-1)-count {
			return 0, errors.New("metadata: producer ids exhausted")
		}
		tr, err := s.txn(ctx,
			[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", modRev)},
			[]clientv3.Op{clientv3.OpPut(key, fmt.Sprint(next+count))})
		if err != nil {
			return 0, err
		}
		if tr.Succeeded {
			return next, nil
		}
	}
	return 0, fmt.Errorf("%w: producer id counter: too much contention", ErrCASFailed)
}
