package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The KIP-848 view of `strata group describe`. DescribeGroups (behind
// kadm.Lag) describes a consumer-protocol group only as far as the classic
// protocol can: state, assignor and current assignments. Its epochs and
// target assignments are only in ConsumerGroupDescribe (API key 69), which
// is sent raw to each group's coordinator. Classic groups answer it with
// GROUP_ID_NOT_FOUND and are printed as before.

// groupClientFlags registers the connection flags and returns a function opening a
// kgo client for raw requests with an admin client over it; close the kgo
// client when done.
func groupClientFlags(fs *flag.FlagSet, c *cli) func() (*kgo.Client, *kadm.Client, error) {
	client := clientFlags(fs, c)
	return func() (*kgo.Client, *kadm.Client, error) {
		cl, err := client()
		if err != nil {
			return nil, nil, err
		}
		return cl, kadm.NewClient(cl), nil
	}
}

// describeConsumerProtocol sends ConsumerGroupDescribe for names to their
// coordinators and returns the consumer-protocol groups among them by
// name; classic and unknown groups (GROUP_ID_NOT_FOUND) are left out.
func describeConsumerProtocol(ctx context.Context, cl *kgo.Client, names []string) (map[string]kmsg.ConsumerGroupDescribeResponseGroup, error) {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = names
	out := map[string]kmsg.ConsumerGroupDescribeResponseGroup{}
	for _, shard := range cl.RequestSharded(ctx, req) {
		if shard.Err != nil {
			return nil, fmt.Errorf("ConsumerGroupDescribe of %s: %w", strings.Join(shard.Req.(*kmsg.ConsumerGroupDescribeRequest).Groups, ","), shard.Err)
		}
		for _, g := range shard.Resp.(*kmsg.ConsumerGroupDescribeResponse).Groups {
			switch err := kerr.ErrorForCode(g.ErrorCode); {
			case errors.Is(err, kerr.GroupIDNotFound):
			case err != nil:
				return nil, fmt.Errorf("group %s: %w", g.Group, err)
			default:
				out[g.Group] = g
			}
		}
	}
	return out, nil
}

// topicNamer names topics by id; the names come from the describe
// response, and ids it leaves unnamed from one Metadata request.
type topicNamer struct {
	lookup func() (map[[16]byte]string, error) // all topics' names by id
	names  map[[16]byte]string                 // nil until lookup ran
}

// metadataTopicNames returns a topicNamer lookup listing every topic.
func metadataTopicNames(ctx context.Context, adm *kadm.Client) func() (map[[16]byte]string, error) {
	return func() (map[[16]byte]string, error) {
		topics, err := adm.ListTopicsWithInternal(ctx)
		if err != nil {
			return nil, fmt.Errorf("resolving topic ids: %w", err)
		}
		out := make(map[[16]byte]string, len(topics))
		for _, t := range topics {
			out[t.ID] = t.Topic
		}
		return out, nil
	}
}

// name is the topic's name: the one the response carries, else the one
// metadata has for its id, else the id itself (a deleted topic) as Kafka
// prints ids.
func (n *topicNamer) name(tp kmsg.AssignmentTopicPartition) (string, error) {
	if tp.Topic != "" {
		return tp.Topic, nil
	}
	if n.names == nil {
		names, err := n.lookup()
		if err != nil {
			return "", err
		}
		n.names = names
	}
	if name, ok := n.names[tp.TopicID]; ok {
		return name, nil
	}
	return "id:" + base64.RawURLEncoding.EncodeToString(tp.TopicID[:]), nil // Kafka's Uuid form
}

// formatAssignment prints an assignment as "topic:0,1,2 other:3", topics
// and partitions sorted; "-" when empty.
func formatAssignment(a kmsg.Assignment, n *topicNamer) (string, error) {
	var parts []string
	for _, tp := range a.TopicPartitions {
		name, err := n.name(tp)
		if err != nil {
			return "", err
		}
		ps := slices.Clone(tp.Partitions)
		slices.Sort(ps)
		nums := make([]string, len(ps))
		for i, p := range ps {
			nums[i] = fmt.Sprint(p)
		}
		parts = append(parts, name+":"+strings.Join(nums, ","))
	}
	if len(parts) == 0 {
		return "-", nil
	}
	slices.Sort(parts)
	return strings.Join(parts, " "), nil
}

// printConsumerProtocol prints a consumer-protocol group's epochs and
// assignor, and per member its identity, epoch, current and target
// assignment. Members are sorted by member id.
func printConsumerProtocol(w io.Writer, g kmsg.ConsumerGroupDescribeResponseGroup, n *topicNamer) error {
	fmt.Fprintf(w, "  consumer protocol: group epoch %d  assignment epoch %d  assignor %s\n",
		g.Epoch, g.AssignmentEpoch, g.AssignorName)
	members := slices.Clone(g.Members)
	slices.SortFunc(members, func(a, b kmsg.ConsumerGroupDescribeResponseGroupMember) int {
		return strings.Compare(a.MemberID, b.MemberID)
	})
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  MEMBER\tINSTANCE\tCLIENT-ID\tHOST\tEPOCH\tASSIGNED\tTARGET")
	for _, m := range members {
		assigned, err := formatAssignment(m.Assignment, n)
		if err != nil {
			return err
		}
		target, err := formatAssignment(m.TargetAssignment, n)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%s\t%s\n", m.MemberID, orDash(m.InstanceID), m.ClientID, m.ClientHost,
			m.MemberEpoch, assigned, target)
	}
	return tw.Flush()
}

func orDash(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}
