package broker

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
)

// TestConsumerGroupRegexFilteredByDescribe: a member subscribing by regular
// expression is subscribed only to the matching topics its principal may
// Describe, as Kafka 4 resolves regexes; a super user's member of the same
// group gets every match.
func TestConsumerGroupRegexFilteredByDescribe(t *testing.T) {
	tb := authzBroker(t)
	createTopicAs(t, tb, "rx-visible")
	createTopicAs(t, tb, "rx-hidden")
	allowTopic(t, tb, "User:alice", "rx-visible", auth.OpDescribe, auth.OpRead)
	groupACL := auth.ACL{ResourceType: auth.ResourceGroup, ResourceName: "rx848", PatternType: auth.PatternLiteral,
		Principal: "User:alice", Host: "*", Operation: auth.OpRead, Permission: auth.PermissionAllow}
	if err := tb.store.CreateACLs(testCtx(t), []auth.ACL{groupACL}); err != nil {
		t.Fatal(err)
	}
	waitACLs(t, tb.b, func(have []auth.ACL) bool { return slices.Contains(have, groupACL) })

	join := func(principal, member string) *kmsg.ConsumerGroupHeartbeatResponse {
		regex := "rx-.*"
		var resp *kmsg.ConsumerGroupHeartbeatResponse
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = "rx848", member, 0, 5000
			r.SubscribedTopicRegex, r.Topics = &regex, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			resp = as(t, tb.b, principal, r).(*kmsg.ConsumerGroupHeartbeatResponse)
			retry := resp.ErrorCode == kerr.NotCoordinator.Code || resp.ErrorCode == kerr.CoordinatorLoadInProgress.Code ||
				resp.ErrorCode == kerr.CoordinatorNotAvailable.Code
			if !retry || time.Now().After(deadline) {
				break
			}
			fc := kmsg.NewPtrFindCoordinatorRequest() // creates __consumer_offsets
			fc.CoordinatorKey, fc.CoordinatorKeys = "rx848", []string{"rx848"}
			as(t, tb.b, testSuperUser, fc)
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("%s joins: %v", principal, kerr.ErrorForCode(resp.ErrorCode))
		}
		return resp
	}
	join("User:alice", "alice-member")
	join(testSuperUser, "admin-member")

	d := kmsg.NewPtrConsumerGroupDescribeRequest()
	d.Groups = []string{"rx848"}
	g := as(t, tb.b, testSuperUser, d).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
	if g.ErrorCode != 0 {
		t.Fatalf("describe: %v", kerr.ErrorForCode(g.ErrorCode))
	}
	subs := map[string][]string{}
	for _, m := range g.Members {
		subs[m.MemberID] = m.SubscribedTopics
	}
	if got := subs["alice-member"]; !slices.Equal(got, []string{"rx-visible"}) {
		t.Fatalf("alice's regex resolved to %v, want only the topic she may describe", got)
	}
	if got := subs["admin-member"]; !slices.Equal(got, []string{"rx-hidden", "rx-visible"}) {
		t.Fatalf("the super user's regex resolved to %v, want both topics", got)
	}
}
