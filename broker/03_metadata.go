package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/metadata"
)

// handleMetadata describes brokers, the cluster and the asked-for topics
// (all of them for a null list, or an empty one before v1), creating
// unknown topics when the client allows and auto.create.topics.enable.
func (b *Broker) handleMetadata(ctx context.Context, _ *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	view := b.brokerView()
	for _, info := range view.list {
		br := kmsg.NewMetadataResponseBroker()
		br.NodeID, br.Host, br.Port = info.NodeID, info.Host, info.Port
		if info.Rack != "" {
			br.Rack = kmsg.StringPtr(info.Rack)
		}
		resp.Brokers = append(resp.Brokers, br)
	}
	resp.ClusterID = kmsg.StringPtr(b.clusterID)
	resp.ControllerID = b.controllerID()
	resp.AuthorizedOperations = authorizedOperationsUnknown
	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		for _, t := range b.parts.allTopics() {
			resp.Topics = append(resp.Topics, metadataTopic(t, view))
		}
		return resp, nil
	}
	autoCreate := (req.Version < 4 || req.AllowAutoTopicCreation) && !b.cfg.DisableAutoCreateTopics
	for _, rt := range req.Topics {
		resp.Topics = append(resp.Topics, b.metadataForRequested(ctx, rt, autoCreate, view))
	}
	return resp, nil
}

// metadataForRequested answers one requested topic, by name or (v10+) id.
func (b *Broker) metadataForRequested(ctx context.Context, rt kmsg.MetadataRequestTopic, autoCreate bool, view brokerView) kmsg.MetadataResponseTopic {
	if rt.Topic == nil {
		t, ok := b.parts.topicByID(rt.TopicID)
		if !ok {
			mt := kmsg.NewMetadataResponseTopic()
			mt.TopicID, mt.ErrorCode = rt.TopicID, kerr.UnknownTopicID.Code
			mt.AuthorizedOperations = authorizedOperationsUnknown
			return mt
		}
		return metadataTopic(t, view)
	}
	name := *rt.Topic
	errTopic := func(code int16) kmsg.MetadataResponseTopic {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.ErrorCode = kmsg.StringPtr(name), code
		mt.AuthorizedOperations = authorizedOperationsUnknown
		return mt
	}
	if t, ok := b.parts.topic(name); ok {
		return metadataTopic(t, view)
	}
	if validateTopicName(name) != nil {
		return errTopic(kerr.InvalidTopicException.Code)
	}
	if !autoCreate {
		return errTopic(kerr.UnknownTopicOrPartition.Code)
	}
	t, err := b.autoCreateTopic(ctx, name)
	if err != nil {
		b.log.Warn("auto-creating topic", "topic", name, "err", err)
		return errTopic(kerr.LeaderNotAvailable.Code) // retriable: the client asks again
	}
	return metadataTopic(t, view)
}

// autoCreateTopic creates name with the default partition count and
// replication factor; losing a race to another creator is fine.
func (b *Broker) autoCreateTopic(ctx context.Context, name string) (topicView, error) {
	spec := topicSpec{name: name, partitions: b.cfg.DefaultPartitions, replicationFactor: b.cfg.DefaultReplicationFactor}
	replicas, code, msg := b.placeReplicas(spec)
	if code != 0 {
		return topicView{}, errors.New(msg)
	}
	_, err := b.createTopic(ctx, metadata.CreateTopicRequest{Name: name, Replicas: replicas})
	if err != nil && !errors.Is(err, metadata.ErrTopicExists) {
		return topicView{}, err
	}
	if t, ok := b.parts.topic(name); ok {
		return t, nil
	}
	return b.loadTopicLocally(ctx, name)
}

// metadataTopic describes one known topic.
func metadataTopic(t topicView, view brokerView) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(t.topic.Name)
	mt.TopicID = t.topic.ID
	mt.IsInternal = t.topic.Internal
	mt.AuthorizedOperations = authorizedOperationsUnknown
	for i, st := range t.states {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(i)
		mp.Leader, mp.LeaderEpoch = view.leaderOf(st), st.LeaderEpoch
		mp.Replicas, mp.ISR = nonNil(st.Replicas), nonNil(st.ISR)
		mp.OfflineReplicas = []int32{}
		for _, r := range st.Replicas {
			if !view.live(r) {
				mp.OfflineReplicas = append(mp.OfflineReplicas, r)
			}
		}
		if mp.Leader < 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	if mt.Partitions == nil {
		mt.Partitions = []kmsg.MetadataResponseTopicPartition{}
	}
	return mt
}

func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}
