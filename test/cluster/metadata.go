package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// PartitionMeta is one partition as one broker's Metadata answer shows it.
type PartitionMeta struct {
	From        int32 // broker that answered
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32 // sorted
	Offline     []int32 // sorted
	Err         error   // the partition's (or topic's) error code, if any
}

func (m PartitionMeta) String() string {
	s := fmt.Sprintf("leader %d epoch %d replicas %v isr %v offline %v (from broker %d)",
		m.Leader, m.LeaderEpoch, m.Replicas, m.ISR, m.Offline, m.From)
	if m.Err != nil {
		s += " err " + m.Err.Error()
	}
	return s
}

// metaClients caches one client per broker for metadata questions.
type metaClients struct {
	sync.Mutex
	byID map[int32]*kgo.Client
}

// metaClient returns the cached client of broker id.
func (c *Cluster) metaClient(id int32) (*kgo.Client, error) {
	c.meta.Lock()
	defer c.meta.Unlock()
	if cl := c.meta.byID[id]; cl != nil {
		return cl, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Broker(id).Addr), kgo.RequestTimeoutOverhead(metadataTimeout))
	if err != nil {
		return nil, err
	}
	if c.meta.byID == nil {
		c.meta.byID = map[int32]*kgo.Client{}
	}
	c.meta.byID[id] = cl
	return cl, nil
}

func (c *Cluster) closeMetaClients() {
	c.meta.Lock()
	defer c.meta.Unlock()
	for _, cl := range c.meta.byID {
		cl.Close()
	}
	c.meta.byID = nil
}

// Metadata asks broker id for topics' metadata (all topics when none).
func (c *Cluster) Metadata(ctx context.Context, id int32, topics ...string) (*kmsg.MetadataResponse, error) {
	cl, err := c.metaClient(id)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, metadataTimeout)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	if len(topics) > 0 {
		for _, topic := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
		}
	}
	resp, err := Direct(ctx, cl, req)
	if err != nil {
		return nil, fmt.Errorf("metadata from broker %d: %w", id, err)
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// PartitionFrom is broker id's view of one partition.
func (c *Cluster) PartitionFrom(id int32, topic string, partition int32) (PartitionMeta, error) {
	resp, err := c.Metadata(context.Background(), id, topic)
	if err != nil {
		return PartitionMeta{}, err
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return PartitionMeta{From: id, Leader: -1, Err: err}, nil
		}
		for _, p := range t.Partitions {
			if p.Partition == partition {
				return PartitionMeta{From: id, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
					Replicas: slices.Clone(p.Replicas), ISR: sorted(p.ISR), Offline: sorted(p.OfflineReplicas),
					Err: kerr.ErrorForCode(p.ErrorCode)}, nil
			}
		}
	}
	return PartitionMeta{}, fmt.Errorf("broker %d: no partition %s-%d in metadata", id, topic, partition)
}

// Partition is the view of the first up broker (running, not stopped, not
// cut) that answers; a cut broker's view may be stale, so it is not asked.
func (c *Cluster) Partition(topic string, partition int32) (PartitionMeta, error) {
	var errs []error
	for _, id := range c.Up() {
		m, err := c.PartitionFrom(id, topic, partition)
		if err == nil {
			return m, nil
		}
		errs = append(errs, err)
	}
	return PartitionMeta{Leader: -1}, fmt.Errorf("no up broker answered: %v", errs)
}

// Leader is the partition's leader (-1 if unknown or none).
func (c *Cluster) Leader(topic string, partition int32) int32 {
	m, err := c.Partition(topic, partition)
	if err != nil || m.Err != nil {
		return -1
	}
	return m.Leader
}

// ISR is the partition's in-sync replica set, sorted (nil if unknown).
func (c *Cluster) ISR(topic string, partition int32) []int32 {
	m, err := c.Partition(topic, partition)
	if err != nil {
		return nil
	}
	return m.ISR
}

func sorted(ids []int32) []int32 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}
