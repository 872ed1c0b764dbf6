package broker

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/strata-log/strata/broker/datadir"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
)

// partitionDir is the directory of a local partition's log.
func (m *partitionManager) partitionDir(topic string, index int32) string {
	return m.layout.PartitionDir(topic, index)
}

// dataLayout is the layout of a data directory whose partition directories
// are named by valid topic names.
func dataLayout(dataDir string) datadir.Layout {
	return datadir.Layout{Root: dataDir, ValidTopic: func(name string) bool { return validateTopicName(name) == nil }}
}

// removeStrayDirs deletes the partition directories of the data directory
// that topics does not give to this node (other topics, ids or partitions).
func (m *partitionManager) removeStrayDirs(topics []topicView) {
	want := map[string]metadata.TopicID{}
	for _, t := range topics {
		for i, replicas := range t.topic.Replicas {
			if hostsReplica(replicas, m.deps.node) {
				want[datadir.Name(t.topic.Name, int32(i))] = t.topic.ID
			}
		}
	}
	m.layout.RemoveStray(want, m.deps.log)
}

// load opens the local partitions of a snapshot at start, after deleting
// the directories of partitions it does not give to this node.
func (m *partitionManager) load(snap metadata.Snapshot) error {
	topics := snapshotViews(snap)
	m.removeStrayDirs(topics)
	for _, t := range topics {
		if err := m.applyTopic(t.topic, t.states); err != nil {
			return err
		}
	}
	return nil
}

func snapshotViews(snap metadata.Snapshot) []topicView {
	out := make([]topicView, 0, len(snap.Topics))
	for _, t := range snap.Topics {
		out = append(out, topicView{topic: t, states: snap.Partitions[t.ID]})
	}
	return out
}

// resync makes the mirror match a snapshot taken after the watch lost
// events: every topic in it is applied, and topics missing from it are
// removed unless applied locally after it (a newer revision).
func (m *partitionManager) resync(snap metadata.Snapshot) {
	seen := map[metadata.TopicID]bool{}
	for _, t := range snapshotViews(snap) {
		seen[t.topic.ID] = true
		if err := m.applyTopic(t.topic, t.states); err != nil {
			m.deps.log.Error("applying topic", "topic", t.topic.Name, "err", err)
		}
	}
	for _, t := range m.allTopics() {
		if !seen[t.topic.ID] && t.topic.Revision <= snap.Revision {
			m.removeTopic(t.topic.Name, t.topic.ID)
		}
	}
}

// applyTopic makes the mirror and the open logs match t. Idempotent; an
// older revision than the one applied, or a topic id this broker saw
// deleted, is ignored. states may be nil (kept, or defaulted for new
// partitions).
func (m *partitionManager) applyTopic(t metadata.Topic, states []metadata.PartitionState) error {
	if len(t.Replicas) > maxPartitions {
		return fmt.Errorf("broker: topic %q has %d partitions", t.Name, len(t.Replicas))
	}
	cfg, err := metadata.ParseTopicConfig(t.Configs)
	if err != nil {
		m.deps.log.Error("topic configs do not parse; using defaults", "topic", t.Name, "err", err)
		cfg, _ = metadata.ParseTopicConfig(nil)
		cfg.DisklessEnable = t.Diskless() // the record's shape depends on it, not a default
	}
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.dropReplacedTopic(t)
	opened, err := m.openMissingPartitions(t, cfg, states)
	if err != nil {
		return err
	}
	work, installed := m.installTopic(t, cfg, states, opened)
	if !installed {
		m.discardOpened(opened)
		return nil
	}
	m.applyReplicaUpdates(work)
	return nil
}

// applyReplicaUpdates applies states collected under m.mu, after it is
// released (applying may do I/O, and the replicas' outputs take m.mu).
// REQUIRES: m.applyMu held (states are applied in metadata order).
func (m *partitionManager) applyReplicaUpdates(work []replicaUpdate) {
	for _, u := range work {
		m.deps.replicas.applyReplicaState(u.p, u.state, u.cfg)
	}
}

// installTopic updates the mirror of t and installs the opened logs; it
// returns the replica states to apply (after m.mu is released), and
// false when t is gone or stale (the opened logs are then unused).
// REQUIRES: m.applyMu held.
func (m *partitionManager) installTopic(t metadata.Topic, cfg metadata.TopicConfig, states []metadata.PartitionState,
	opened map[int32]*partition,
) ([]replicaUpdate, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, gone := m.deleted[t.ID]; gone {
		return nil, false
	}
	e := m.byName[t.Name]
	if e != nil && (e.topic.ID != t.ID || t.Revision < e.topic.Revision) {
		return nil, false // a newer topic of that name, or a stale event
	}
	if e == nil {
		e = &topicEntry{}
		m.byName[t.Name] = e
		m.byID[t.ID] = e
	}
	reconfigure := e.topic.Revision != 0 && e.cfg != cfg
	e.topic, e.cfg = t, cfg
	e.states = mergeStates(e.states, states, t.Replicas)
	m.syncPartitionsLocked(e, opened, reconfigure)
	return replicaUpdates(e), true
}

