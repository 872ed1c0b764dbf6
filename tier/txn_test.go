package tier

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/strata-log/strata/hotlog"
)

// TestAbortedTxnsSectionChecked: the section holds the aborts whose marker
// lies in the object; anything else is rejected at encode (and decode,
// which encode runs), and the cold reader's index returns them.
func TestAbortedTxnsSectionChecked(t *testing.T) {
	seg := makeSegment(t, 3, 1000, 100, 300)
	end := seg.batches[len(seg.batches)-1].last
	good := []hotlog.AbortedTxn{{ProducerID: 1, FirstOffset: 900, LastOffset: 1001, LastStableOffset: 950},
		{ProducerID: 2, FirstOffset: 1003, LastOffset: end, LastStableOffset: end + 1}}
	meta := testMeta()
	meta.AbortedTxns = good
	store, key, obj := putObject(t, seg, meta)
	cold, err := NewColdReader(store, ColdConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer cold.Close()
	x, err := cold.Index(context.Background(), ColdObject{Key: key, Size: obj.Size()})
	if err != nil || !slices.Equal(x.Aborted, good) {
		t.Fatalf("index aborted %+v, %v", x, err)
	}
	for name, bad := range map[string][]hotlog.AbortedTxn{
		"marker before the object": {{ProducerID: 1, FirstOffset: 900, LastOffset: 999, LastStableOffset: 950}},
		"marker after the object":  {{ProducerID: 1, FirstOffset: 1000, LastOffset: end + 1, LastStableOffset: end + 2}},
		"not increasing":           {good[1], good[0]},
		"lso past the marker":      {{ProducerID: 1, FirstOffset: 1000, LastOffset: 1001, LastStableOffset: 1003}},
	} {
		m := testMeta()
		m.AbortedTxns = bad
		if _, err := EncodeSegmentObject(bytes.NewReader(seg.log), int64(len(seg.log)), m); !errors.Is(err, ErrInvalidSegment) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
