package broker

// The leader's data path around the replica: appends (with acks=all
// registration), the acks=all purgatory wait, replication errors as Kafka
// codes, and where clients should go instead (NOT_LEADER_OR_FOLLOWER with
// the current leader and its endpoint, where the protocol allows).

import (
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/replication"
	"github.com/strata-log/strata/replication/replica"
)

// appendAsLeader appends validated batches while p's replica leads, stamped
// with its epoch, and reports the new LEO (replica.Core.AppendAsLeader:
// with acksAll, min.insync.replicas is checked first and an acks=all
// waiter registered for timeoutMs of logical time). Errors:
// replication.ErrNotLeader, the machine's, or the log's (hotlog.ErrClosed
// once the partition closed). A retried idempotent batch (res.Duplicate)
// appends nothing and res holds the original offsets, so its waiter waits
// for the original.
func (p *partition) appendAsLeader(records []byte, acksAll bool, timeoutMs int64) (hotlog.AppendResult, *replica.AckWait, error) {
	var res hotlog.AppendResult
	wait, err := p.replica.AppendAsLeader(acksAll, timeoutMs, func(epoch int32) (int64, error) {
		var err error
		res, err = p.log.Append(records, epoch)
		return res.LastOffset + 1, err
	})
	if errors.Is(err, replica.ErrClosed) {
		err = hotlog.ErrClosed
	}
	return res, wait, err
}

// appendLeader appends batches to p while its replica leads (acks=1
// semantics): the path for the broker's own writes, such as the group
// coordinator's offsets log.
func (p *partition) appendLeader(records []byte) (hotlog.AppendResult, error) {
	res, _, err := p.appendAsLeader(records, false, 0)
	return res, err
}

// ackBackstop is added to a produce timeout for AckWait.Await's deadline: the
// replica's own timeout normally answers first (within a tick).
const ackBackstop = time.Second

// replicationErrorCode maps the replication machine's errors to Kafka
// codes (replication/doc.go); ok is false for other errors.
func replicationErrorCode(err error) (code int16, ok bool) {
	switch {
	case errors.Is(err, replication.ErrNotLeader), errors.Is(err, replication.ErrNotFollower),
		errors.Is(err, replication.ErrUnknownReplica):
		return kerr.NotLeaderForPartition.Code, true
	case errors.Is(err, replication.ErrStaleEpoch):
		return kerr.FencedLeaderEpoch.Code, true
	case errors.Is(err, replication.ErrUnknownEpoch):
		return kerr.UnknownLeaderEpoch.Code, true
	case errors.Is(err, replication.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code, true
	case errors.Is(err, replication.ErrNotEnoughReplicasAfterAppend):
		return kerr.NotEnoughReplicasAfterAppend.Code, true
	case errors.Is(err, replication.ErrNotEnoughReplicas):
		return kerr.NotEnoughReplicas.Code, true
	case errors.Is(err, replication.ErrTimedOut), errors.Is(err, replication.ErrTooManyWaiters):
		return kerr.RequestTimedOut.Code, true
	}
	return 0, false
}

// leaderHint is where clients should send a partition's requests: its
// serving leader (-1 when it has none, or when the state names this node
// but it does not lead, e.g. after a restart) and the state's leader epoch.
func (b *Broker) leaderHint(t topicView, index int32) (leader, epoch int32) {
	if index < 0 || int(index) >= len(t.states) {
		return -1, -1
	}
	st := t.states[index]
	leader = b.liveBrks.view().leaderOf(st)
	if leader == b.cfg.NodeID && !b.reg.Leads(st) {
		leader = -1
	}
	return leader, st.LeaderEpoch
}

// leaderHintByName / leaderHintByID look the topic up for leaderHint.
func (b *Broker) leaderHintByName(topic string, index int32) (int32, int32) {
	t, ok := b.parts.topic(topic)
	if !ok {
		return -1, -1
	}
	return b.leaderHint(t, index)
}

func (b *Broker) leaderHintByID(id metadata.TopicID, index int32) (int32, int32) {
	t, ok := b.parts.topicByID(id)
	if !ok {
		return -1, -1
	}
	return b.leaderHint(t, index)
}

// leaderEndpoints collects the registrations of leaders named in hints
// (NodeEndpoints of Produce v10+ and Fetch v16+), in node id order.
type leaderEndpoints struct{ ids []int32 }

func (l *leaderEndpoints) add(id int32) {
	if id >= 0 && !slices.Contains(l.ids, id) {
		l.ids = append(l.ids, id)
	}
}

func (l *leaderEndpoints) infos(b *Broker) []metadata.BrokerInfo {
	view := b.liveBrks.view()
	slices.Sort(l.ids)
	var out []metadata.BrokerInfo
	for _, id := range l.ids {
		if info, ok := view.find(id); ok {
			out = append(out, info)
		}
	}
	return out
}

func (l *leaderEndpoints) produceBrokers(b *Broker) []kmsg.ProduceResponseBroker {
	var out []kmsg.ProduceResponseBroker
	for _, info := range l.infos(b) {
		e := kmsg.NewProduceResponseBroker()
		e.NodeID, e.Host, e.Port = info.NodeID, info.Host, info.Port
		if info.Rack != "" {
			e.Rack = kmsg.StringPtr(info.Rack)
		}
		out = append(out, e)
	}
	return out
}

func (l *leaderEndpoints) fetchBrokers(b *Broker) []kmsg.FetchResponseBroker {
	var out []kmsg.FetchResponseBroker
	for _, info := range l.infos(b) {
		e := kmsg.NewFetchResponseBroker()
		e.NodeID, e.Host, e.Port = info.NodeID, info.Host, info.Port
		if info.Rack != "" {
			e.Rack = kmsg.StringPtr(info.Rack)
		}
		out = append(out, e)
	}
	return out
}
