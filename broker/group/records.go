package group

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/recordbatch"
)

// ErrCorruptRecord is returned for a record of __consumer_offsets that does
// not decode.
var ErrCorruptRecord = errors.New("group: corrupt offsets record")

// RecordKind says what a record of __consumer_offsets is.
type RecordKind int8

const (
	KindOffset RecordKind = iota + 1
	KindGroup
)

// Record is one record for __consumer_offsets, encoded with Kafka's
// schemas (doc.go). Value nil is a tombstone.
type Record struct {
	Kind      RecordKind
	Group     string
	Topic     string // KindOffset
	Partition int32  // KindOffset
	Key       []byte
	Value     []byte
}

func offsetRecord(group string, tp TopicPartition, o *Offset) Record {
	k := kmsg.NewOffsetCommitKey()
	k.Version, k.Group, k.Topic, k.Partition = 1, group, tp.Topic, tp.Partition
	r := Record{Kind: KindOffset, Group: group, Topic: tp.Topic, Partition: tp.Partition, Key: k.AppendTo(nil)}
	if o != nil {
		v := kmsg.NewOffsetCommitValue()
		v.Version, v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp = 3, o.Offset, o.LeaderEpoch, o.Metadata, o.CommitTimestamp
		r.Value = v.AppendTo(nil)
	}
	return r
}

func groupRecord(g *groupState) Record {
	k := kmsg.NewGroupMetadataKey()
	k.Version, k.Group = 2, g.id
	r := Record{Kind: KindGroup, Group: g.id, Key: k.AppendTo(nil)}
	if g.state == StateDead {
		return r
	}
	v := kmsg.NewGroupMetadataValue()
	v.Version, v.ProtocolType, v.Generation, v.CurrentStateTimestamp = 3, g.protocolType, g.generation, g.stateSince
	if g.protocol != "" {
		v.Protocol = kmsg.StringPtr(g.protocol)
	}
	if g.leader != "" {
		v.Leader = kmsg.StringPtr(g.leader)
	}
	for _, id := range g.order {
		m := g.members[id]
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID, vm.ClientID, vm.ClientHost = m.id, m.clientID, m.clientHost
		if m.instanceID != "" {
			vm.InstanceID = kmsg.StringPtr(m.instanceID)
		}
		vm.RebalanceTimeoutMillis, vm.SessionTimeoutMillis = m.rebalanceTimeoutMs, m.sessionTimeoutMs
		vm.Subscription, vm.Assignment = m.metadataFor(g.protocol), m.assignment
		v.Members = append(v.Members, vm)
	}
	r.Value = v.AppendTo(nil)
	return r
}

// DecodeRecord parses a key/value pair of __consumer_offsets. ok is false
// for keys of other versions (skipped, as Kafka skips what it does not know).
func DecodeRecord(key, value []byte) (r Record, ok bool, err error) {
	if len(key) < 2 {
		return r, false, fmt.Errorf("%w: key of %d bytes", ErrCorruptRecord, len(key))
	}
	r.Key, r.Value = key, value
	switch binary.BigEndian.Uint16(key) {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			return r, false, fmt.Errorf("%w: offset key: %v", ErrCorruptRecord, err)
		}
		r.Kind, r.Group, r.Topic, r.Partition = KindOffset, k.Group, k.Topic, k.Partition
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return r, false, fmt.Errorf("%w: group key: %v", ErrCorruptRecord, err)
		}
		r.Kind, r.Group = KindGroup, k.Group
	default:
		return r, false, nil
	}
	return r, true, nil
}

func decodeOffsetValue(value []byte) (Offset, error) {
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(value); err != nil {
		return Offset{}, fmt.Errorf("%w: offset value: %v", ErrCorruptRecord, err)
	}
	epoch := v.LeaderEpoch
	if v.Version < 3 {
		epoch = -1
	}
	return Offset{Offset: v.Offset, LeaderEpoch: epoch, Metadata: v.Metadata, CommitTimestamp: v.CommitTimestamp}, nil
}

func decodeGroupValue(value []byte) (kmsg.GroupMetadataValue, error) {
	var v kmsg.GroupMetadataValue
	if err := v.ReadFrom(value); err != nil {
		return v, fmt.Errorf("%w: group value: %v", ErrCorruptRecord, err)
	}
	return v, nil
}

