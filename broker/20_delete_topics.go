package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/metadata"
)

// handleDeleteTopics deletes topics by name (v0-v5) or by name or id (v6+).
// Delete on the topic is needed (TOPIC_AUTHORIZATION_FAILED): checked
// before existence for a name, so that existence does not leak, and after
// resolving an id (whose name is then not answered).
func (b *Broker) handleDeleteTopics(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	topics := req.Topics
	if req.Version < 6 {
		topics = nil
		for _, name := range req.TopicNames {
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			topics = append(topics, rt)
		}
	}
	for _, rt := range topics {
		resp.Topics = append(resp.Topics, b.deleteOneTopic(ctx, rc, rt))
	}
	return resp, nil
}

func (b *Broker) deleteOneTopic(ctx context.Context, rc *requestContext, rt kmsg.DeleteTopicsRequestTopic) kmsg.DeleteTopicsResponseTopic {
	st := kmsg.NewDeleteTopicsResponseTopic()
	st.Topic, st.TopicID = rt.Topic, rt.TopicID
	fail := func(code int16, msg string) kmsg.DeleteTopicsResponseTopic {
		st.ErrorCode, st.ErrorMessage = code, kmsg.StringPtr(msg)
		return st
	}
	if rt.Topic != nil && !b.authz.allowedTopic(rc, auth.OpDelete, *rt.Topic) {
		return fail(kerr.TopicAuthorizationFailed.Code, "not authorized to delete the topic")
	}
	t, code, msg := resolveDeleteTarget(rt, &b.parts)
	if code != 0 {
		return fail(code, msg)
	}
	if !b.authz.allowedTopic(rc, auth.OpDelete, t.topic.Name) {
		return fail(kerr.TopicAuthorizationFailed.Code, "not authorized to delete the topic")
	}
	st.Topic, st.TopicID = kmsg.StringPtr(t.topic.Name), t.topic.ID
	if err := b.store.DeleteTopic(ctx, t.topic.Name); err != nil {
		return fail(errorCode(err))
	}
	b.parts.removeTopic(t.topic.Name, t.topic.ID)
	return st
}

// resolveDeleteTarget finds the topic named or identified (not both).
func resolveDeleteTarget(rt kmsg.DeleteTopicsRequestTopic, topics *partitionManager) (topicView, int16, string) {
	hasID := rt.TopicID != metadata.TopicID{}
	switch {
	case rt.Topic != nil && hasID:
		return topicView{}, kerr.InvalidRequest.Code, "give a topic name or a topic id, not both"
	case rt.Topic != nil:
		if err := validateTopicName(*rt.Topic); err != nil {
			return topicView{}, kerr.InvalidTopicException.Code, err.Error()
		}
		t, ok := topics.topic(*rt.Topic)
		if !ok {
			return topicView{}, kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %q does not exist", *rt.Topic)
		}
		return t, 0, ""
	case hasID:
		t, ok := topics.topicByID(rt.TopicID)
		if !ok {
			return topicView{}, kerr.UnknownTopicID.Code, "no topic has this id"
		}
		return t, 0, ""
	}
	return topicView{}, kerr.InvalidRequest.Code, "neither a topic name nor a topic id given"
}
