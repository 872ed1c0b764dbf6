package broker

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/metadata"
)

// errBadQuota marks an invalid AlterClientQuotas entry (INVALID_REQUEST).
var errBadQuota = errors.New("broker: invalid client quota")

// handleAlterClientQuotas sets and removes quotas per entity in etcd; the
// brokers pick them up through their quota watch (quota_store.go). Each
// entry succeeds or fails on its own, as in Kafka.
func (b *Broker) handleAlterClientQuotas(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	allowed := b.quotaAdminAllowed(rc, true)
	for _, entry := range req.Entries {
		out := kmsg.NewAlterClientQuotasResponseEntry()
		for _, c := range entry.Entity {
			rc := kmsg.NewAlterClientQuotasResponseEntryEntity()
			rc.Type, rc.Name = c.Type, c.Name
			out.Entity = append(out.Entity, rc)
		}
		code, msg := kerr.ClusterAuthorizationFailed.Code, "not authorized to alter client quotas"
		if allowed {
			code, msg = b.alterQuotaEntry(ctx, entry, req.ValidateOnly)
		}
		if code != 0 {
			out.ErrorCode, out.ErrorMessage = code, kmsg.StringPtr(msg)
		}
		resp.Entries = append(resp.Entries, out)
	}
	if !req.ValidateOnly && allowed {
		// This broker applies its own change at once; others by the watch.
		if err := b.loadQuotas(ctx); err != nil {
			b.log.Debug("reloading quotas after alter", "err", err)
		}
	}
	return resp, nil
}

// alterQuotaEntry validates and applies one entry.
func (b *Broker) alterQuotaEntry(ctx context.Context, entry kmsg.AlterClientQuotasRequestEntry, validateOnly bool) (int16, string) {
	e, err := parseAlterQuotaEntity(entry.Entity)
	if err != nil {
		return kerr.InvalidRequest.Code, err.Error()
	}
	set, remove, err := parseQuotaOps(entry.Ops)
	if err != nil {
		return kerr.InvalidRequest.Code, err.Error()
	}
	if validateOnly {
		return 0, ""
	}
	if err := b.store.AlterQuotas(ctx, e, set, remove); err != nil {
		if errors.Is(err, metadata.ErrInvalidConfig) {
			return kerr.InvalidRequest.Code, err.Error()
		}
		return kerr.UnknownServerError.Code, err.Error()
	}
	return 0, ""
}

// parseAlterQuotaEntity: user and/or client-id components, each once; a
// nil name is the default entity of its type.
func parseAlterQuotaEntity(parts []kmsg.AlterClientQuotasRequestEntryEntity) (quotaEntity, error) {
	var e quotaEntity
	seen := map[string]bool{}
	for _, p := range parts {
		if seen[p.Type] {
			return e, fmt.Errorf("%w: entity type %q appears more than once", errBadQuota, p.Type)
		}
		seen[p.Type] = true
		name, isDefault := "", p.Name == nil
		if p.Name != nil {
			if name = *p.Name; name == "" {
				return e, fmt.Errorf("%w: empty %s name (use the default entity)", errBadQuota, p.Type)
			}
		}
		switch p.Type {
		case quotaEntityUser:
			e.User, e.DefaultUser = name, isDefault
		case quotaEntityClientID:
			e.ClientID, e.DefaultClientID = name, isDefault
		default:
			return e, fmt.Errorf("%w: entity type %q is not supported", errBadQuota, p.Type)
		}
	}
	if err := e.Validate(); err != nil {
		return e, fmt.Errorf("%w: %v", errBadQuota, err)
	}
	return e, nil
}

// parseQuotaOps: known keys, each once; set values positive and finite,
// byte rates whole numbers (Kafka's LONG quota types).
func parseQuotaOps(ops []kmsg.AlterClientQuotasRequestEntryOp) (map[string]float64, []string, error) {
	set := map[string]float64{}
	var remove []string
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.Key] {
			return nil, nil, fmt.Errorf("%w: quota %q appears more than once", errBadQuota, op.Key)
		}
		seen[op.Key] = true
		if err := validQuotaValue(op.Key, op.Value, op.Remove); err != nil {
			return nil, nil, err
		}
		if op.Remove {
			remove = append(remove, op.Key)
		} else {
			set[op.Key] = op.Value
		}
	}
	return set, remove, nil
}

func validQuotaValue(key string, v float64, remove bool) error {
	switch key {
	case quotaKeyProducerByteRate, quotaKeyConsumerByteRate:
		if !remove && v != math.Trunc(v) {
			return fmt.Errorf("%w: %s must be a whole number of bytes per second, got %v", errBadQuota, key, v)
		}
	case quotaKeyRequestPercentage:
	default:
		return fmt.Errorf("%w: unknown quota %q (supported: %s, %s, %s)", errBadQuota, key,
			quotaKeyProducerByteRate, quotaKeyConsumerByteRate, quotaKeyRequestPercentage)
	}
	if !remove && (v <= 0 || math.IsNaN(v) || math.IsInf(v, 0)) {
		return fmt.Errorf("%w: %s must be positive, got %v", errBadQuota, key, v)
	}
	return nil
}
