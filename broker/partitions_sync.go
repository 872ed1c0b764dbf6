package broker

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
)

// partitionMetadataFile holds the topic id of a partition directory.
const partitionMetadataFile = "partition.metadata"

func (b *Broker) partitionDir(topic string, index int32) string {
	return filepath.Join(b.cfg.DataDir, topic+"-"+strconv.Itoa(int(index)))
}

// startPartitions opens the logs of every hosted partition, removes
// directories that metadata no longer knows, and starts the watch loop from
// the snapshot's revision, so no change is missed.
func (b *Broker) startPartitions(ctx context.Context) error {
	if err := os.MkdirAll(b.cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("broker: data dir: %w", err)
	}
	snap, err := b.store.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("broker: metadata snapshot: %w", err)
	}
	b.manifest.LoadSnapshot(snap)
	topics := snapshotViews(snap)
	removeStrayDirs(b.cfg.DataDir, b.cfg.NodeID, topics, b.log)
	for _, t := range topics {
		if err := b.applyTopic(t.topic, t.states); err != nil {
			return err
		}
	}
	b.liveBrks.set(snap.Brokers)
	events := b.store.Watch(b.lifetime, snap.Revision+1)
	b.loops.Add(2)
	go b.watchLoop(events)
	go b.tickLoop()
	return nil
}

func snapshotViews(snap metadata.Snapshot) []topicView {
	out := make([]topicView, 0, len(snap.Topics))
	for _, t := range snap.Topics {
		out = append(out, topicView{topic: t, states: snap.Partitions[t.ID]})
	}
	return out
}

// watchLoop applies metadata changes until the broker stops (the store
// closes the channel when b.lifetime ends).
func (b *Broker) watchLoop(events <-chan metadata.Event) {
	defer b.loops.Done()
	for ev := range events {
		b.applyEvent(ev)
	}
}

// resync reloads every topic after the watch lost events and drops topics
// that are gone. Topics applied locally after the snapshot (newer revision)
// stay.
func (b *Broker) resync() {
	ctx, cancel := context.WithTimeout(b.lifetime, 30*time.Second)
	defer cancel()
	snap, err := b.store.Snapshot(ctx)
	if err != nil {
		b.log.Error("metadata resync failed; the view may be stale", "err", err)
		return
	}
	b.manifest.LoadSnapshot(snap)
	seen := map[metadata.TopicID]bool{}
	for _, t := range snapshotViews(snap) {
		seen[t.topic.ID] = true
		if err := b.applyTopic(t.topic, t.states); err != nil {
			b.log.Error("applying topic", "topic", t.topic.Name, "err", err)
		}
	}
	for _, t := range b.parts.allTopics() {
		if !seen[t.topic.ID] && t.topic.Revision <= snap.Revision {
			b.removeTopic(t.topic.Name, t.topic.ID)
		}
	}
	b.liveBrks.set(snap.Brokers)
}

func (b *Broker) applyEvent(ev metadata.Event) {
	b.manifest.Apply(ev)
	switch ev.Kind {
	case metadata.TopicPut:
		if ev.Topic == nil {
			return
		}
		if err := b.applyTopic(*ev.Topic, nil); err != nil {
			b.log.Error("applying topic", "topic", ev.TopicName, "err", err)
		}
	case metadata.TopicDeleted:
		b.removeTopicAt(ev.TopicName, ev.TopicID, ev.Revision)
	case metadata.PartitionPut:
		if ev.State != nil {
			b.applyPartitionState(ev.TopicID, ev.Partition, *ev.State)
		}
	case metadata.BrokersChanged:
		ctx, cancel := context.WithTimeout(b.lifetime, 10*time.Second)
		b.liveBrks.refresh(ctx, b.store, b.log)
		cancel()
	case metadata.Resync:
		b.log.Warn("metadata watch lost events; resynchronising")
		b.resync()
	}
}

// applyTopic makes the mirror and the open logs match t. Idempotent; an
// older revision than the one applied, or a topic id this broker saw
// deleted, is ignored. states may be nil (kept, or defaulted for new
// partitions).
func (b *Broker) applyTopic(t metadata.Topic, states []metadata.PartitionState) error {
	if len(t.Replicas) > maxPartitions {
		return fmt.Errorf("broker: topic %q has %d partitions", t.Name, len(t.Replicas))
	}
	cfg, err := metadata.ParseTopicConfig(t.Configs)
	if err != nil {
		b.log.Error("topic configs do not parse; using defaults", "topic", t.Name, "err", err)
		cfg, _ = metadata.ParseTopicConfig(nil)
	}
	m := &b.parts
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	b.dropReplacedTopic(t)
	opened, err := b.openMissingPartitions(t, cfg, states)
	if err != nil {
		return err
	}
	work, installed := b.installTopic(t, cfg, states, opened)
	if !installed {
		b.discardOpened(opened)
		return nil
	}
	b.applyReplicaUpdates(work)
	return nil
}

