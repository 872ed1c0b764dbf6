package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleApiVersions lists every supported API key with its version range.
func (b *Broker) handleApiVersions(_ context.Context, _ *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = b.apis.apiKeys()
	addFeatures(resp, b.cfg.TransactionVersion)
	return resp, nil
}

// maxTransactionVersion is the highest transaction.version this broker
// implements (KIP-890 part 2).
const maxTransactionVersion = 2

// finalizedFeaturesEpoch is the epoch of the finalized feature levels. They
// come from the broker's configuration, not from a feature-update log, so
// the epoch only has to be non-negative: clients ignore the finalized
// levels when it is -1.
const finalizedFeaturesEpoch = 1

// addFeatures lists the supported and finalized feature levels (v3+): only
// transaction.version, the one feature clients act on. Level 0 is not
// listed as finalized, as Kafka omits features at level 0.
func addFeatures(resp *kmsg.ApiVersionsResponse, txnVersion int16) {
	sf := kmsg.NewApiVersionsResponseSupportedFeature()
	sf.Name, sf.MinVersion, sf.MaxVersion = "transaction.version", 0, maxTransactionVersion
	resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
	resp.FinalizedFeaturesEpoch = finalizedFeaturesEpoch
	if txnVersion > 0 {
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = "transaction.version", txnVersion, txnVersion
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
