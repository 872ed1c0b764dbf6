package quota

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// maxSensors bounds the rates tracked at once: client ids come from the
// network. Idle sensors are swept first; past the bound a new client is
// not measured (fail open rather than grow without limit).
const maxSensors = 1 << 16

// sweepEveryMs is how often recording sweeps idle sensors.
const sweepEveryMs = maxThrottleMs

// Manager is a broker's quota state: the configured quotas and the rates
// measured against them. Its zero value is ready (no quotas configured,
// no loader, clock started at first use); Attach gives it its etcd source.
// Safe for concurrent use.
type Manager struct {
	// config is the current snapshot (nil: none loaded; no quotas).
	// Replaced whole by the loader (store.go).
	config atomic.Pointer[Snapshot]
	// loadOnce starts the loader at the first Charge.
	loadOnce sync.Once
	// loader is what the loader needs; set by Attach before the first
	// Charge and read-only afterwards.
	loader loaderDeps

	mu struct {
		sync.Mutex
		// base is the monotonic origin of the millisecond clock.
		base time.Time
		// now overrides the clock (nil: time.Since(base)).
		now       func() int64
		sensors   map[SensorKey]*rateWindow
		lastSweep int64
	}
}

// loaderDeps are the loader's dependencies (zero: no loader).
type loaderDeps struct {
	store    Store
	lifetime context.Context
	log      *slog.Logger
}

// Attach gives m the store its quotas are loaded from, the lifetime that
// ends the reload loop, and a logger. The first Charge loads the quotas
// (and waits for them) and starts the loop. Without Attach no quotas are
// loaded. REQUIRES: called at most once, before the first Charge.
func (m *Manager) Attach(store Store, lifetime context.Context, log *slog.Logger) {
	m.loader = loaderDeps{store: store, lifetime: lifetime, log: log}
}

// SetClock replaces the millisecond clock (tests drive time with it).
// REQUIRES: called before the first use of m.
func (m *Manager) SetClock(nowMs func() int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.now = nowMs
}

// Charge records amount of kind for the request of (user, clientID) and
// returns the throttle, in milliseconds, that its quota calls for (0 when
// no quota applies or it is not exceeded). amount is bytes, or for
// Request percent-seconds × 1000: the handler's elapsed µs / 10.
func (m *Manager) Charge(kind Kind, user, clientID string, amount int64) int32 {
	m.loadOnce.Do(m.startLoader)
	limit, key, ok := m.config.Load().resolve(kind, user, clientID)
	if !ok {
		return 0
	}
	v := float64(amount)
	if kind == Request {
		v /= 1000 // recorded in percent-milliseconds
	}
	return m.Record(key, limit, v)
}

// Record adds v to the sensor key and returns its throttle against limit
// (per second). The cold-read budget calls it directly, with its own
// limit.
func (m *Manager) Record(key SensorKey, limit, v float64) int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.nowMsLocked()
	w := m.sensorLocked(key, now)
	if w == nil {
		return 0
	}
	w.record(now, v)
	return w.throttleMs(now, limit)
}

// ThrottleOf is the sensor's current throttle against limit, without
// recording.
func (m *Manager) ThrottleOf(key SensorKey, limit float64) int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.mu.sensors[key]
	if w == nil {
		return 0
	}
	return w.throttleMs(m.nowMsLocked(), limit)
}

// nowMsLocked is the quota clock. REQUIRES: m.mu held.
func (m *Manager) nowMsLocked() int64 {
	if m.mu.now != nil {
		return m.mu.now()
	}
	if m.mu.base.IsZero() {
		m.mu.base = time.Now()
	}
	return time.Since(m.mu.base).Milliseconds()
}

// sensorLocked returns key's rate, creating it if the bound allows.
// REQUIRES: m.mu held.
func (m *Manager) sensorLocked(key SensorKey, now int64) *rateWindow {
	if w := m.mu.sensors[key]; w != nil {
		return w
	}
	if m.mu.sensors == nil {
		m.mu.sensors = map[SensorKey]*rateWindow{}
	}
	if now-m.mu.lastSweep >= sweepEveryMs || len(m.mu.sensors) >= maxSensors {
		m.mu.lastSweep = now
		for k, w := range m.mu.sensors {
			if w.idle(now) {
				delete(m.mu.sensors, k)
			}
		}
	}
	if len(m.mu.sensors) >= maxSensors {
		return nil
	}
	w := &rateWindow{}
	m.mu.sensors[key] = w
	return w
}
