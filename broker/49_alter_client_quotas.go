package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/quota"
)

// handleAlterClientQuotas sets and removes quotas per entity in etcd; the
// brokers pick them up through their quota watch (package quota). Each
// entry succeeds or fails on its own, as in Kafka.
func (b *Broker) handleAlterClientQuotas(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	allowed := quotaAdminAllowed(&b.authz, rc, true)
	for _, entry := range req.Entries {
		out := kmsg.NewAlterClientQuotasResponseEntry()
		for _, c := range entry.Entity {
			rc := kmsg.NewAlterClientQuotasResponseEntryEntity()
			rc.Type, rc.Name = c.Type, c.Name
			out.Entity = append(out.Entity, rc)
		}
		code, msg := kerr.ClusterAuthorizationFailed.Code, "not authorized to alter client quotas"
		if allowed {
			code, msg = alterQuotaEntry(ctx, b.store, entry, req.ValidateOnly)
		}
		if code != 0 {
			out.ErrorCode, out.ErrorMessage = code, kmsg.StringPtr(msg)
		}
		resp.Entries = append(resp.Entries, out)
	}
	if !req.ValidateOnly && allowed {
		// This broker applies its own change at once; others by the watch.
		if err := b.quotas.Reload(ctx); err != nil {
			b.log.Debug("reloading quotas after alter", "err", err)
		}
	}
	return resp, nil
}

// quotaWriter is the slice of the metadata store AlterClientQuotas writes
// (*metadata.Store implements it).
type quotaWriter interface {
	AlterQuotas(ctx context.Context, e metadata.QuotaEntity, set map[string]float64, remove []string) error
}

// alterQuotaEntry validates and applies one entry.
func alterQuotaEntry(ctx context.Context, store quotaWriter, entry kmsg.AlterClientQuotasRequestEntry, validateOnly bool) (int16, string) {
	e, err := quota.ParseAlterEntity(entry.Entity)
	if err != nil {
		return kerr.InvalidRequest.Code, err.Error()
	}
	set, remove, err := quota.ParseOps(entry.Ops)
	if err != nil {
		return kerr.InvalidRequest.Code, err.Error()
	}
	if validateOnly {
		return 0, ""
	}
	if err := store.AlterQuotas(ctx, e, set, remove); err != nil {
		if errors.Is(err, metadata.ErrInvalidConfig) {
			return kerr.InvalidRequest.Code, err.Error()
		}
		return kerr.UnknownServerError.Code, err.Error()
	}
	return 0, ""
}
