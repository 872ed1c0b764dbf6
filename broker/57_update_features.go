package broker

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/feature"
	"github.com/strata-log/strata/metadata"
)

// handleUpdateFeatures changes the cluster's finalized feature levels
// (v0-2), all or nothing, by Kafka 4's rules (package feature): the first
// refused update's INVALID_UPDATE_VERSION, with its reason, is the
// response's error; a feature named twice is INVALID_REQUEST. v0-1 list
// every feature with no error on success, as Kafka does; v2 has only the
// top-level error. Alter on the Cluster is needed
// (CLUSTER_AUTHORIZATION_FAILED). The change is in etcd and in this
// broker's ApiVersions before the answer; the other brokers follow
// through their watch.
func (b *Broker) handleUpdateFeatures(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.UpdateFeaturesRequest)
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	if !b.authz.allowedCluster(rc, auth.OpAlter) {
		resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, optStr("not authorized to update features")
		return resp, nil
	}
	updates := featureUpdates(req)
	if req.TimeoutMillis > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMillis)*time.Millisecond)
		defer cancel()
	}
	if code, msg := b.updateFeatures(ctx, updates, req.ValidateOnly); code != 0 {
		resp.ErrorCode, resp.ErrorMessage = code, optStr(msg)
		return resp, nil
	}
	if req.Version <= 1 {
		for _, u := range updates {
			r := kmsg.NewUpdateFeaturesResponseResult()
			r.Feature = u.Name
			resp.Results = append(resp.Results, r)
		}
	}
	return resp, nil
}

// featureUpdates reads the request's updates; v0's AllowDowngrade means a
// safe downgrade, as in Kafka.
func featureUpdates(req *kmsg.UpdateFeaturesRequest) []feature.Update {
	out := make([]feature.Update, 0, len(req.FeatureUpdates))
	for _, ru := range req.FeatureUpdates {
		typ := feature.UpgradeType(ru.UpgradeType)
		if req.Version == 0 {
			typ = feature.Upgrade
			if ru.AllowDowngrade {
				typ = feature.SafeDowngrade
			}
		}
		out = append(out, feature.Update{Name: ru.Feature, Level: ru.MaxVersionLevel, Type: typ})
	}
	return out
}

// updateFeatures checks updates against the levels in etcd and, unless
// validating only, stores the result and reloads it here.
func (b *Broker) updateFeatures(ctx context.Context, updates []feature.Update, validateOnly bool) (int16, string) {
	var err error
	if validateOnly {
		var f metadata.Features
		if f, err = b.store.LoadFeatures(ctx); err == nil {
			_, err = feature.Apply(f.Levels, updates)
		}
	} else {
		err = b.store.AlterFeatures(ctx, func(levels map[string]int16) (map[string]int16, error) {
			return feature.Apply(levels, updates)
		})
		if err == nil {
			err = b.reloadFeatures(ctx)
		}
	}
	switch {
	case err == nil:
		if !validateOnly {
			b.log.Info("finalized features updated", "updates", updates)
		}
		return 0, ""
	case errors.Is(err, feature.ErrInvalidUpdate):
		return kerr.InvalidUpdateVersion.Code, err.Error()
	case errors.Is(err, feature.ErrDuplicate):
		return kerr.InvalidRequest.Code, err.Error()
	}
	return errorCode(err)
}
