package metadata

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// RegisterBroker puts the broker under a lease of ttl seconds, kept alive
// until ctx ends or the store closes; then the lease is revoked, so the
// broker disappears at once on a clean shutdown.
//
// lost is closed when the registration ends for any reason: ctx or Close, the
// lease expired or was revoked, or no renewal succeeded for two thirds of
// the TTL. The last case fires before the lease can expire on the server
// (the server counts the TTL from a renewal we sent before the last answer),
// which is what lets a leader fence itself (DESIGN.md §4). After lost, the
// broker must stop acting as leader and register again.
//
// A registration replaces an existing one for the same node id: a broker
// restarting after a crash must not wait for its old lease to expire. Two
// live brokers with one id are therefore not detected here.
func (s *Store) RegisterBroker(ctx context.Context, b BrokerInfo, ttl int64) (Registration, error) {
	if err := checkBroker(b); err != nil {
		return Registration{}, err
	}
	if ttl <= 0 {
		return Registration{}, fmt.Errorf("metadata: broker lease TTL %d, want > 0 seconds", ttl)
	}
	leaseID, b, err := s.grantAndPutBroker(ctx, b, ttl)
	if err != nil {
		return Registration{}, err
	}
	keepCtx, stopKeep := context.WithCancel(s.baseCtx)
	stopOnCtx := context.AfterFunc(ctx, stopKeep)
	responses, err := s.client.KeepAlive(keepCtx, leaseID)
	if err != nil {
		stopOnCtx()
		stopKeep()
		s.revoke(leaseID)
		return Registration{}, s.wrapErr(err)
	}
	lostCh := make(chan struct{})
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		defer stopOnCtx()
		s.keepAlive(keepCtx, responses, time.Duration(ttl)*time.Second*2/3)
		close(lostCh) // first: fencing must not wait for the revoke below
		stopKeep()
		s.revoke(leaseID)
	}()
	return Registration{Epoch: b.Epoch, Lost: lostCh, Info: b}, nil
}

// grantAndPutBroker creates a lease and puts the broker under it, with the
// lease id as its registration epoch.
func (s *Store) grantAndPutBroker(ctx context.Context, b BrokerInfo, ttl int64) (clientv3.LeaseID, BrokerInfo, error) {
	rctx, cancel := s.requestCtx(ctx)
	defer cancel()
	grant, err := s.client.Grant(rctx, ttl)
	if err != nil {
		return 0, b, s.wrapErr(err)
	}
	b.Epoch, b.Draining = int64(grant.ID), false
	value, err := encodeBroker(b)
	if err != nil {
		s.revoke(grant.ID)
		return 0, b, err
	}
	if _, err := s.client.Put(rctx, s.keys.broker(b.NodeID), string(value), clientv3.WithLease(grant.ID)); err != nil {
		s.revoke(grant.ID)
		return 0, b, s.wrapErr(err)
	}
	return grant.ID, b, nil
}

// SetDraining marks a live registration as draining (controlled
// shutdown): the controller then moves leadership away from the broker and
// takes it out of ISRs. The key stays under the registration's lease; it
// fails if the registration is gone.
func (s *Store) SetDraining(ctx context.Context, reg Registration) error {
	b := reg.Info
	b.Draining = true
	value, err := encodeBroker(b)
	if err != nil {
		return err
	}
	key := s.keys.broker(b.NodeID)
	lease := clientv3.LeaseID(reg.Epoch)
	resp, err := s.txn(ctx,
		[]clientv3.Cmp{clientv3.Compare(clientv3.LeaseValue(key), "=", lease)},
		[]clientv3.Op{clientv3.OpPut(key, string(value), clientv3.WithLease(lease))})
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return fmt.Errorf("metadata: set draining: registration %d of broker %d is gone", reg.Epoch, b.NodeID)
	}
	return nil
}

// keepAlive consumes renewals until the lease is gone, ctx ends, or no
// renewal arrives within fence.
func (s *Store) keepAlive(ctx context.Context, responses <-chan *clientv3.LeaseKeepAliveResponse, fence time.Duration) {
	timer := time.NewTimer(fence)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case resp, ok := <-responses:
			if !ok || resp == nil {
				s.log.Warn("broker lease lost")
				return
			}
			timer.Reset(fence)
		case <-timer.C:
			s.log.Warn("broker lease not renewed in time, fencing", "fence", fence)
			return
		}
	}
}

// revoke drops a lease (best effort: if it fails, the lease expires by TTL).
func (s *Store) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	if _, err := s.client.Revoke(ctx, id); err != nil {
		s.log.Debug("lease revoke failed; it will expire", "err", err)
	}
}

// Brokers lists registered brokers in node id order.
func (s *Store) Brokers(ctx context.Context) ([]BrokerInfo, error) {
	resp, err := s.get(ctx, s.keys.brokers(), clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	return s.decodeBrokers(resp.Kvs), nil
}

// decodeBrokers decodes broker kvs, logging and skipping bad ones.
func (s *Store) decodeBrokers(kvs []*mvccpb.KeyValue) []BrokerInfo {
	brokers := make([]BrokerInfo, 0, len(kvs))
	for _, kv := range kvs {
		b, err := decodeBroker(kv.Value)
		idText := strings.TrimPrefix(string(kv.Key), s.keys.brokers())
		if err == nil && idText != strconv.Itoa(int(b.NodeID)) {
			err = fmt.Errorf("%w: broker key %q holds node %d", ErrCorrupt, kv.Key, b.NodeID)
		}
		if err != nil {
			s.log.Error("ignoring broker registration", "key", string(kv.Key), "err", err)
			continue
		}
		brokers = append(brokers, b)
	}
	slices.SortFunc(brokers, func(a, b BrokerInfo) int { return int(a.NodeID) - int(b.NodeID) })
	return brokers
}
