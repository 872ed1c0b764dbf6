package broker

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
)

// handleDescribeConfigs describes topic configs (overrides and defaults)
// and this broker's static configs. DescribeConfigs on the topic
// (TOPIC_AUTHORIZATION_FAILED) or, for broker resources, on the Cluster
// (CLUSTER_AUTHORIZATION_FAILED) is needed.
func (b *Broker) handleDescribeConfigs(_ context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		r := kmsg.NewDescribeConfigsResponseResource()
		r.ResourceType, r.ResourceName = rr.ResourceType, rr.ResourceName
		if code := b.authz.configAuthCode(rc, auth.OpDescribeConfigs, rr.ResourceType, rr.ResourceName); code != 0 {
			r.ErrorCode = code
			resp.Resources = append(resp.Resources, r)
			continue
		}
		entries, code, msg := b.describeResource(rr.ResourceType, rr.ResourceName)
		if code != 0 {
			r.ErrorCode, r.ErrorMessage = code, kmsg.StringPtr(msg)
		} else {
			r.Configs = describedConfigs(entries, rr.ConfigNames, req)
		}
		resp.Resources = append(resp.Resources, r)
	}
	return resp, nil
}

// configAuthCode is the authorization answer (0: allowed) for op
// (DescribeConfigs or AlterConfigs) on a config resource: topics are
// checked on the topic, broker and broker-logger resources on the Cluster;
// other types are refused later as unsupported.
func (z *authorizer) configAuthCode(rc *requestContext, op auth.Operation, typ kmsg.ConfigResourceType, name string) int16 {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if !z.allowedTopic(rc, op, name) {
			return kerr.TopicAuthorizationFailed.Code
		}
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		if !z.allowedCluster(rc, op) {
			return kerr.ClusterAuthorizationFailed.Code
		}
	}
	return 0
}

// describeResource returns the configs of one resource, or an error code:
// a topic's, this broker's (static and dynamic), or the cluster-wide
// dynamic defaults (resource "").
func (b *Broker) describeResource(typ kmsg.ConfigResourceType, name string) ([]configEntry, int16, string) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if err := validateTopicName(name); err != nil {
			return nil, kerr.InvalidTopicException.Code, err.Error()
		}
		t, ok := b.parts.topic(name)
		if !ok {
			return nil, kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %q does not exist", name)
		}
		return topicConfigEntries(t.topic.Configs, b.cfg.topicDefaults()), 0, ""
	case kmsg.ConfigResourceTypeBroker:
		if name == "" {
			return b.clusterDefaultConfigEntries(), 0, ""
		}
		if code, msg := checkBrokerResource(name, b.cfg.NodeID); code != 0 {
			return nil, code, msg
		}
		return b.brokerConfigEntries(), 0, ""
	}
	return nil, kerr.InvalidRequest.Code, fmt.Sprintf("resource type %v is not supported", typ)
}

// checkBrokerResource accepts this broker's id only.
func checkBrokerResource(name string, nodeID int32) (int16, string) {
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil || int32(id) != nodeID {
		return kerr.InvalidRequest.Code, fmt.Sprintf("unexpected broker id %q, this is broker %d", name, nodeID)
	}
	return 0, ""
}

// describedConfigs renders entries, keeping only names when given.
func describedConfigs(entries []configEntry, names []string, req *kmsg.DescribeConfigsRequest) []kmsg.DescribeConfigsResponseResourceConfig {
	var want map[string]bool
	if names != nil {
		want = make(map[string]bool, len(names))
		for _, n := range names {
			want[n] = true
		}
	}
	out := []kmsg.DescribeConfigsResponseResourceConfig{}
	for _, e := range entries {
		if want != nil && !want[e.name] {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Value, c.ReadOnly, c.IsSensitive = e.name, kmsg.StringPtr(e.value), e.readOnly, e.sensitive
		c.Source, c.ConfigType = e.source, e.configType
		c.IsDefault = e.source == kmsg.ConfigSourceDefaultConfig
		if e.sensitive {
			c.Value = nil
		}
		if req.IncludeDocumentation && e.doc != "" {
			c.Documentation = kmsg.StringPtr(e.doc)
		}
		if req.IncludeSynonyms {
			c.ConfigSynonyms = configSynonyms(e)
		}
		out = append(out, c)
	}
	return out
}

// brokerConfigsWithoutDefault are the broker-level names of topic configs
// that have no default value of their own in Kafka (it comes from a sibling,
// e.g. log.retention.hours, or there is no broker config at all). Kafka lists
// a broker synonym only where the broker config is set or has a default, so
// a defaulted topic config with one of these names has no synonym.
var brokerConfigsWithoutDefault = map[string]bool{
	"log.retention.ms": true, "log.roll.ms": true, "log.roll.jitter.ms": true, "log.flush.interval.ms": true,
	"leader.replication.throttled.replicas": true, "follower.replication.throttled.replicas": true,
}

// configSynonyms lists where the value could come from, highest precedence
// first, as Kafka: the topic override, then the broker config with its
// default, where Kafka has one.
func configSynonyms(e configEntry) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	syn := func(name, v string, src kmsg.ConfigSource) kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
		s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		s.Name, s.Value, s.Source = name, kmsg.StringPtr(v), src
		return s
	}
	var broker []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	if !brokerConfigsWithoutDefault[e.defaultName] {
		broker = append(broker, syn(e.defaultName, e.defaultValue, kmsg.ConfigSourceDefaultConfig))
	}
	if e.levels != nil { // a dynamic broker config: every level that sets it
		out := make([]kmsg.DescribeConfigsResponseResourceConfigConfigSynonym, 0, len(e.levels))
		for _, l := range e.levels {
			out = append(out, syn(e.name, l.value, l.source))
		}
		return out
	}
	switch e.source {
	case kmsg.ConfigSourceDynamicTopicConfig:
		return append([]kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{syn(e.name, e.value, e.source)}, broker...)
	case kmsg.ConfigSourceDefaultConfig:
		return broker
	}
	return []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{syn(e.name, e.value, e.source)}
}
