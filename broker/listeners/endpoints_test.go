package listeners

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/metadata"
)

func TestRewriteEndpoints(t *testing.T) {
	brokers := []metadata.BrokerInfo{
		{NodeID: 1, Host: "c1", Port: 1, Endpoints: map[string]string{"CLIENT": "c1:1", "INTERNAL": "i1:11"}},
		{NodeID: 2, Host: "old2", Port: 2}, // registered before listener names
	}
	calls := 0
	source := func() []metadata.BrokerInfo { calls++; return brokers }

	dc := kmsg.NewPtrDescribeClusterResponse()
	for _, b := range brokers {
		br := kmsg.NewDescribeClusterResponseBroker()
		br.NodeID, br.Host, br.Port = b.NodeID, b.Host, b.Port
		dc.Brokers = append(dc.Brokers, br)
	}
	RewriteEndpoints(dc, "INTERNAL", source)
	if dc.Brokers[0].Host != "i1" || dc.Brokers[0].Port != 11 || dc.Brokers[1].Host != "old2" || dc.Brokers[1].Port != 2 {
		t.Fatalf("rewritten brokers %+v", dc.Brokers)
	}
	RewriteEndpoints(kmsg.NewPtrApiVersionsResponse(), "INTERNAL", source)
	if calls != 1 {
		t.Fatalf("brokers read %d times, want once (only for responses naming brokers)", calls)
	}

}
