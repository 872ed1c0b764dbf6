package metadata

// A broker's live registration and the rule it decides: broker N leads
// partition P iff state.Leader == N and state.LeaderBrokerEpoch is N's live
// registration epoch, whose Lost channel is still open.

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Registrar owns one broker's live registration.
type Registrar struct {
	store  *Store
	nodeID int32
	ttl    int64 // the lease TTL, in seconds

	mu  sync.Mutex
	reg Registration // guarded by mu; Epoch 0 while unregistered
}

// NewRegistrar is the registrar of broker nodeID, whose leases live ttl
// seconds.
func NewRegistrar(store *Store, nodeID int32, ttl int64) *Registrar {
	return &Registrar{store: store, nodeID: nodeID, ttl: ttl}
}

// NodeID is the registered broker's id.
func (r *Registrar) NodeID() int32 { return r.nodeID }

// Register registers info under a new lease that lives until ctx ends,
// and records the registration.
func (r *Registrar) Register(ctx context.Context, info BrokerInfo) (Registration, error) {
	reg, err := r.store.RegisterBroker(ctx, info, r.ttl)
	if err == nil {
		r.set(reg)
	}
	return reg, err
}

// set records the live registration.
func (r *Registrar) set(reg Registration) {
	r.mu.Lock()
	r.reg = reg
	r.mu.Unlock()
}

// Current is the current registration; Epoch 0 while unregistered.
func (r *Registrar) Current() Registration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reg
}

// Reregister retries Register every second until it succeeds (ok) or
// lifetime ends.
func (r *Registrar) Reregister(lifetime context.Context, info BrokerInfo, log *slog.Logger) (Registration, bool) {
	for {
		select {
		case <-lifetime.Done():
			return Registration{}, false
		case <-time.After(time.Second):
		}
		reg, err := r.Register(lifetime, info)
		if err == nil {
			return reg, true
		}
		log.Warn("registering broker", "err", err)
	}
}

// Leads is the rule: this broker leads st while its live registration
// (whose Lost channel is still open) has st's LeaderBrokerEpoch. Initial
// states (LeaderBrokerEpoch 0) are led by nobody until the controller
// writes them.
func (r *Registrar) Leads(st PartitionState) bool {
	if st.Leader != r.nodeID || st.LeaderBrokerEpoch == 0 {
		return false
	}
	reg := r.Current()
	if reg.Epoch != st.LeaderBrokerEpoch {
		return false
	}
	if reg.Lost != nil {
		select {
		case <-reg.Lost:
			return false
		default:
		}
	}
	return true
}
