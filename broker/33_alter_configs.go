package broker

import (
	"context"
	"fmt"
	"maps"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/metadata"
)

// handleAlterConfigs replaces all of a topic's overrides, or all of a
// broker resource's dynamic configs, with the given set (the legacy,
// non-incremental API). AlterConfigs on the topic
// (TOPIC_AUTHORIZATION_FAILED) or Cluster (CLUSTER_AUTHORIZATION_FAILED) is
// needed.
func (b *Broker) handleAlterConfigs(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		r := kmsg.NewAlterConfigsResponseResource()
		r.ResourceType, r.ResourceName = rr.ResourceType, rr.ResourceName
		code, msg := b.authz.configAuthCode(rc, auth.OpAlterConfigs, rr.ResourceType, rr.ResourceName), ""
		if code == 0 {
			code, msg = b.alterResource(ctx, rr, req.ValidateOnly)
		}
		if code != 0 {
			r.ErrorCode, r.ErrorMessage = code, kmsg.StringPtr(msg)
		}
		resp.Resources = append(resp.Resources, r)
	}
	return resp, nil
}

// alterResource alters one resource: a broker resource's dynamic configs
// (dynamic_configs.go) or a topic's overrides.
func (b *Broker) alterResource(ctx context.Context, rr kmsg.AlterConfigsRequestResource, validateOnly bool) (int16, string) {
	if rr.ResourceType == kmsg.ConfigResourceTypeBroker {
		mutate, code, msg := replaceBrokerConfigs(rr)
		if code != 0 {
			return code, msg
		}
		return b.alterBrokerConfigs(ctx, rr.ResourceName, mutate, validateOnly)
	}
	if code, msg := b.unknownTopicCode(rr.ResourceType, rr.ResourceName); code != 0 {
		return code, msg
	}
	mutate, code, msg := replaceConfigs(rr)
	if code != 0 {
		return code, msg
	}
	return b.alterTopicConfigs(ctx, rr.ResourceName, mutate, validateOnly)
}

// replaceConfigs checks one AlterConfigs resource and returns the edit
// that replaces all of the topic's overrides with the given set.
func replaceConfigs(rr kmsg.AlterConfigsRequestResource) (func(map[string]string) error, int16, string) {
	if code, msg := checkAlterResource(rr.ResourceType, rr.ResourceName); code != 0 {
		return nil, code, msg
	}
	next, code, msg := alteredConfigs(rr.Configs, metadata.IgnoredTopicConfig)
	if code != 0 {
		return nil, code, msg
	}
	if err := metadata.ValidateTopicConfigs(next); err != nil {
		return nil, kerr.InvalidConfig.Code, err.Error()
	}
	return replaceWith(next), 0, ""
}

// alteredConfigs is an AlterConfigs resource's set as a map: no null
// values, no name twice, the names ignored drops left out.
func alteredConfigs(configs []kmsg.AlterConfigsRequestResourceConfig, ignored func(string) bool) (map[string]string, int16, string) {
	next := make(map[string]string, len(configs))
	seen := make(map[string]bool, len(configs))
	for _, c := range configs {
		if c.Value == nil {
			return nil, kerr.InvalidRequest.Code, fmt.Sprintf("null value for config %q is not supported", c.Name)
		}
		if seen[c.Name] {
			return nil, kerr.InvalidRequest.Code, fmt.Sprintf("config %q given twice", c.Name)
		}
		seen[c.Name] = true
		if !ignored(c.Name) {
			next[c.Name] = *c.Value
		}
	}
	return next, 0, ""
}

// replaceWith is the edit that makes a config map exactly next.
func replaceWith(next map[string]string) func(map[string]string) error {
	return func(m map[string]string) error {
		clear(m)
		maps.Copy(m, next)
		return nil
	}
}
