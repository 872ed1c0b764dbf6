package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/metadata"
)

// handleElectLeaders runs an administrator's leader election (v0-2):
// PREFERRED (0) moves leadership to each partition's first replica when it
// is serving and in the ISR; UNCLEAN (1) elects any live replica for a
// partition without a leader. The decision is the controller's
// (controller.ElectPreferred/ElectUnclean); the broker writes it with a
// compare-and-swap on the partition state, as the controller would, so a
// concurrent change is never overwritten. Per partition:
// ELECTION_NOT_NEEDED (always for a diskless partition, which has no
// elected leader), PREFERRED_LEADER_NOT_AVAILABLE,
// ELIGIBLE_LEADERS_NOT_AVAILABLE or UNKNOWN_TOPIC_OR_PARTITION. Null topics
// mean every partition, and then only the partitions that needed an
// election are listed, as Kafka does. Alter on the Cluster is needed
// (CLUSTER_AUTHORIZATION_FAILED).
func (b *Broker) handleElectLeaders(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	allowed := b.authz.allowedCluster(rc, auth.OpAlter)
	if !allowed && req.Version >= 1 {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	}
	if req.ElectionType != 0 && req.ElectionType != 1 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	all := req.Topics == nil
	topics := req.Topics
	if all {
		for _, t := range b.parts.allTopics() {
			rt := kmsg.NewElectLeadersRequestTopic()
			rt.Topic = t.topic.Name
			for p := range t.topic.Replicas {
				rt.Partitions = append(rt.Partitions, int32(p))
			}
			topics = append(topics, rt)
		}
	}
	for _, rt := range topics {
		st := kmsg.NewElectLeadersResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			code, msg := kerr.ClusterAuthorizationFailed.Code, "not authorized to elect leaders"
			if allowed {
				code, msg = b.electLeader(ctx, rt.Topic, p, req.ElectionType == 1)
			}
			if all && (code == kerr.ElectionNotNeeded.Code || !allowed) {
				continue
			}
			sp := kmsg.NewElectLeadersResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p, code
			if code != 0 {
				sp.ErrorMessage = kmsg.StringPtr(msg)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		if len(st.Partitions) > 0 || !all {
			resp.Topics = append(resp.Topics, st)
		}
	}
	return resp, nil
}

// maxElectAttempts bounds the compare-and-swap retries of one election
// against concurrent writers of the same partition state.
const maxElectAttempts = 5

// electLeader elects partition p of topic and writes the result.
func (b *Broker) electLeader(ctx context.Context, topic string, p int32, unclean bool) (int16, string) {
	t, ok := b.parts.topic(topic)
	if !ok || p < 0 || int(p) >= len(t.topic.Replicas) {
		return kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("%s-%d does not exist", topic, p)
	}
	if t.cfg.DisklessEnable {
		return kerr.ElectionNotNeeded.Code, disklessNoElectionMessage
	}
	elect := controller.ElectPreferred
	if unclean {
		elect = controller.ElectUnclean
	}
	for range maxElectAttempts {
		states, err := b.store.PartitionStates(ctx, t.topic.ID)
		if err != nil {
			return errorCode(err)
		}
		if int(p) >= len(states) {
			return kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("%s-%d does not exist", topic, p)
		}
		next, err := elect(states[p], b.liveBrks.all())
		if err != nil {
			return electionErrorCode(err)
		}
		_, err = b.store.CASPartitionState(ctx, t.topic.ID, p, next)
		if err == nil {
			b.log.Info("leader elected by request", "topic", topic, "partition", p, "leader", next.Leader,
				"leader_epoch", next.LeaderEpoch, "unclean", unclean)
			return 0, ""
		}
		if !errors.Is(err, metadata.ErrCASFailed) {
			return errorCode(err)
		}
	}
	return kerr.RequestTimedOut.Code, "the partition state kept changing; try again"
}

func electionErrorCode(err error) (int16, string) {
	switch {
	case errors.Is(err, controller.ErrElectionNotNeeded):
		return kerr.ElectionNotNeeded.Code, "the wanted leader leads already"
	case errors.Is(err, controller.ErrPreferredLeaderNotAvailable):
		return kerr.PreferredLeaderNotAvailable.Code, "the preferred replica is not serving or not in the ISR"
	case errors.Is(err, controller.ErrEligibleLeadersNotAvailable):
		return kerr.EligibleLeadersNotAvailable.Code, "no live replica may lead"
	}
	return errorCode(err)
}
