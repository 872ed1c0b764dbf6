package follower

// The follower's fetch: building one FetchRequest for a leader's partitions
// and applying each partition's answer (doc.go states the rules).

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
	"github.com/strata-log/strata/replication"
	"github.com/strata-log/strata/replication/peer"
)

// fetchKey names a partition in a response: by topic id (Fetch v13+) or,
// when the id is zero, by name.
type fetchKey struct {
	id        metadata.TopicID
	topic     string
	partition int32
}

func responseKey(topic string, id [16]byte, partition int32) fetchKey {
	if id != ([16]byte{}) {
		return fetchKey{id: id, partition: partition}
	}
	return fetchKey{topic: topic, partition: partition}
}

// flushedBeforeFetch waits (fsync durability) until every fetch offset is
// flushed: the leader counts a fetch offset as this replica's LEO, which
// must only count durable data. Flushes run in the logs' own flushers, so
// the waits overlap. Partitions whose log fails are left out.
func (f *leaderFollower) flushedBeforeFetch(fetches []taskSnapshot) []taskSnapshot {
	out := fetches[:0]
	for _, s := range fetches {
		if s.offset > 0 && s.p.Log().FlushedOffset() < s.offset {
			if err := s.p.Log().WaitFlushed(f.m.ctx, s.offset-1); err != nil {
				f.m.delay(s, -1)
				continue
			}
		}
		out = append(out, s)
	}
	return out
}

// buildFetch is one FetchRequest for fetches, as a follower (replica id =
// this node in v<15, ReplicaState in v15+; kgo picks the version).
func (f *leaderFollower) buildFetch(fetches []taskSnapshot) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = f.m.cfg.NodeID
	req.ReplicaState.ID = f.m.cfg.NodeID
	if epoch := f.m.cfg.RegistrationEpoch(); epoch > 0 {
		req.ReplicaState.Epoch = epoch
	}
	req.MaxWaitMillis = int32(f.m.cfg.MaxWait.Milliseconds())
	req.MinBytes = 1
	req.MaxBytes = replicaFetchMaxBytes
	req.SessionID, req.SessionEpoch = 0, -1 // sessionless full fetches
	byTopic := map[metadata.TopicID]int{}
	for _, s := range fetches {
		i, ok := byTopic[s.p.TopicID()]
		if !ok {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = s.p.Topic(), s.p.TopicID()
			i = len(req.Topics)
			byTopic[s.p.TopicID()] = i
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = s.p.Index()
		rp.CurrentLeaderEpoch = s.epoch
		rp.FetchOffset = s.offset
		rp.LastFetchedEpoch = -1 // truncation is by OffsetForLeaderEpoch (KIP-101), not KIP-595
		rp.LogStartOffset = s.p.Log().LogStartOffset()
		rp.PartitionMaxBytes = replicaFetchPartitionMaxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	return req
}

// fetch sends one fetch for fetches and applies the answer.
func (f *leaderFollower) fetch(cl peer.Client, fetches []taskSnapshot) error {
	if len(fetches) == 0 {
		return nil
	}
	resp, err := f.request(cl, f.buildFetch(fetches), f.m.cfg.MaxWait)
	if err != nil {
		return err
	}
	fr, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return fmt.Errorf("%w: fetch answered with %T", errPeerAnswer, resp)
	}
	if fr.ErrorCode != 0 {
		f.m.counters.requestErrors.Add(1)
		return fmt.Errorf("%w: fetch: %v", errPeerAnswer, kerr.ErrorForCode(fr.ErrorCode))
	}
	f.m.counters.fetches.Add(1)
	f.applyFetch(cl, fr, fetches)
	return nil
}

// appendedFetch is a partition whose records were appended but, with
// fsync durability, not yet flushed and reported.
type appendedFetch struct {
	s        taskSnapshot
	leo      int64
	leaderHW int64
}

