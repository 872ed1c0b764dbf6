package broker

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
)

// defaultTopicPartitionsLimit is the ResponsePartitionLimit Kafka applies
// when a request asks for more (or for none).
const defaultTopicPartitionsLimit = 2000

// handleDescribeTopicPartitions (v0, KIP-966; Kafka 3.8+ kafka-topics.sh
// --describe) describes topics by name in name order: the named ones (an
// unknown or undescribable name is UNKNOWN_TOPIC_OR_PARTITION or
// TOPIC_AUTHORIZATION_FAILED), or, for none named, every topic the
// principal may describe. At most ResponsePartitionLimit partitions
// (capped at 2000) are answered, starting at the request's cursor; when more
// remain, NextCursor names the next topic and partition. Strata keeps no
// eligible leader replicas (ELR), so those lists are empty.
func (b *Broker) handleDescribeTopicPartitions(_ context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeTopicPartitionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	limit := int(req.ResponsePartitionLimit)
	if limit <= 0 || limit > defaultTopicPartitionsLimit {
		limit = defaultTopicPartitionsLimit
	}
	view := b.liveBrks.view()
	for _, name := range b.describedTopicNames(rc, req) {
		if req.Cursor != nil && name < req.Cursor.Topic {
			continue
		}
		first := int32(0)
		if req.Cursor != nil && name == req.Cursor.Topic {
			first = max(req.Cursor.Partition, 0)
		}
		rt, next, ok := b.describeTopicPartitions(rc, name, first, limit, view, req.Topics != nil)
		if !ok {
			continue
		}
		resp.Topics = append(resp.Topics, rt)
		limit -= len(rt.Partitions)
		if next >= 0 {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: next}
			break
		}
	}
	return resp, nil
}

// describedTopicNames are the topics to describe, sorted: the named ones
// (each once), or every topic the principal may describe.
func (b *Broker) describedTopicNames(rc *requestContext, req *kmsg.DescribeTopicPartitionsRequest) []string {
	var names []string
	if len(req.Topics) > 0 {
		for _, t := range req.Topics {
			names = append(names, t.Topic)
		}
	} else {
		for _, t := range b.parts.allTopics() {
			if b.authz.allowedQuiet(rc, auth.OpDescribe, auth.ResourceTopic, t.topic.Name) {
				names = append(names, t.topic.Name)
			}
		}
	}
	slices.SortFunc(names, strings.Compare)
	return slices.Compact(names)
}

// describeTopicPartitions answers one topic from partition first on, at
// most limit partitions; next is the first partition left out (-1: none).
// ok is false for a topic to leave out (not named, and gone meanwhile).
func (b *Broker) describeTopicPartitions(rc *requestContext, name string, first int32, limit int, view brokerView, named bool) (
	rt kmsg.DescribeTopicPartitionsResponseTopic, next int32, ok bool,
) {
	rt = kmsg.NewDescribeTopicPartitionsResponseTopic()
	rt.Topic, rt.AuthorizedOperations = kmsg.StringPtr(name), authorizedOperationsUnknown
	rt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
	if named && !b.authz.allowedTopic(rc, auth.OpDescribe, name) {
		rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		return rt, -1, true
	}
	t, found := b.parts.topic(name)
	if !found {
		rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		return rt, -1, named
	}
	mt := metadataTopic(t, view, clientRack(rc.clientID))
	rt.TopicID, rt.IsInternal = mt.TopicID, mt.IsInternal
	for _, mp := range mt.Partitions {
		if mp.Partition < first {
			continue
		}
		if len(rt.Partitions) == limit {
			return rt, mp.Partition, true
		}
		p := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
		p.ErrorCode, p.Partition, p.LeaderID, p.LeaderEpoch = mp.ErrorCode, mp.Partition, mp.Leader, mp.LeaderEpoch
		p.Replicas, p.ISR, p.OfflineReplicas = mp.Replicas, mp.ISR, mp.OfflineReplicas
		p.EligibleLeaderReplicas, p.LastKnownELR = []int32{}, []int32{}
		rt.Partitions = append(rt.Partitions, p)
	}
	return rt, -1, true
}
