package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fatalFetchError returns an error that retrying cannot fix; kgo retries
// the others (leader moves, transient network errors) itself.
func fatalFetchError(fetches kgo.Fetches) error {
	var fatal error
	fetches.EachError(func(t string, p int32, err error) {
		if errors.Is(err, kgo.ErrClientClosed) || errors.Is(err, context.Canceled) {
			return
		}
		if fatal == nil {
			fatal = fmt.Errorf("topic %s partition %d: %w", t, p, err)
		}
	})
	return fatal
}

// topicCheckTimeout bounds the first exchange of produce and consume with
// the cluster: a command against no broker, or a topic that is not there,
// fails within it with a clear message instead of waiting forever.
const topicCheckTimeout = 10 * time.Second

// checkTopic asks the cluster for topic's metadata (asking it to create
// the topic when create is true; the broker decides, as with kcat) and
// fails when no broker answers within topicCheckTimeout or the topic does
// not exist. It returns the topic's partitions, sorted; none when the
// topic was just created and its leaders are still being elected.
func checkTopic(ctx context.Context, cl *kgo.Client, seeds []string, topic string, create bool) ([]int32, error) {
	ctx, cancel := context.WithTimeout(ctx, topicCheckTimeout)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics, req.AllowAutoTopicCreation = append(req.Topics, rt), create
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("no broker answered at %s within %v (is strata serve running there? see --brokers): %w",
				strings.Join(seeds, ","), topicCheckTimeout, err)
		}
		return nil, fmt.Errorf("no broker answered at %s (is strata serve running there? see --brokers): %w", strings.Join(seeds, ","), err)
	}
	if len(resp.Topics) != 1 {
		return nil, fmt.Errorf("metadata of %s: %d topics in the answer", topic, len(resp.Topics))
	}
	switch err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); {
	case err == nil, errors.Is(err, kerr.LeaderNotAvailable): // just created: its leader is being elected
		var partitions []int32
		for _, p := range resp.Topics[0].Partitions {
			partitions = append(partitions, p.Partition)
		}
		slices.Sort(partitions)
		return partitions, nil
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return nil, fmt.Errorf("topic %s does not exist (create it with strata topic create; this cluster does not create topics on use)", topic)
	default:
		return nil, fmt.Errorf("topic %s: %w", topic, err)
	}
}

// checkPartitions fails when a chosen partition is not one of the topic's
// (known: a topic whose leaders are being elected lists none yet).
func checkPartitions(topic string, chosen, partitions []int32) error {
	for _, p := range chosen {
		if len(partitions) > 0 && !slices.Contains(partitions, p) {
			return fmt.Errorf("topic %s has no partition %d (its partitions: %d to %d)", topic, p, partitions[0], partitions[len(partitions)-1])
		}
	}
	return nil
}
