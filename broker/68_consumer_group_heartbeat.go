package broker

import (
	"context"
	"crypto/rand"
	"encoding/base64"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/group"
	"github.com/strata-log/strata/broker/group/consumer"
)

// ConsumerGroupHeartbeat: v0-1 (KIP-848; the group machine is
// broker/group/consumer, wired in group.Coordinator.ConsumerHeartbeat).
// Read on the group is needed (GROUP_AUTHORIZATION_FAILED); a group this
// broker does not coordinate gets NOT_COORDINATOR. v0 joins (epoch 0, no
// member id) get a member id generated here, as Kafka's Uuid.toString
// (22 characters of URL-safe base64); v1 clients generate their own.
// A regular expression (v1) is resolved against the existing topics by the
// coordinator, keeping those the principal may Describe (Kafka 4 filters
// regex matches the same way; names listed explicitly are not filtered).

func (b *Broker) handleConsumerGroupHeartbeat(_ context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	if !b.authz.allowedGroup(rc, auth.OpRead, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	in := consumerHeartbeatInput(rc, req)
	res := b.groups.ConsumerHeartbeatFiltered(req.Group, in, b.describableTopics(rc))
	if res.Code != 0 { // as Kafka: no member id, epoch 0
		resp.ErrorCode = res.Code
		if res.Message != "" {
			resp.ErrorMessage = &res.Message
		}
		return resp, nil
	}
	r := res.Response
	resp.MemberID, resp.MemberEpoch, resp.HeartbeatIntervalMillis = optStr(r.MemberID), r.MemberEpoch, r.HeartbeatIntervalMs
	if r.Assignment != nil {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		for _, tp := range r.Assignment.List() {
			t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			t.TopicID, t.Partitions = tp.Topic, tp.Partitions
			a.Topics = append(a.Topics, t)
		}
		resp.Assignment = &a
	}
	return resp, nil
}

// describableTopics filters regex matches by Describe on the topic; nil
// (no filter) without an authorizer. It reads the ACL snapshot without
// locks, so the coordinator may call it under its own lock; denials are
// not logged (a regex routinely matches topics the member may not see).
func (b *Broker) describableTopics(rc *requestContext) group.TopicFilter {
	if !b.cfg.Authorizer {
		return nil
	}
	principal, host := principalOf(rc)
	z := b.authz.Snapshot()
	return func(topic string) bool {
		return z.Authorized(principal, host, auth.OpDescribe, auth.ResourceTopic, topic)
	}
}

// consumerHeartbeatInput converts the request (null stays nil: unchanged).
func consumerHeartbeatInput(rc *requestContext, req *kmsg.ConsumerGroupHeartbeatRequest) consumer.HeartbeatRequest {
	in := consumer.HeartbeatRequest{MemberID: req.MemberID, MemberEpoch: req.MemberEpoch, InstanceID: req.InstanceID,
		RackID: req.RackID, RebalanceTimeoutMs: req.RebalanceTimeoutMillis, SubscribedTopicNames: req.SubscribedTopicNames,
		SubscribedTopicRegex: req.SubscribedTopicRegex, ServerAssignor: req.ServerAssignor,
		ClientID: rc.clientID, ClientHost: clientHost(rc)}
	if req.Version == 0 && req.MemberID == "" && req.MemberEpoch == 0 {
		in.MemberID = newConsumerMemberID()
	}
	if req.Topics != nil {
		in.Owned = make([]consumer.TopicPartitions, 0, len(req.Topics))
		for _, t := range req.Topics {
			in.Owned = append(in.Owned, consumer.TopicPartitions{Topic: t.TopicID, Partitions: t.Partitions})
		}
	}
	return in
}

// newConsumerMemberID is a random UUID in Kafka's string form.
func newConsumerMemberID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // IETF variant
	return base64.RawURLEncoding.EncodeToString(u[:])
}

// consumerTopicMetadata lists the topics consumer-protocol groups may be
// assigned: every topic with its id and partition count, internal ones
// marked (a broad regex leaves them out). The coordinator calls it without
// its lock (lock order, coordinator_wiring.go).
func (b *Broker) consumerTopicMetadata() map[consumer.TopicID]consumer.TopicMetadata {
	out := map[consumer.TopicID]consumer.TopicMetadata{}
	for _, t := range b.parts.allTopics() {
		if len(t.states) == 0 {
			continue
		}
		id := consumer.TopicID(t.topic.ID)
		out[id] = consumer.TopicMetadata{ID: id, Name: t.topic.Name, Partitions: int32(len(t.states)),
			Internal: t.topic.Internal || t.topic.Name == group.OffsetsTopic}
	}
	return out
}
