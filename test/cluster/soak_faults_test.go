package cluster

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// faultKind names one kind of fault the soak injects.
type faultKind string

const (
	faultBrokerKill  faultKind = "broker-kill"  // SIGKILL, restart after the hold
	faultBrokerPause faultKind = "broker-pause" // SIGSTOP, SIGCONT after the hold
	faultBrokerCut   faultKind = "broker-cut"   // links to peers and etcd blackholed, healed after the hold
	faultEtcdKill    faultKind = "etcd-kill"    // SIGKILL, restart on the same data and port after the hold
	faultMinIOKill   faultKind = "minio-kill"   // SIGKILL, restart on the same data and port after the hold
)

// faultKinds lists the kinds in report order; the plan draws them uniformly.
var faultKinds = []faultKind{faultBrokerKill, faultBrokerPause, faultBrokerCut, faultEtcdKill, faultMinIOKill}

func (k faultKind) onBroker() bool {
	return k == faultBrokerKill || k == faultBrokerPause || k == faultBrokerCut
}

// Bounds of the fault schedule. A fault is repaired after its hold; the
// next one is injected gap after it, or as soon as the repair is done if
// that is later. maxFaultGap is the soak's promise: a fault at least this
// often, which only a repair slower than it (a broker start waiting for
// readiness, say) can break; the report says how often that happened.
const (
	minFaultHold = 1 * time.Second
	maxFaultHold = 4 * time.Second
	minFaultGap  = 4 * time.Second
	maxFaultGap  = 10 * time.Second
)

// fault is one planned fault.
type fault struct {
	kind   faultKind
	broker int32         // the target of a broker fault
	hold   time.Duration // from injection to repair
	gap    time.Duration // from injection to the next fault's injection
}

func (f fault) String() string {
	if f.kind.onBroker() {
		return fmt.Sprintf("%s of broker %d for %v", f.kind, f.broker, f.hold)
	}
	return fmt.Sprintf("%s for %v", f.kind, f.hold)
}

// faultPlan draws faults from its own seeded stream, so that a replay with
// the same seed plans the same sequence whatever the cluster does.
type faultPlan struct {
	rng     *rand.Rand
	brokers int
}

func newFaultPlan(seed int64, brokers int) *faultPlan {
	return &faultPlan{rng: rand.New(rand.NewPCG(uint64(seed), 0xfa017)), brokers: brokers}
}

func (p *faultPlan) next() fault {
	f := fault{
		kind:   faultKinds[p.rng.IntN(len(faultKinds))],
		broker: int32(1 + p.rng.IntN(p.brokers)),
		hold:   between(p.rng, minFaultHold, maxFaultHold),
	}
	// Broker faults never overlap (at most one broker down, paused or cut:
	// with RF 3 and min.insync.replicas 2 the cluster stays writable), so
	// the gap leaves room for the hold and the repair.
	f.gap = between(p.rng, max(minFaultGap, f.hold+time.Second), maxFaultGap-500*time.Millisecond)
	return f
}

// between draws a duration uniformly from [lo, hi], in milliseconds.
func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rng.Int64N(int64((hi-lo)/time.Millisecond)+1))*time.Millisecond
}

// faultInjector runs planned faults one at a time on the test goroutine
// (the Cluster's fault methods are not for other goroutines): inject, hold,
// repair, and before a broker fault wait (until the promised gap runs out)
// for every watched partition to be fully in sync, so that the fault does
// not take the last spare replica.
type faultInjector struct {
	c      *Cluster
	plan   *faultPlan
	inSync func() (bool, string)

	counts     map[faultKind]int
	injected   []time.Time
	late       int           // injections more than maxFaultGap after the previous one
	unsynced   int           // broker faults injected with some partition not fully in sync
	slowRepair time.Duration // longest repair
}

func newFaultInjector(c *Cluster, seed int64, inSync func() (bool, string)) *faultInjector {
	return &faultInjector{c: c, plan: newFaultPlan(seed, len(c.Brokers())), inSync: inSync, counts: map[faultKind]int{}}
}

// run injects faults until the deadline and returns with every fault
// repaired.
func (fi *faultInjector) run(until time.Time) {
	next := time.Now()
	for {
		f := fi.plan.next()
		fi.waitUntil(next, f)
		if time.Now().After(until) {
			return
		}
		at := time.Now()
		fi.record(at)
		fi.c.t.Logf("soak: fault %d at +%v: %s", len(fi.injected), at.Sub(fi.injected[0]).Round(100*time.Millisecond), f)
		fi.inject(f)
		time.Sleep(f.hold)
		repairStart := time.Now()
		fi.repair(f)
		fi.slowRepair = max(fi.slowRepair, time.Since(repairStart))
		next = at.Add(f.gap)
	}
}

// waitUntil sleeps until next; before a broker fault it then waits, while
// the gap allows, for the cluster to be in sync again.
func (fi *faultInjector) waitUntil(next time.Time, f fault) {
	time.Sleep(time.Until(next))
	if !f.kind.onBroker() || len(fi.injected) == 0 {
		return
	}
	deadline := fi.injected[len(fi.injected)-1].Add(maxFaultGap - 200*time.Millisecond)
	for {
		ok, why := fi.inSync()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			fi.unsynced++
			fi.c.t.Logf("soak: injecting %s although not in sync: %s", f, why)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (fi *faultInjector) record(at time.Time) {
	if n := len(fi.injected); n > 0 && at.Sub(fi.injected[n-1]) > maxFaultGap {
		fi.late++
	}
	fi.injected = append(fi.injected, at)
}

func (fi *faultInjector) inject(f fault) {
	fi.counts[f.kind]++
	switch f.kind {
	case faultBrokerKill:
		fi.c.Kill(f.broker)
	case faultBrokerPause:
		fi.c.Stop(f.broker)
	case faultBrokerCut:
		fi.c.Cut(f.broker)
	case faultEtcdKill:
		fi.c.KillEtcd()
	case faultMinIOKill:
		fi.c.KillMinIO()
	}
}

func (fi *faultInjector) repair(f fault) {
	switch f.kind {
	case faultBrokerKill:
		fi.c.Restart(f.broker)
	case faultBrokerPause:
		fi.c.Cont(f.broker)
	case faultBrokerCut:
		fi.c.Heal(f.broker)
	case faultEtcdKill:
		fi.c.RestartEtcd()
	case faultMinIOKill:
		fi.c.RestartMinIO()
	}
}

// total is the number of faults injected.
func (fi *faultInjector) total() int { return len(fi.injected) }

// maxGap is the longest time between two injections.
func (fi *faultInjector) maxGap() time.Duration {
	var gap time.Duration
	for i := 1; i < len(fi.injected); i++ {
		gap = max(gap, fi.injected[i].Sub(fi.injected[i-1]))
	}
	return gap
}

// countsString lists the faults by kind, in faultKinds order.
func (fi *faultInjector) countsString() string {
	parts := make([]string, 0, len(faultKinds))
	for _, k := range faultKinds {
		parts = append(parts, fmt.Sprintf("%s=%d", k, fi.counts[k]))
	}
	return strings.Join(parts, " ")
}

// sortedKeys returns a map's keys in order (for stable reports).
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