// EncodeBatch lays records out as one uncompressed RecordBatch v2 with
// base offset 0 (the log assigns offsets), timestamps now (ms).
func EncodeBatch(records []Record, now int64) []byte {
	return encodeBatch(records, now, recordbatch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
}

// EncodeTxnBatch is EncodeBatch as a transactional batch of the producer
// (TxnOffsetCommit), with its first sequence.
func EncodeTxnBatch(records []Record, now, producerID int64, epoch int16, sequence int32) []byte {
	return encodeBatch(records, now, recordbatch.Header{Attributes: recordbatch.AttrTransactional,
		ProducerID: producerID, ProducerEpoch: epoch, BaseSequence: sequence})
}

func encodeBatch(records []Record, now int64, h recordbatch.Header) []byte {
	var body []byte
	for i, r := range records {
		body = recordbatch.AppendRecord(body, kmsg.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value})
	}
	h.LastOffsetDelta, h.FirstTimestamp, h.MaxTimestamp = int32(len(records)-1), now, now
	return recordbatch.Encode(nil, h, int32(len(records)), body)
}

// DecodeBatches walks RecordBatches read from the log and calls fn for each
// record of a data batch with its offset. Compressed and control batches
// are skipped (coordinators write uncompressed). It returns the offset
// after the last whole batch (-1 if there was none).
func DecodeBatches(data []byte, fn func(offset int64, key, value []byte) error) (int64, error) {
	return walkBatches(data, func(offset, _ int64, key, value []byte) error { return fn(offset, key, value) }, nil)
}

// walkBatches is DecodeBatches telling fn the producer id of records of
// transactional batches (-1 otherwise) and calling marker for each
// transaction marker (control batch) when not nil. A trailing piece
// shorter than a batch's length prefix is ignored; the CRC is not checked
// (the log served the bytes).
func walkBatches(data []byte, fn func(offset, txnProducer int64, key, value []byte) error, marker func(producerID int64, commit bool)) (int64, error) {
	next := int64(-1)
	for len(data) >= recordbatch.LengthPrefix {
		h, err := recordbatch.ParseHeader(data)
		if err != nil {
			return next, fmt.Errorf("%w: batch: %v", ErrCorruptRecord, err)
		}
		section := data[recordbatch.HeaderSize:h.Size()]
		data = data[h.Size():]
		next = h.LastOffset() + 1
		switch {
		case h.Codec() != recordbatch.CodecNone:
			continue
		case h.Control():
			if marker != nil {
				markerOf(h, section, marker)
			}
			continue
		}
		txnProducer := int64(-1)
		if h.Transactional() {
			txnProducer = h.ProducerID
		}
		err = decodeRecords(h.BaseOffset, section, func(offset int64, key, value []byte) error {
			return fn(offset, txnProducer, key, value)
		})
		if err != nil {
			return next, err
		}
	}
	return next, nil
}

// markerOf reports a control batch's marker: its one record's key is a
// ControlRecordKey (type 0 abort, 1 commit). Other control records are
// ignored.
func markerOf(h recordbatch.Header, section []byte, marker func(producerID int64, commit bool)) {
	_ = decodeRecords(h.BaseOffset, section, func(_ int64, key, _ []byte) error {
		var k kmsg.ControlRecordKey
		if err := k.ReadFrom(key); err == nil && (k.Type == kmsg.ControlRecordKeyTypeAbort || k.Type == kmsg.ControlRecordKeyTypeCommit) {
			marker(h.ProducerID, k.Type == kmsg.ControlRecordKeyTypeCommit)
		}
		return nil
	})
}

// decodeRecords calls fn with each record of an uncompressed records
// section and its offset; a malformed record is ErrCorruptRecord.
func decodeRecords(base int64, section []byte, fn func(offset int64, key, value []byte) error) error {
	var fnErr error
	err := recordbatch.EachRecord(section, func(r *kmsg.Record) error {
		fnErr = fn(base+int64(r.OffsetDelta), r.Key, r.Value)
		return fnErr
	})
	if err != nil && err == fnErr {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCorruptRecord, err)
	}
	return nil
}
