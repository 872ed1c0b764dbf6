package broker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/metadata"
)

// handleIncrementalAlterConfigs applies SET/DELETE/APPEND/SUBTRACT to topic
// overrides, or SET/DELETE to a broker resource's dynamic configs (or only
// validates them). AlterConfigs on the topic
// (TOPIC_AUTHORIZATION_FAILED) or Cluster (CLUSTER_AUTHORIZATION_FAILED) is
// needed.
func (b *Broker) handleIncrementalAlterConfigs(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		r := kmsg.NewIncrementalAlterConfigsResponseResource()
		r.ResourceType, r.ResourceName = rr.ResourceType, rr.ResourceName
		code, msg := b.authz.configAuthCode(rc, auth.OpAlterConfigs, rr.ResourceType, rr.ResourceName), ""
		if code == 0 {
			code, msg = b.alterResourceIncrementally(ctx, rr, req.ValidateOnly)
		}
		if code != 0 {
			r.ErrorCode, r.ErrorMessage = code, kmsg.StringPtr(msg)
		}
		resp.Resources = append(resp.Resources, r)
	}
	return resp, nil
}

// alterResourceIncrementally alters one resource: a broker resource's dynamic configs
// (dynamic_configs.go) or a topic's overrides.
func (b *Broker) alterResourceIncrementally(ctx context.Context, rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) (int16, string) {
	if rr.ResourceType == kmsg.ConfigResourceTypeBroker {
		mutate, code, msg := incrementalBrokerConfigs(rr)
		if code != 0 {
			return code, msg
		}
		return b.alterBrokerConfigs(ctx, rr.ResourceName, mutate, validateOnly)
	}
	if code, msg := b.unknownTopicCode(rr.ResourceType, rr.ResourceName); code != 0 {
		return code, msg
	}
	mutate, code, msg := incrementalAlter(rr)
	if code != 0 {
		return code, msg
	}
	return b.alterTopicConfigs(ctx, rr.ResourceName, mutate, validateOnly)
}

// incrementalAlter checks one IncrementalAlterConfigs resource and returns
// the edit that applies its operations; the edited set is validated whole.
func incrementalAlter(rr kmsg.IncrementalAlterConfigsRequestResource) (func(map[string]string) error, int16, string) {
	if code, msg := checkAlterResource(rr.ResourceType, rr.ResourceName); code != 0 {
		return nil, code, msg
	}
	seen := map[string]bool{}
	for _, c := range rr.Configs {
		if seen[c.Name] {
			return nil, kerr.InvalidRequest.Code, fmt.Sprintf("config %q given twice", c.Name)
		}
		seen[c.Name] = true
		if code, msg := checkIncrementalOp(c); code != 0 {
			return nil, code, msg
		}
	}
	mutate := func(m map[string]string) error {
		for _, c := range rr.Configs {
			if !metadata.IgnoredTopicConfig(c.Name) {
				applyIncrementalOp(m, c)
			}
		}
		return metadata.ValidateTopicConfigs(m)
	}
	return mutate, 0, ""
}

// unknownTopicCode is UNKNOWN_TOPIC_OR_PARTITION for a topic resource that
// does not exist: as Kafka, existence is checked before the configs, so a
// missing topic is never reported as an invalid config.
func (b *Broker) unknownTopicCode(typ kmsg.ConfigResourceType, name string) (int16, string) {
	if typ != kmsg.ConfigResourceTypeTopic || validateTopicName(name) != nil {
		return 0, ""
	}
	if _, ok := b.parts.topic(name); !ok {
		return kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %q does not exist", name)
	}
	return 0, ""
}

// checkAlterResource checks a topic resource (broker resources go through
// dynamic_configs.go); other types are not supported.
func checkAlterResource(typ kmsg.ConfigResourceType, name string) (int16, string) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if err := validateTopicName(name); err != nil {
			return kerr.InvalidTopicException.Code, err.Error()
		}
		return 0, ""
	}
	return kerr.InvalidRequest.Code, fmt.Sprintf("resource type %v is not supported", typ)
}

// checkIncrementalOp validates one op before anything is changed.
func checkIncrementalOp(c kmsg.IncrementalAlterConfigsRequestResourceConfig) (int16, string) {
	if metadata.IgnoredTopicConfig(c.Name) {
		return 0, ""
	}
	if _, ok := metadata.LookupTopicConfig(c.Name); !ok {
		return kerr.InvalidConfig.Code, fmt.Sprintf("unknown topic config %q", c.Name)
	}
	switch c.Op {
	case kmsg.IncrementalAlterConfigOpDelete:
		return 0, ""
	case kmsg.IncrementalAlterConfigOpSet:
	case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
		if !isListConfig(c.Name) {
			return kerr.InvalidConfig.Code, fmt.Sprintf("%v is only for list configs; %q is not one", c.Op, c.Name)
		}
	default:
		return kerr.InvalidRequest.Code, fmt.Sprintf("unknown config operation %d", c.Op)
	}
	if c.Value == nil {
		return kerr.InvalidConfig.Code, fmt.Sprintf("null value for config %q", c.Name)
	}
	return 0, ""
}

// applyIncrementalOp applies one checked op to an override map.
func applyIncrementalOp(m map[string]string, c kmsg.IncrementalAlterConfigsRequestResourceConfig) {
	switch c.Op {
	case kmsg.IncrementalAlterConfigOpSet:
		m[c.Name] = *c.Value
	case kmsg.IncrementalAlterConfigOpDelete:
		delete(m, c.Name)
	case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
		current, ok := m[c.Name]
		if !ok {
			d, _ := metadata.LookupTopicConfig(c.Name)
			current = d.Default
		}
		m[c.Name] = strings.Join(editList(splitList(current), splitList(*c.Value), c.Op == kmsg.IncrementalAlterConfigOpAppend), ",")
	}
}

// editList appends items not yet present, or removes every given item.
func editList(list, items []string, add bool) []string {
	if add {
		for _, it := range items {
			if !slices.Contains(list, it) {
				list = append(list, it)
			}
		}
		return list
	}
	return slices.DeleteFunc(list, func(s string) bool { return slices.Contains(items, s) })
}

// alterTopicConfigs runs mutate on the topic's overrides: on a copy when
// validating only, else through a CAS in metadata, then applies the result
// locally before answering (read-your-writes). Either way the result must
// pass metadata.ValidateTopicConfigChange, which holds the rules between
// the old and the new overrides (diskless.enable is fixed at creation).
func (b *Broker) alterTopicConfigs(ctx context.Context, name string, mutate func(map[string]string) error, validateOnly bool) (int16, string) {
	t, ok := b.parts.topic(name)
	if !ok {
		return kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %q does not exist", name)
	}
	if validateOnly {
		m := maps.Clone(t.topic.Configs)
		if m == nil {
			m = map[string]string{}
		}
		if err := mutate(m); err != nil {
			return errorCode(err)
		}
		if err := metadata.ValidateTopicConfigChange(t.topic.Configs, m); err != nil {
			return errorCode(err)
		}
		return 0, ""
	}
	updated, err := b.store.AlterTopicConfigs(ctx, name, mutate)
	if err != nil {
		return errorCode(err)
	}
	if err := b.parts.applyTopic(updated, nil); err != nil {
		return errorCode(err)
	}
	b.log.Info("topic configs altered", "topic", name)
	return 0, ""
}