// applyFetch applies every partition's answer: appends first (so the
// flushes of all partitions overlap), then flush waits and reports, then
// the out-of-range resets (which send requests of their own).
func (f *leaderFollower) applyFetch(cl peer.Client, fr *kmsg.FetchResponse, fetches []taskSnapshot) {
	sent := make(map[fetchKey]taskSnapshot, 2*len(fetches))
	for _, s := range fetches {
		sent[fetchKey{id: s.p.TopicID(), partition: s.p.Index()}] = s
		sent[fetchKey{topic: s.p.Topic(), partition: s.p.Index()}] = s
	}
	var appended []appendedFetch
	var outOfRange []taskSnapshot
	for ti := range fr.Topics {
		rt := &fr.Topics[ti]
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			s, ok := sent[responseKey(rt.Topic, rt.TopicID, rp.Partition)]
			if !ok {
				continue // not asked (a misbehaving peer): ignore
			}
			switch code := rp.ErrorCode; {
			case code == 0:
				if a, pending := f.appendFetched(s, rp); pending {
					appended = append(appended, a)
				}
			case code == kerr.OffsetOutOfRange.Code || code == kerr.OffsetMovedToTieredStorage.Code:
				outOfRange = append(outOfRange, s)
			default:
				f.partitionError(s, code)
			}
		}
	}
	for _, a := range appended {
		f.reportFlushed(a)
	}
	for _, s := range outOfRange {
		f.resetToLeaderStart(cl, s)
	}
}

// partitionError handles a retriable or fencing error code of one
// partition (see doc.go).
func (f *leaderFollower) partitionError(s taskSnapshot, code int16) {
	if code == kerr.FencedLeaderEpoch.Code {
		f.m.log.Info("leader has a newer epoch; pausing until the next partition state",
			"topic", s.p.Topic(), "partition", s.p.Index(), "leader", f.leader, "epoch", s.epoch)
		f.m.pause(s)
		return
	}
	if f.m.delay(s, code) {
		f.m.log.Info("follower fetch refused; retrying", "topic", s.p.Topic(), "partition", s.p.Index(),
			"leader", f.leader, "epoch", s.epoch, "err", kerr.ErrorForCode(code))
	}
}

// appendFetched appends one partition's records if its task is current and
// the state machine accepts the fetch. When the log is flushed up to the
// new LEO (replication durability, or nothing appended) Fetched is
// reported at once; else the caller flushes first (pending).
func (f *leaderFollower) appendFetched(s taskSnapshot, rp *kmsg.FetchResponseTopicPartition) (appendedFetch, bool) {
	records, badErr := replicaBatches(rp.RecordBatches, s.offset)
	a := appendedFetch{s: s, leo: s.offset, leaderHW: rp.HighWatermark}
	pending := false
	err := f.m.withReplica(s.p, func(r *replication.Replica) error {
		if err := f.checkFetch(r, s); err != nil {
			return err
		}
		if len(records) > 0 {
			res, err := s.p.Log().AppendReplicated(records)
			if err != nil {
				return err
			}
			a.leo = res.LastOffset + 1
			f.m.counters.appendedBytes.Add(int64(len(records)))
		}
		if s.p.Log().FlushedOffset() < a.leo {
			pending = true
			return nil
		}
		return f.fetched(r, a)
	})
	f.fetchOutcome(s, err, badErr)
	return a, pending && err == nil
}

// checkFetch: s is still the partition's task, the state machine expects
// this fetch, and the log ends where the fetch began.
// REQUIRES: the partition's replica mutex (inside withReplica).
func (f *leaderFollower) checkFetch(r *replication.Replica, s taskSnapshot) error {
	if r == nil || !f.m.isCurrent(s) {
		return errStaleTask
	}
	if err := r.ValidateFetch(s.epoch, s.offset); err != nil {
		return err
	}
	if leo := s.p.Log().LogEndOffset(); leo != s.offset {
		return fmt.Errorf("follower: follower log ends at %d, fetched at %d", leo, s.offset)
	}
	return nil
}

