package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/txn"
)

// AddPartitionsToTxn: v0-5. v0-3 carry one transaction (from the client),
// v4+ several (the batched form; VerifyOnly asks whether the partitions are
// already in the ongoing transaction, KIP-890 part 1). Every partition
// gets its transaction's code; partitions of unknown topics get
// UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, as in
// Kafka. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2.
//
// Authorization: v4+ is the brokers' form and needs ClusterAction on the
// Cluster (top-level CLUSTER_AUTHORIZATION_FAILED). v0-3 need Write on the
// transactional id (every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
// and on each topic (TOPIC_AUTHORIZATION_FAILED; the others then
// OPERATION_NOT_ATTEMPTED), as Kafka.

func (b *Broker) handleAddPartitionsToTxn(_ context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version >= 4 && !b.authz.allowedCluster(rc, auth.OpClusterAction) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	if req.Version >= 4 {
		for _, rt := range req.Transactions {
			resp.Transactions = append(resp.Transactions, b.addPartitionsTxn(req.Version, rt))
		}
		return resp, nil
	}
	rt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch = req.TransactionalID, req.ProducerID, req.ProducerEpoch
	for _, t := range req.Topics {
		rt.Topics = append(rt.Topics, kmsg.AddPartitionsToTxnRequestTransactionTopic{Topic: t.Topic, Partitions: t.Partitions})
	}
	var res kmsg.AddPartitionsToTxnResponseTransaction
	if denied := b.addPartitionsAuthCodes(rc, rt); denied != nil {
		res = *denied
	} else {
		res = b.addPartitionsTxn(req.Version, rt)
	}
	for _, t := range res.Topics {
		st := kmsg.NewAddPartitionsToTxnResponseTopic()
		st.Topic = t.Topic
		for _, p := range t.Partitions {
			sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, p.ErrorCode
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// addPartitionsTxn answers one transaction of the request.
func (b *Broker) addPartitionsTxn(version int16, rt kmsg.AddPartitionsToTxnRequestTransaction) kmsg.AddPartitionsToTxnResponseTransaction {
	var tps []txn.TopicPartition
	for _, t := range rt.Topics {
		for _, p := range t.Partitions {
			tps = append(tps, txn.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	codes := make([]int16, len(tps))
	if unknown := b.unknownPartitions(tps); unknown != nil {
		for i := range tps {
			codes[i] = kerr.OperationNotAttempted.Code
			if unknown[i] {
				codes[i] = kerr.UnknownTopicOrPartition.Code
			}
		}
		return addPartitionsResult(rt.TransactionalID, tps, codes)
	}
	top, per := b.txns.AddPartitions(txn.AddInput{ID: rt.TransactionalID, ProducerID: rt.ProducerID,
		ProducerEpoch: rt.ProducerEpoch, Partitions: tps, VerifyOnly: rt.VerifyOnly})
	for i := range codes {
		codes[i] = fencedForVersion(top, version < 2)
		if top == 0 && i < len(per) {
			codes[i] = per[i]
		}
	}
	return addPartitionsResult(rt.TransactionalID, tps, codes)
}

// addPartitionsAuthCodes is the answer of a client's (v0-3) transaction
// that is not authorized, or nil when it is.
func (b *Broker) addPartitionsAuthCodes(rc *requestContext, rt kmsg.AddPartitionsToTxnRequestTransaction) *kmsg.AddPartitionsToTxnResponseTransaction {
	if !b.cfg.Authorizer {
		return nil
	}
	var tps []txn.TopicPartition
	var codes []int16
	idAllowed := b.authz.allowedTxnID(rc, auth.OpWrite, rt.TransactionalID)
	denied := !idAllowed
	for _, t := range rt.Topics {
		code := kerr.TransactionalIDAuthorizationFailed.Code
		if idAllowed {
			code = kerr.OperationNotAttempted.Code
			if !b.authz.allowedTopic(rc, auth.OpWrite, t.Topic) {
				code, denied = kerr.TopicAuthorizationFailed.Code, true
			}
		}
		for _, p := range t.Partitions {
			tps = append(tps, txn.TopicPartition{Topic: t.Topic, Partition: p})
			codes = append(codes, code)
		}
	}
	if !denied {
		return nil
	}
	res := addPartitionsResult(rt.TransactionalID, tps, codes)
	return &res
}

// unknownPartitions marks the partitions whose topic or index does not
// exist; nil when all exist.
func (b *Broker) unknownPartitions(tps []txn.TopicPartition) []bool {
	var out []bool
	for i, tp := range tps {
		t, ok := b.parts.topic(tp.Topic)
		if ok && tp.Partition >= 0 && int(tp.Partition) < len(t.states) {
			continue
		}
		if out == nil {
			out = make([]bool, len(tps))
		}
		out[i] = true
	}
	return out
}

func addPartitionsResult(id string, tps []txn.TopicPartition, codes []int16) kmsg.AddPartitionsToTxnResponseTransaction {
	res := kmsg.NewAddPartitionsToTxnResponseTransaction()
	res.TransactionalID = id
	for i, tp := range tps {
		if n := len(res.Topics); n == 0 || res.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			t.Topic = tp.Topic
			res.Topics = append(res.Topics, t)
		}
		p := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
		p.Partition, p.ErrorCode = tp.Partition, codes[i]
		last := &res.Topics[len(res.Topics)-1]
		last.Partitions = append(last.Partitions, p)
	}
	return res
}

// fencedForVersion: clients before KIP-588 know INVALID_PRODUCER_EPOCH,
// not PRODUCER_FENCED.
func fencedForVersion(code int16, old bool) int16 {
	if old && code == kerr.ProducerFenced.Code {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}