// dropReplacedTopic removes the mirror (and logs) of an older topic with t's
// name but another id, before t's logs are opened in the same directories.
// REQUIRES: m.applyMu held.
func (m *partitionManager) dropReplacedTopic(t metadata.Topic) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, gone := m.deleted[t.ID]; gone {
		return
	}
	e := m.byName[t.Name]
	if e == nil || e.topic.ID == t.ID || e.topic.Revision > t.Revision {
		return
	}
	m.deleted[e.topic.ID] = struct{}{}
	m.removeEntryLocked(e) // the name was deleted and created again
}

// openMissingPartitions opens, without holding m.mu, the logs of the
// partitions of t this node hosts that are not open yet, a few at a time.
// REQUIRES: m.applyMu held (so nobody else opens or removes them).
func (m *partitionManager) openMissingPartitions(t metadata.Topic, cfg metadata.TopicConfig, states []metadata.PartitionState) (map[int32]*partition, error) {
	missing := m.missingPartitions(t)
	opened := make(map[int32]*partition, len(missing))
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	sem := make(chan struct{}, openParallelism)
	for _, index := range missing {
		state := defaultState(t.Replicas[index])
		if int(index) < len(states) && states[index].Replicas != nil {
			state = states[index]
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			p, err := m.openPartition(t, cfg, state, index)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			if err == nil {
				opened[index] = p
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		m.discardOpened(opened)
		return nil, firstErr
	}
	return opened, nil
}

// openParallelism bounds concurrent log opens (each fsyncs its directory).
const openParallelism = 8

// missingPartitions lists the hosted partitions of t without an open log.
func (m *partitionManager) missingPartitions(t metadata.Topic) []int32 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if _, gone := m.deleted[t.ID]; gone {
		return nil
	}
	e := m.byName[t.Name]
	if e != nil && (e.topic.ID != t.ID || t.Revision < e.topic.Revision) {
		return nil // a newer topic owns the name (dropReplacedTopic ran), or a stale event
	}
	if t.Diskless() {
		return nil // no replicas anywhere: nothing opens locally
	}
	var missing []int32
	for i, replicas := range t.Replicas {
		if !hostsReplica(replicas, m.deps.node) {
			continue
		}
		if e != nil && i < len(e.parts) && e.parts[i] != nil {
			continue
		}
		missing = append(missing, int32(i))
	}
	return missing
}

// discardOpened closes logs opened for a topic that turned out to be gone.
func (m *partitionManager) discardOpened(opened map[int32]*partition) {
	for _, p := range opened {
		p.replica.Retire()
		if err := p.log.Close(); err != nil {
			m.deps.log.Warn("closing unused log", "topic", p.topic, "partition", p.index, "err", err)
		}
	}
}

// mergeStates returns one state per partition: a given one unless the
// known one is newer (a state read before the watch delivered a newer
// one must not bring an old leader back), then those already known, then
// defaults.
func mergeStates(known, given []metadata.PartitionState, replicas [][]int32) []metadata.PartitionState {
	out := make([]metadata.PartitionState, len(replicas))
	for i := range out {
		switch {
		case i < len(given) && given[i].Replicas != nil && (i >= len(known) || given[i].Version >= known[i].Version):
			out[i] = given[i]
		case i < len(known):
			out[i] = known[i]
		default:
			out[i] = defaultState(replicas[i])
		}
	}
	return out
}

// syncPartitionsLocked installs the logs opened by openMissingPartitions and
// pushes configs and states to the open ones' mirrors (the caller applies
// them to the replicas after releasing m.mu).
// REQUIRES: m.mu held for writing.
func (m *partitionManager) syncPartitionsLocked(e *topicEntry, opened map[int32]*partition, reconfigure bool) {
	for len(e.parts) < len(e.topic.Replicas) {
		e.parts = append(e.parts, nil)
	}
	for i, p := range e.parts {
		idx := int32(i)
		if p == nil {
			if o := opened[idx]; o != nil {
				e.parts[i] = o
				delete(opened, idx)
				o.mu.Lock()
				o.state, o.cfg = e.states[i], e.cfg
				o.mu.Unlock()
				o.replica.StartLogWatcher()
			}
			continue
		}
		if !hostsReplica(e.topic.Replicas[i], m.deps.node) {
			// Reassigned away: the new replicas have the tail, the bucket
			// the history; this copy goes.
			e.parts[i] = nil
			m.removePartitionLocked(p)
			m.deps.log.Info("replica moved off this broker: local copy removed", "topic", p.topic, "partition", idx,
				"replicas", e.topic.Replicas[i])
			continue
		}
		p.mu.Lock()
		p.state, p.cfg = e.states[i], e.cfg
		p.mu.Unlock()
		if reconfigure {
			if err := p.log.Reconfigure(m.logConfig(p.topic, idx, e.cfg)); err != nil {
				m.deps.log.Error("reconfiguring log", "topic", p.topic, "partition", idx, "err", err)
			}
		}
	}
	m.deps.coords.offsetsLeadershipLocked(e)
}

// openPartition opens (recovering) one partition's log.
func (m *partitionManager) openPartition(t metadata.Topic, cfg metadata.TopicConfig, state metadata.PartitionState, index int32) (*partition, error) {
	name := t.Name
	dir := m.partitionDir(name, index)
	if err := datadir.Claim(dir, t.ID); err != nil {
		return nil, err
	}
	l, err := hotlog.Open(m.logConfig(name, index, cfg))
	if err != nil {
		return nil, fmt.Errorf("broker: open %s-%d: %w", name, index, err)
	}
	p := &partition{topic: name, topicID: t.ID, index: index, log: l, manifest: m.deps.manifest, self: m.deps.node}
	if p.replica, err = m.deps.replicas.newReplicaCore(p, cfg); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("broker: replica %s-%d: %w", name, index, err)
	}
	p.durability = m.deps.durability
	p.state, p.cfg = state, cfg
	return p, nil
}

