package broker

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/wire"
)

// seedRequests are valid requests at the versions clients send, encoded by
// kmsg: the fuzz corpus starts from them.
func seedRequests() [][]byte {
	var reqs []kmsg.Request
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version, av.ClientSoftwareName, av.ClientSoftwareVersion = 3, "franz-go", "1.0"
	md := kmsg.NewPtrMetadataRequest()
	md.Version, md.AllowAutoTopicCreation = 12, true
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("orders")}}
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Version = 7
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "t", NumPartitions: 3, ReplicationFactor: 1,
		Configs: []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms", Value: kmsg.StringPtr("1000")}}}}
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Version = 4
	dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "t"}}
	pr := kmsg.NewPtrProduceRequest()
	pr.Version, pr.Acks = 9, -1
	pr.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: []byte{0, 1, 2}}}}}
	fe := kmsg.NewPtrFetchRequest()
	fe.Version = 12
	fe.Topics = []kmsg.FetchRequestTopic{{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, PartitionMaxBytes: 1 << 20}}}}
	ia := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ia.Version = 1
	ia.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "t",
		Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "cleanup.policy", Value: kmsg.StringPtr("compact")}}}}
	reqs = append(reqs, av, md, ct, dc, pr, fe, ia, kmsg.NewPtrDescribeClusterRequest(), kmsg.NewPtrInitProducerIDRequest())
	reqs = append(reqs, groupSeedRequests()...)
	reqs = append(reqs, securitySeedRequests()...)
	var out [][]byte
	for i, r := range reqs {
		out = append(out, kmsg.NewRequestFormatter(kmsg.FormatterClientID("seed")).AppendRequest(nil, r, int32(i)))
	}
	// An ApiVersions request at an unknown version.
	out = append(out, []byte{0, 0, 0, 12, 0, 18, 0, 42, 0, 0, 0, 1, 0xff, 0xff, 0, 0})
	return out
}

// FuzzRequestFrame feeds arbitrary bytes through framing, header and body
// decoding: nothing may panic, and no frame over the limit is allocated.
func FuzzRequestFrame(f *testing.F) {
	for _, s := range seedRequests() {
		f.Add(s)
	}
	tab := newAPITable(nil)
	const limit = 1 << 16
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for {
			frame, err := wire.ReadFrame(r, limit)
			if err != nil {
				return
			}
			if len(frame) > limit || len(frame) < wire.MinRequestHeaderBytes {
				t.Fatalf("frame of %d bytes passed the bounds", len(frame))
			}
			hdr, req, err := wire.DecodeRequest(frame, tab.versions)
			if err != nil {
				return
			}
			if req == nil && hdr.APIKey != wire.APIVersionsKey {
				t.Fatalf("nil request for key %d", hdr.APIKey)
			}
		}
	})
}

// TestWriteFuzzSeeds regenerates testdata/fuzz/FuzzRequestFrame when
// STRATA_WRITE_FUZZ_SEEDS=1.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("STRATA_WRITE_FUZZ_SEEDS") != "1" {
		t.Skip("set STRATA_WRITE_FUZZ_SEEDS=1 to regenerate the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzRequestFrame")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range seedRequests() {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// groupSeedRequests are the consumer-group requests franz-go sends.
func groupSeedRequests() []kmsg.Request {
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKeys = 4, []string{"g"}
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Version, jg.Group, jg.SessionTimeoutMillis, jg.ProtocolType = 9, "g", 45000, "consumer"
	jg.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "cooperative-sticky", Metadata: []byte{0, 3, 0, 0, 0, 1}}}
	sg := kmsg.NewPtrSyncGroupRequest()
	sg.Version, sg.Group, sg.MemberID = 5, "g", "m"
	sg.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: "m", MemberAssignment: []byte{0, 3}}}
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version, oc.Group, oc.Generation = 9, "g", -1
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 7}}}}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 8
	of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g"}}
	lg := kmsg.NewPtrLeaveGroupRequest()
	lg.Version, lg.Group = 5, "g"
	lg.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "m", InstanceID: kmsg.StringPtr("i")}}
	return []kmsg.Request{fc, jg, sg, oc, of, lg}
}
