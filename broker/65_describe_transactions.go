package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/txn"
)

// DescribeTransactions: v0. Each id's state at its coordinator (this
// broker): NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS or
// TRANSACTIONAL_ID_NOT_FOUND otherwise. Describe on the transactional id is
// needed (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); partitions of topics the
// principal may not Describe are left out, as Kafka.
func (b *Broker) handleDescribeTransactions(_ context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.ProducerEpoch = id, -1, -1
		if !b.authz.allowedTxnID(rc, auth.OpDescribe, id) {
			st.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		meta, code := b.txns.Describe(id)
		if code != 0 {
			st.ErrorCode = code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		st.State, st.TimeoutMillis, st.StartTimestamp = txn.StateName(meta.State), meta.TimeoutMs, meta.StartMs
		st.ProducerID, st.ProducerEpoch = meta.ProducerID, meta.ProducerEpoch
		for _, tp := range meta.Partitions {
			if !b.authz.allowedQuiet(rc, auth.OpDescribe, auth.ResourceTopic, tp.Topic) {
				continue
			}
			if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != tp.Topic {
				t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				t.Topic = tp.Topic
				st.Topics = append(st.Topics, t)
			}
			last := &st.Topics[len(st.Topics)-1]
			last.Partitions = append(last.Partitions, tp.Partition)
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}
