package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/metadata"
)

// FindCoordinator: v0-6. v4+ batches keys. Group keys (type 0) map to the
// leader of their __consumer_offsets partition, which is created on first
// use. Transaction keys (type 1) map to the leader of their
// __transaction_state partition, created on first use likewise; an empty
// transactional id is INVALID_REQUEST. Describe on the group
// (GROUP_AUTHORIZATION_FAILED) or transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) is needed.

const (
	coordinatorTypeGroup       = 0
	coordinatorTypeTransaction = 1
)

func (b *Broker) handleFindCoordinator(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if req.Version < 4 {
		c := b.findCoordinator(ctx, rc, req.CoordinatorType, req.CoordinatorKey)
		resp.ErrorCode, resp.ErrorMessage = c.ErrorCode, c.ErrorMessage
		resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
		return resp, nil
	}
	for _, key := range req.CoordinatorKeys {
		resp.Coordinators = append(resp.Coordinators, b.findCoordinator(ctx, rc, req.CoordinatorType, key))
	}
	return resp, nil
}

func (b *Broker) findCoordinator(ctx context.Context, rc *requestContext, keyType int8, key string) kmsg.FindCoordinatorResponseCoordinator {
	c := kmsg.NewFindCoordinatorResponseCoordinator()
	c.Key, c.NodeID, c.Port = key, -1, -1
	fail := func(code int16, msg string) kmsg.FindCoordinatorResponseCoordinator {
		c.ErrorCode, c.ErrorMessage = code, kmsg.StringPtr(msg)
		return c
	}
	var (
		info metadata.BrokerInfo
		code int16
		msg  string
	)
	switch {
	case keyType == coordinatorTypeGroup && key == "":
		return fail(kerr.InvalidGroupID.Code, "empty group id")
	case keyType == coordinatorTypeGroup && !b.authz.allowedGroup(rc, auth.OpDescribe, key):
		return fail(kerr.GroupAuthorizationFailed.Code, "not authorized to describe the group")
	case keyType == coordinatorTypeTransaction && key != "" && !b.authz.allowedTxnID(rc, auth.OpDescribe, key):
		return fail(kerr.TransactionalIDAuthorizationFailed.Code, "not authorized to describe the transactional id")
	case keyType == coordinatorTypeGroup:
		info, code, msg = b.coordinatorOf(ctx, offsetsTopic(b.groups), key)
	case keyType == coordinatorTypeTransaction && key == "":
		return fail(kerr.InvalidRequest.Code, "empty transactional id")
	case keyType == coordinatorTypeTransaction:
		info, code, msg = b.coordinatorOf(ctx, txnStateTopic(b.txns), key)
	default:
		return fail(kerr.InvalidRequest.Code, "unknown coordinator type")
	}
	if code != 0 {
		return fail(code, msg)
	}
	c.NodeID, c.Host, c.Port = info.NodeID, info.Host, info.Port
	return c
}
