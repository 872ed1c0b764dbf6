package broker

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/feature"
	"github.com/strata-log/strata/metadata"
)

// handleApiVersions lists every supported API key with its version range.
func (b *Broker) handleApiVersions(_ context.Context, _ *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = b.apis.apiKeys()
	f, ok := b.features.loaded()
	addFeatures(resp, f, ok)
	return resp, nil
}

// maxTransactionVersion is the highest transaction.version this broker
// implements (KIP-890 part 2).
const maxTransactionVersion = 2

// addFeatures lists the supported feature levels and the cluster's
// finalized ones (v3+), with their epoch: the mod revision of the etcd
// record, which only grows. Level 0 is not listed as finalized, as Kafka
// omits features at level 0. Before the levels are first loaded the epoch
// is -1, which tells clients to ignore the finalized levels.
func addFeatures(resp *kmsg.ApiVersionsResponse, f metadata.Features, ok bool) {
	supported := feature.Supported()
	for _, name := range feature.Names() {
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = name, supported[name].Min, supported[name].Max
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
	}
	resp.FinalizedFeaturesEpoch = -1
	if !ok {
		return
	}
	resp.FinalizedFeaturesEpoch = f.Epoch
	finalized := feature.Finalized(f.Levels)
	for _, name := range slices.Sorted(maps.Keys(finalized)) {
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = name, finalized[name], finalized[name]
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
	}
}

// apiVersionsFallback answers an ApiVersions request at a version this
// broker does not speak: v0, UNSUPPORTED_VERSION and the supported list, so
// the client can retry at a version both know.
func (t apiTable) apiVersionsFallback() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = t.apiKeys()
	return resp
}
