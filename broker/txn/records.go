package txn

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record is one record of __transaction_state (doc.go); Value nil is a
// tombstone.
type Record struct {
	ID         string
	Key, Value []byte
}

// encodeRecord encodes m (a tombstone when Dead).
func encodeRecord(m *Meta) Record {
	k := kmsg.NewTxnMetadataKey()
	k.Version, k.TransactionalID = 0, m.ID
	r := Record{ID: m.ID, Key: k.AppendTo(nil)}
	if m.State == StateDead {
		return r
	}
	v := kmsg.NewTxnMetadataValue()
	v.Version, v.ProducerID, v.ProducerEpoch, v.TimeoutMillis = 1, m.ProducerID, m.ProducerEpoch, m.TimeoutMs
	v.PreviousProducerID = m.LastProducerID
	v.State, v.LastUpdateTimestamp, v.StartTimestamp = m.State, m.LastUpdateMs, m.StartMs
	for _, tp := range m.Partitions {
		if n := len(v.Topics); n == 0 || v.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewTxnMetadataValueTopic()
			t.Topic = tp.Topic
			v.Topics = append(v.Topics, t)
		}
		last := &v.Topics[len(v.Topics)-1]
		last.Partitions = append(last.Partitions, tp.Partition)
	}
	r.Value = v.AppendTo(nil)
	return r
}

// DecodeRecord parses a key/value of __transaction_state. ok is false for
// key versions other than 0 (skipped). meta.State is Dead for a tombstone.
func DecodeRecord(key, value []byte) (meta Meta, ok bool, err error) {
	if len(key) < 2 {
		return meta, false, fmt.Errorf("%w: key of %d bytes", ErrCorruptRecord, len(key))
	}
	if binary.BigEndian.Uint16(key) != 0 {
		return meta, false, nil
	}
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(key); err != nil {
		return meta, false, fmt.Errorf("%w: key: %v", ErrCorruptRecord, err)
	}
	meta = Meta{ID: k.TransactionalID, State: StateDead, LastProducerID: -1, LastProducerEpoch: -1}
	if value == nil {
		return meta, true, nil
	}
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(value); err != nil {
		return meta, false, fmt.Errorf("%w: value: %v", ErrCorruptRecord, err)
	}
	if v.State < StateEmpty || v.State > StatePrepareEpochFence {
		return meta, false, fmt.Errorf("%w: state %d", ErrCorruptRecord, v.State)
	}
	meta.ProducerID, meta.ProducerEpoch, meta.TimeoutMs, meta.State = v.ProducerID, v.ProducerEpoch, v.TimeoutMillis, v.State
	meta.LastUpdateMs, meta.StartMs = v.LastUpdateTimestamp, v.StartTimestamp
	if v.Version >= 1 && v.PreviousProducerID >= 0 {
		meta.LastProducerID, meta.LastProducerEpoch = v.PreviousProducerID, lastEpoch(v.PreviousProducerID, v.ProducerID, v.ProducerEpoch)
	}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			meta.Partitions = append(meta.Partitions, TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	sortPartitions(meta.Partitions)
	return meta, true, nil
}

// ApplyRecord loads one durable record (a later record of an id replaces
// the earlier; a tombstone forgets it). Ids with a pending write of this
// coordinator are left alone.
func (m *Machine) ApplyRecord(meta Meta) {
	if t := m.txns[meta.ID]; t != nil && t.pending {
		return
	}
	if meta.State == StateDead {
		delete(m.txns, meta.ID)
		return
	}
	m.txns[meta.ID] = &txnState{Meta: meta}
}

// lastEpoch derives the epoch before the last bump, which the record does
// not hold: one less on the same producer id, else the exhausted epoch the
// id rotated from (bump).
func lastEpoch(lastID, id int64, epoch int16) int16 {
	if lastID == id {
		return epoch - 1
	}
	return maxEpoch - 1
}