// fetched reports an applied fetch and moves the task's fetch offset.
// REQUIRES: the partition's replica mutex (inside withReplica).
func (f *leaderFollower) fetched(r *replication.Replica, a appendedFetch) error {
	if err := r.Fetched(a.s.epoch, a.leo, a.leaderHW); err != nil {
		return err
	}
	f.m.advance(a.s, a.leo)
	return nil
}

// reportFlushed waits for an appended fetch's flush, then reports it.
func (f *leaderFollower) reportFlushed(a appendedFetch) {
	if err := a.s.p.Log().WaitFlushed(f.m.ctx, a.leo-1); err != nil {
		f.fetchOutcome(a.s, err, nil)
		return
	}
	err := f.m.withReplica(a.s.p, func(r *replication.Replica) error {
		if r == nil || !f.m.isCurrent(a.s) {
			return errStaleTask
		}
		return f.fetched(r, a)
	})
	f.fetchOutcome(a.s, err, nil)
}

// fetchOutcome logs and backs off after a failed apply; answers that
// became stale are dropped silently (the state machine moved on).
func (f *leaderFollower) fetchOutcome(s taskSnapshot, err, badRecords error) {
	if badRecords != nil && f.m.delay(s, kerr.CorruptMessage.Code) {
		f.m.log.Warn("leader sent a corrupt batch; appended the good prefix only", "topic", s.p.Topic(),
			"partition", s.p.Index(), "leader", f.leader, "offset", s.offset, "err", badRecords)
	}
	switch {
	case err == nil, errors.Is(err, errStaleTask), errors.Is(err, replication.ErrStaleFetch),
		errors.Is(err, replication.ErrStaleEpoch), errors.Is(err, replication.ErrNotFollower):
		return
	}
	if f.m.delay(s, kerr.UnknownServerError.Code) && f.m.ctx.Err() == nil {
		f.m.log.Warn("applying a follower fetch failed; retrying", "topic", s.p.Topic(), "partition", s.p.Index(),
			"leader", f.leader, "offset", s.offset, "err", err)
	}
}

// replicaBatches returns the whole, valid batches of records from
// fetchOffset on, end to end (aliasing records). Batches wholly below
// fetchOffset are skipped; a trailing partial batch (the leader cut the
// answer at its byte limit) is dropped; a corrupt batch ends the result
// and is reported in bad. Every batch passes validateReplicatedBatch
// before AppendReplicated sees it.
func replicaBatches(records []byte, fetchOffset int64) (valid []byte, bad error) {
	begin, end := -1, 0
	for pos := 0; pos < len(records); {
		rest := records[pos:]
		if partialBatch(rest) {
			break
		}
		h, size, err := validateReplicatedBatch(rest)
		if err != nil {
			bad = err
			break
		}
		if begin < 0 && h.LastOffset() >= fetchOffset {
			begin = pos
		}
		pos += size
		if begin >= 0 {
			end = pos
		}
	}
	if begin < 0 {
		return nil, bad
	}
	return records[begin:end], bad
}

// validateReplicatedBatch checks what the leader's log guarantees of a
// stored batch (recordbatch.CheckStored: framing, magic 2, CRC-32C,
// lastOffsetDelta >= 0 and 0 <= recordCount <= lastOffsetDelta+1) and
// returns its size. Unlike the produce-side recordbatch.Validate it accepts
// batches compaction thinned out, which a leader may legitimately serve.
func validateReplicatedBatch(b []byte) (recordbatch.Header, int, error) {
	h, err := recordbatch.CheckStored(b)
	if err != nil {
		return h, 0, err
	}
	return h, h.Size(), nil
}

// partialBatch reports whether b holds less than one batch: shorter than
// a header, or shorter than its (plausible) length field says.
func partialBatch(b []byte) bool {
	if len(b) < recordbatch.HeaderSize {
		return true
	}
	length := int64(int32(binary.BigEndian.Uint32(b[8:12])))
	return length >= recordbatch.HeaderSize-12 && 12+length > int64(len(b))
}
