package broker

// STUB: replaced by the data-path files 00_produce.go, 01_fetch.go,
// 02_list_offsets.go, 21_delete_records.go, 23_offset_for_leader_epoch.go.
// The dispatch table (owned by the connection half) refers to these.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleProduce(ctx context.Context, rc *requestContext, req kmsg.Request) (kmsg.Response, error) {
	panic("unimplemented")
}
func (b *Broker) handleFetch(ctx context.Context, rc *requestContext, req kmsg.Request) (kmsg.Response, error) {
	panic("unimplemented")
}
func (b *Broker) handleListOffsets(ctx context.Context, rc *requestContext, req kmsg.Request) (kmsg.Response, error) {
	panic("unimplemented")
}
func (b *Broker) handleDeleteRecords(ctx context.Context, rc *requestContext, req kmsg.Request) (kmsg.Response, error) {
	panic("unimplemented")
}
func (b *Broker) handleOffsetForLeaderEpoch(ctx context.Context, rc *requestContext, req kmsg.Request) (kmsg.Response, error) {
	panic("unimplemented")
}

// Supported version ranges of the data-path APIs (the ApiVersions answer and
// the dispatcher use them).
var dataPathVersions = map[int16][2]int16{
	0:  {3, 11}, // Produce (v3+ carries RecordBatch v2 only)
	1:  {4, 16}, // Fetch
	2:  {1, 9},  // ListOffsets
	21: {0, 2},  // DeleteRecords
	23: {0, 4},  // OffsetForLeaderEpoch
}
