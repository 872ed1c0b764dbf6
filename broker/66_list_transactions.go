package broker

import (
	"context"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/txn"
)

// ListTransactions: v0-2. The ids this broker coordinates, filtered by
// state names (unknown names are echoed in UnknownStateFilters), producer
// ids, (v1) a minimum running time: DurationFilterMillis >= 0 keeps
// transactions started at least that long ago, as Kafka, and (v2) a
// regular expression the whole id must match (Go's RE2 syntax, close to
// Java's for the usual patterns); a bad one is INVALID_REGULAR_EXPRESSION.
// Only ids the principal may Describe are listed.
func (b *Broker) handleListTransactions(_ context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	var states []txn.State
	for _, name := range req.StateFilters {
		s, err := kmsg.ParseTransactionState(name)
		if err != nil {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
			continue
		}
		states = append(states, s)
	}
	if len(states) == 0 && len(req.StateFilters) > 0 {
		return resp, nil // only unknown states asked: nothing matches
	}
	var pattern *regexp.Regexp
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		re, err := regexp.Compile("^(?:" + *req.TransactionalIDPattern + ")$")
		if err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return resp, nil
		}
		pattern = re
	}
	now := time.Now().UnixMilli()
	metas, code := b.txns.List(func(m txn.Meta) bool {
		switch {
		case len(states) > 0 && !slices.Contains(states, m.State):
			return false
		case len(req.ProducerIDFilters) > 0 && !slices.Contains(req.ProducerIDFilters, m.ProducerID):
			return false
		case pattern != nil && !pattern.MatchString(m.ID):
			return false
		case req.Version >= 1 && req.DurationFilterMillis >= 0 && (m.StartMs < 0 || now-m.StartMs < req.DurationFilterMillis):
			return false
		case !b.authz.allowedQuiet(rc, auth.OpDescribe, auth.ResourceTransactionalID, m.ID):
			return false
		}
		return true
	})
	resp.ErrorCode = code
	for _, m := range metas {
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = m.ID, m.ProducerID, txn.StateName(m.State)
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}