// installTopic updates the mirror of t and installs the opened logs; it
// returns the replica states to apply (after b.parts.mu is released), and
// false when t is gone or stale (the opened logs are then unused).
// REQUIRES: b.parts.applyMu held.
func (b *Broker) installTopic(t metadata.Topic, cfg metadata.TopicConfig, states []metadata.PartitionState,
	opened map[int32]*partition,
) ([]replicaUpdate, bool) {
	m := &b.parts
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
	b.syncPartitionsLocked(e, opened, reconfigure)
	return replicaUpdates(e), true
}

// dropReplacedTopic removes the mirror (and logs) of an older topic with t's
// name but another id, before t's logs are opened in the same directories.
// REQUIRES: b.parts.applyMu held.
func (b *Broker) dropReplacedTopic(t metadata.Topic) {
	m := &b.parts
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
	b.removeEntryLocked(e) // the name was deleted and created again
}

// openMissingPartitions opens, without holding b.parts.mu, the logs of the
// partitions of t this node hosts that are not open yet, a few at a time.
// REQUIRES: b.parts.applyMu held (so nobody else opens or removes them).
func (b *Broker) openMissingPartitions(t metadata.Topic, cfg metadata.TopicConfig, states []metadata.PartitionState) (map[int32]*partition, error) {
	missing := b.missingPartitions(t)
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
			p, err := b.openPartition(t, cfg, state, index)
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
		b.discardOpened(opened)
		return nil, firstErr
	}
	return opened, nil
}

// openParallelism bounds concurrent log opens (each fsyncs its directory).
const openParallelism = 8

