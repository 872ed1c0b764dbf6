package tier

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/recordbatch"
)

// encodeTestSnapshot hand-encodes a hotlog producer snapshot (hotlog/doc.go,
// "Producer-state snapshots") as of offset with one producer (id 42,
// epoch 3) whose one remembered batch is [offset-2, offset-1], seq 0..1.
func encodeTestSnapshot(offset int64) []byte {
	be := binary.BigEndian
	b := make([]byte, 18)
	be.PutUint16(b, 1)
	be.PutUint64(b[6:], uint64(offset))
	be.PutUint32(b[14:], 1)
	b = be.AppendUint64(b, 42)
	b = be.AppendUint16(b, 3)
	b = be.AppendUint32(b, 0xffffffff) // no coordinator epoch
	b = be.AppendUint64(b, ^uint64(0)) // no open transaction
	b = be.AppendUint64(b, 1_700_000_000_000)
	b = append(b, 1)
	b = be.AppendUint32(b, 0)
	b = be.AppendUint32(b, 1)
	b = be.AppendUint64(b, uint64(offset-2))
	b = be.AppendUint64(b, uint64(offset-1))
	b = be.AppendUint64(b, 1_700_000_000_000)
	be.PutUint32(b[2:], recordbatch.Checksum(b[6:]))
	return b
}

// segEnd is one past the last offset of seg.
func segEnd(seg *testSegment) int64 { return seg.batches[len(seg.batches)-1].last + 1 }

func TestProducerSnapshotSectionRoundTrip(t *testing.T) {
	seg := makeSegment(t, 31, 4000, 20, 200)
	meta := testMeta()
	meta.ProducerSnapshot = encodeTestSnapshot(segEnd(seg))
	if _, err := hotlog.CheckProducerSnapshot(meta.ProducerSnapshot); err != nil {
		t.Fatalf("test snapshot does not decode: %v", err)
	}
	store, key, obj := putObject(t, seg, meta)
	r, err := OpenObject(context.Background(), store, key, obj.Size())
	if err != nil {
		t.Fatal(err)
	}
	at, ok := r.Index.ProducerSnapshotOffset()
	if !ok || at != segEnd(seg) || !bytes.Equal(r.Index.ProducerSnapshot, meta.ProducerSnapshot) {
		t.Fatalf("snapshot (%d, %v) %x, want at %d %x", at, ok, r.Index.ProducerSnapshot, segEnd(seg), meta.ProducerSnapshot)
	}
	ref := r.Index.Footer.Sections[SectionProducerSnapshot]
	if ref.Length != int64(len(meta.ProducerSnapshot)) {
		t.Fatalf("section %+v for %d bytes", ref, len(meta.ProducerSnapshot))
	}

	meta.ProducerSnapshot = nil
	_, _, plain := putObject(t, seg, meta)
	if _, ok := plain.Index.ProducerSnapshotOffset(); ok {
		t.Fatal("an object without a snapshot reports one")
	}
}

func TestProducerSnapshotSectionRejected(t *testing.T) {
	seg := makeSegment(t, 32, 100, 8, 50)
	end := segEnd(seg)
	good := encodeTestSnapshot(end)
	flipped := bytes.Clone(good)
	flipped[20] ^= 1 // the snapshot's own CRC catches it
	cases := map[string][]byte{
		"opaque bytes":    []byte("producer-state"),
		"wrong offset":    encodeTestSnapshot(end + 1),
		"earlier offset":  encodeTestSnapshot(end - 1),
		"flipped byte":    flipped,
		"trailing bytes":  append(bytes.Clone(good), 0),
		"truncated entry": good[:len(good)-1],
	}
	for name, snap := range cases {
		meta := testMeta()
		meta.ProducerSnapshot = snap
		_, err := EncodeSegmentObject(bytes.NewReader(seg.log), int64(len(seg.log)), meta)
		if !errors.Is(err, ErrInvalidSegment) {
			t.Errorf("%s: encode gave %v, want ErrInvalidSegment", name, err)
		}
		if _, err := decodeWithSnapshot(encodeTestObject(t, seg), snap); !errors.Is(err, ErrCorruptObject) {
			t.Errorf("%s: decode gave %v, want ErrCorruptObject", name, err)
		}
	}
}

func encodeTestObject(t testing.TB, seg *testSegment) *EncodedObject {
	t.Helper()
	obj, err := EncodeSegmentObject(bytes.NewReader(seg.log), int64(len(seg.log)), testMeta())
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// decodeWithSnapshot builds the tail of obj with snap spliced into the
// producer-snapshot section (valid section CRC), bypassing the encoder's
// check, and decodes it as a reader would. obj is not modified.
func decodeWithSnapshot(obj *EncodedObject, snap []byte) (*ObjectIndex, error) {
	x := *obj.Index
	f := *x.Footer
	x.Footer, x.ProducerSnapshot = &f, snap
	return decodeTail(encodeTail(&x))
}

// FuzzProducerSnapshotSection fuzzes the producer-snapshot section of an
// otherwise valid object: decoding must never panic, and whatever it
// accepts is a hotlog snapshot as of the object's end.
func FuzzProducerSnapshotSection(f *testing.F) {
	seg := makeSegment(f, 33, 700, 6, 40)
	end := segEnd(seg)
	obj := encodeTestObject(f, seg)
	f.Add(encodeTestSnapshot(end))
	f.Add(encodeTestSnapshot(end + 1))
	f.Add([]byte{0, 1, 0, 0, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, snap []byte) {
		x, err := decodeWithSnapshot(obj, snap)
		if err != nil {
			if !errors.Is(err, ErrCorruptObject) {
				t.Fatalf("error %v does not wrap ErrCorruptObject", err)
			}
			return
		}
		if len(snap) == 0 {
			return
		}
		at, err := hotlog.CheckProducerSnapshot(x.ProducerSnapshot)
		if err != nil || at != end || !bytes.Equal(x.ProducerSnapshot, snap) {
			t.Fatalf("accepted snapshot at %d (%v), object ends at %d", at, err, end)
		}
	})
}
