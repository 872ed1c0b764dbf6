package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/datadir"
)

// handleDescribeLogDirs describes this broker's one log directory (v0-4):
// the local partitions asked for (null: all) with the bytes of their local
// segments, offset lag 0 (there are no future replicas), and (v4) the file
// system's total and usable bytes. Kafka's response has no field for
// tiered bytes, so with tiering on a second directory named
// "tiered:bucket" lists, for the partitions this broker leads, the bytes of
// their objects in the bucket (total and usable bytes -1: a bucket has no
// capacity). Only the leader lists a partition there, so summing the
// directories of every broker counts each object once.
// Describe on the Cluster is needed: without it v3+ answers
// CLUSTER_AUTHORIZATION_FAILED, older versions an empty list, as Kafka.
func (b *Broker) handleDescribeLogDirs(_ context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !b.authz.allowedCluster(rc, auth.OpDescribe) {
		if req.Version >= 3 {
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		}
		return resp, nil
	}
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = b.cfg.DataDir
	dir.TotalBytes, dir.UsableBytes = -1, -1
	if total, usable, err := datadir.Usage(b.cfg.DataDir); err == nil {
		dir.TotalBytes, dir.UsableBytes = total, usable
	} else {
		dir.ErrorCode = kerr.KafkaStorageError.Code
	}
	wanted := wantedLogDirPartitions(req)
	fillLogDir(&dir, b.parts.localPartitions(), func(p *partition) bool {
		return wanted == nil || wanted[logDirKey{p.topic, p.index}]
	}, func(p *partition) int64 { return p.log.Size() })
	resp.Dirs = append(resp.Dirs, dir)
	if b.objects != nil {
		resp.Dirs = append(resp.Dirs, b.tieredLogDir(wanted))
	}
	return resp, nil
}

// tieredLogDirName names the pseudo directory of the bucket's bytes.
const tieredLogDirName = "tiered:bucket"

// tieredLogDir is the bucket's bytes of the partitions this broker leads.
func (b *Broker) tieredLogDir(wanted map[logDirKey]bool) kmsg.DescribeLogDirsResponseDir {
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir, dir.TotalBytes, dir.UsableBytes = tieredLogDirName, -1, -1
	fillLogDir(&dir, b.parts.localPartitions(), func(p *partition) bool {
		return (wanted == nil || wanted[logDirKey{p.topic, p.index}]) && p.isLeader()
	}, func(p *partition) int64 {
		var size int64
		for _, e := range p.manifest.Segments(p.topicID, p.index) {
			size += e.Size
		}
		return size
	})
	return dir
}

// fillLogDir lists in dir, grouped by topic, the partitions include
// accepts with their size.
func fillLogDir(dir *kmsg.DescribeLogDirsResponseDir, parts []*partition, include func(*partition) bool, size func(*partition) int64) {
	byTopic := map[string]int{}
	for _, p := range parts {
		if !include(p) {
			continue
		}
		i, ok := byTopic[p.topic]
		if !ok {
			i = len(dir.Topics)
			byTopic[p.topic] = i
			t := kmsg.NewDescribeLogDirsResponseDirTopic()
			t.Topic = p.topic
			dir.Topics = append(dir.Topics, t)
		}
		dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		dp.Partition, dp.Size = p.index, size(p)
		dir.Topics[i].Partitions = append(dir.Topics[i].Partitions, dp)
	}
}

type logDirKey struct {
	topic     string
	partition int32
}

// wantedLogDirPartitions is the set the request names; nil for all.
func wantedLogDirPartitions(req *kmsg.DescribeLogDirsRequest) map[logDirKey]bool {
	if req.Topics == nil {
		return nil
	}
	out := map[logDirKey]bool{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			out[logDirKey{t.Topic, p}] = true
		}
	}
	return out
}