// applyPartitionState records a partition's replicated state and applies
// it to the local replica.
func (m *partitionManager) applyPartitionState(id metadata.TopicID, index int32, st metadata.PartitionState) {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	if u, ok := m.recordPartitionState(id, index, st); ok {
		m.deps.replicas.applyReplicaState(u.p, u.state, u.cfg)
	}
}

// recordPartitionState updates the mirror; it returns the replica update
// when this node has the partition open.
// REQUIRES: m.applyMu held.
func (m *partitionManager) recordPartitionState(id metadata.TopicID, index int32, st metadata.PartitionState) (replicaUpdate, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.byID[id]
	if e == nil || index < 0 || int(index) >= len(e.states) {
		return replicaUpdate{}, false // the topic's own event brings it (or defaults match creation)
	}
	if st.Version != 0 && st.Version < e.states[index].Version {
		return replicaUpdate{}, false
	}
	if old := e.states[index]; old.Reassigning() && !st.Reassigning() && old.ReassignStartMs > 0 &&
		st.Leader == m.deps.node && m.deps.moveDone != nil {
		m.deps.moveDone(time.Since(time.UnixMilli(old.ReassignStartMs)))
	}
	e.states[index] = st
	m.deps.coords.offsetsLeadershipLocked(e)
	if int(index) >= len(e.parts) || e.parts[index] == nil {
		return replicaUpdate{}, false
	}
	p := e.parts[index]
	p.mu.Lock()
	p.state = st
	p.mu.Unlock()
	return replicaUpdate{p: p, state: st, cfg: e.cfg}, true
}

// removeTopicAt handles a deletion seen by the watch at revision rev: a
// topic of that name with another id, or applied at a later revision, is a
// newer topic and stays.
func (m *partitionManager) removeTopicAt(name string, id metadata.TopicID, rev int64) {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deleted[id] = struct{}{}
	e := m.byName[name]
	if e == nil || e.topic.ID != id || (rev != 0 && e.topic.Revision > rev) {
		return
	}
	m.deleted[e.topic.ID] = struct{}{}
	m.removeEntryLocked(e)
}

// removeTopic removes the topic with this name and id (read-your-writes of
// DeleteTopics) and remembers the id so a late watch event cannot revive it.
func (m *partitionManager) removeTopic(name string, id metadata.TopicID) {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deleted[id] = struct{}{}
	if e := m.byName[name]; e != nil && e.topic.ID == id {
		m.removeEntryLocked(e)
	}
}

// removeEntryLocked drops a topic from the mirror and deletes its logs.
// REQUIRES: m.mu held for writing.
func (m *partitionManager) removeEntryLocked(e *topicEntry) {
	m.deps.coords.offsetsTopicRemovedLocked(e)
	delete(m.byName, e.topic.Name)
	delete(m.byID, e.topic.ID)
	for _, p := range e.parts {
		if p != nil {
			m.removePartitionLocked(p)
		}
	}
	m.deps.log.Info("topic removed", "topic", e.topic.Name)
}

// removePartitionLocked stops a partition's replica and deletes its local
// log and directory (its tiered history stays in the bucket).
// REQUIRES: m.mu held for writing; p is no longer in its entry.
func (m *partitionManager) removePartitionLocked(p *partition) {
	p.replica.Retire()
	if err := p.log.Remove(); err != nil && !errors.Is(err, hotlog.ErrClosed) {
		m.deps.log.Error("removing log", "topic", p.topic, "partition", p.index, "err", err)
	}
	_ = os.RemoveAll(m.partitionDir(p.topic, p.index))
}
