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
	return resp, nil
}

// apiVersionsFallback answers an ApiVersions request at a version this
// broker does not speak: v0, UNSUPPORTED_VERSION and the supported list, so
// the client can retry at a version both know.
func (b *Broker) apiVersionsFallback() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = b.apis.apiKeys()
	return resp
}