// missingPartitions lists the hosted partitions of t without an open log.
func (b *Broker) missingPartitions(t metadata.Topic) []int32 {
	m := &b.parts
	m.mu.RLock()
	defer m.mu.RUnlock()
	if _, gone := m.deleted[t.ID]; gone {
		return nil
	}
	e := m.byName[t.Name]
	if e != nil && (e.topic.ID != t.ID || t.Revision < e.topic.Revision) {
		return nil // a newer topic owns the name (dropReplacedTopic ran), or a stale event
	}
	var missing []int32
	for i, replicas := range t.Replicas {
		if !hostsReplica(replicas, b.cfg.NodeID) {
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
func (b *Broker) discardOpened(opened map[int32]*partition) {
	for _, p := range opened {
		p.replica.Retire()
		if err := p.log.Close(); err != nil {
			b.log.Warn("closing unused log", "topic", p.topic, "partition", p.index, "err", err)
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
// them to the replicas after releasing b.parts.mu).
// REQUIRES: b.parts.mu held for writing.
func (b *Broker) syncPartitionsLocked(e *topicEntry, opened map[int32]*partition, reconfigure bool) {
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
		p.mu.Lock()
		p.state, p.cfg = e.states[i], e.cfg
		p.mu.Unlock()
		if reconfigure {
			if err := p.log.Reconfigure(b.hotlogConfig(p.topic, idx, e.cfg)); err != nil {
				b.log.Error("reconfiguring log", "topic", p.topic, "partition", idx, "err", err)
			}
		}
	}
	b.offsetsLeadershipLocked(e)
}

// openPartition opens (recovering) one partition's log.
func (b *Broker) openPartition(t metadata.Topic, cfg metadata.TopicConfig, state metadata.PartitionState, index int32) (*partition, error) {
	name := t.Name
	dir := b.partitionDir(name, index)
	if err := claimPartitionDir(dir, t.ID); err != nil {
		return nil, err
	}
	l, err := hotlog.Open(b.hotlogConfig(name, index, cfg))
	if err != nil {
		return nil, fmt.Errorf("broker: open %s-%d: %w", name, index, err)
	}
	p := &partition{topic: name, topicID: t.ID, index: index, log: l, manifest: b.manifest, self: b.cfg.NodeID}
	if p.replica, err = b.newReplicaCore(p, cfg); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("broker: replica %s-%d: %w", name, index, err)
	}
	p.durability = b.cfg.Durability
	p.state, p.cfg = state, cfg
	return p, nil
}

// applyPartitionState records a partition's replicated state and applies
// it to the local replica.
func (b *Broker) applyPartitionState(id metadata.TopicID, index int32, st metadata.PartitionState) {
	m := &b.parts
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	if u, ok := b.recordPartitionState(id, index, st); ok {
		b.applyReplicaState(u.p, u.state, u.cfg)
	}
}

// recordPartitionState updates the mirror; it returns the replica update
// when this node has the partition open.
// REQUIRES: b.parts.applyMu held.
func (b *Broker) recordPartitionState(id metadata.TopicID, index int32, st metadata.PartitionState) (replicaUpdate, bool) {
	m := &b.parts
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.byID[id]
	if e == nil || index < 0 || int(index) >= len(e.states) {
		return replicaUpdate{}, false // the topic's own event brings it (or defaults match creation)
	}
	if st.Version != 0 && st.Version < e.states[index].Version {
		return replicaUpdate{}, false
	}
	e.states[index] = st
	b.offsetsLeadershipLocked(e)
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
func (b *Broker) removeTopicAt(name string, id metadata.TopicID, rev int64) {
	m := &b.parts
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
	b.removeEntryLocked(e)
}

// removeTopic removes the topic with this name and id (read-your-writes of
// DeleteTopics) and remembers the id so a late watch event cannot revive it.
func (b *Broker) removeTopic(name string, id metadata.TopicID) {
	m := &b.parts
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deleted[id] = struct{}{}
	if e := m.byName[name]; e != nil && e.topic.ID == id {
		b.removeEntryLocked(e)
	}
}

// removeEntryLocked drops a topic from the mirror and deletes its logs.
// REQUIRES: b.parts.mu held for writing.
func (b *Broker) removeEntryLocked(e *topicEntry) {
	b.offsetsTopicRemovedLocked(e)
	delete(b.parts.byName, e.topic.Name)
	delete(b.parts.byID, e.topic.ID)
	for _, p := range e.parts {
		if p == nil {
			continue
		}
		p.replica.Retire()
		if err := p.log.Remove(); err != nil && !errors.Is(err, hotlog.ErrClosed) {
			b.log.Error("removing log", "topic", p.topic, "partition", p.index, "err", err)
		}
		_ = os.RemoveAll(b.partitionDir(p.topic, p.index))
	}
	b.log.Info("topic removed", "topic", e.topic.Name)
}

// claimPartitionDir makes dir belong to topic id: a directory left by an
// older topic of the same name is emptied first.
func claimPartitionDir(dir string, id metadata.TopicID) error {
	file := filepath.Join(dir, partitionMetadataFile)
	want := partitionMetadata(id)
	if got, err := os.ReadFile(file); err == nil {
		if string(got) == want {
			return nil
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("broker: removing stale %s: %w", dir, err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(want), 0o644); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	return nil
}

func partitionMetadata(id metadata.TopicID) string {
	return "version: 0\ntopic_id: " + base64.RawURLEncoding.EncodeToString(id[:]) + "\n"
}

// removeStrayDirs deletes the partition directories (those holding
// partition.metadata) in dataDir of topics, ids or partitions that topics
// does not give to node.
func removeStrayDirs(dataDir string, node int32, topics []topicView, log *slog.Logger) {
	want := map[string]metadata.TopicID{}
	for _, t := range topics {
		for i, replicas := range t.topic.Replicas {
			if hostsReplica(replicas, node) {
				want[t.topic.Name+"-"+strconv.Itoa(i)] = t.topic.ID
			}
		}
	}
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		log.Warn("listing data dir", "err", err)
		return
	}
	for _, ent := range entries {
		if !ent.IsDir() || !looksLikePartitionDir(ent.Name()) {
			continue
		}
		dir := filepath.Join(dataDir, ent.Name())
		got, err := os.ReadFile(filepath.Join(dir, partitionMetadataFile))
		if err != nil {
			continue // not ours to judge
		}
		if id, ok := want[ent.Name()]; ok && string(got) == partitionMetadata(id) {
			continue
		}
		log.Info("deleting partition directory unknown to metadata", "dir", dir)
		if err := os.RemoveAll(dir); err != nil {
			log.Warn("deleting stray directory", "dir", dir, "err", err)
		}
	}
}

// looksLikePartitionDir matches <valid topic name>-<partition>.
func looksLikePartitionDir(name string) bool {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return false
	}
	n, err := strconv.Atoi(name[i+1:])
	return err == nil && n >= 0 && validateTopicName(name[:i]) == nil
}
