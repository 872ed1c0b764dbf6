package broker

import (
	"testing"

	"github.com/strata-log/strata/metadata/metadatatest"
	"github.com/strata-log/strata/tier/objstore"
)

func TestColdDebug(t *testing.T) {
	mem := objstore.NewMemStore()
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), coldBrokerConfig(mem))
	produceColdHistory(t, tb.b)
	p, _ := tb.b.lookupPartition(coldTopic, 0)
	t.Logf("local %d start %d entries %d counters %+v cfg %+v", p.localLogStartOffset(), p.logStartOffset(), len(p.manifest.Segments(p.topicID, p.index)), tb.b.TierCounters(), p.config())
	objs, _ := mem.List(t.Context(), "")
	t.Logf("objects %d", len(objs))
}
