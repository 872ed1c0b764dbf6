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
// Kafka. Partitions of diskless topics, which take no transactions yet,
// get UNSUPPORTED_FOR_MESSAGE_FORMAT and the others again
// OPERATION_NOT_ATTEMPTED (disklessTxnAnswer). PRODUCER_FENCED is
// INVALID_PRODUCER_EPOCH before v2.
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
			if refused := b.parts.disklessTxnAnswer(rt); refused != nil {
				resp.Transactions = append(resp.Transactions, *refused)
				continue
			}
			resp.Transactions = append(resp.Transactions, b.txnRouter.AddPartitions(req.Version, rt))
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
	} else if refused := b.parts.disklessTxnAnswer(rt); refused != nil {
		res = *refused
	} else {
		res = b.txnRouter.AddPartitions(req.Version, rt)
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
	res := txn.AddPartitionsAnswer(rt.TransactionalID, tps, codes)
	return &res
}
