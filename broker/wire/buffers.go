package wire

import "github.com/strata-log/strata/bufpool"

// A response frame's buffer comes from bufpool (see its package doc for
// why large buffers are reused) and has one owner at a time: the handler
// that encodes it, then its Slot, until Responses has written it and put
// it back.

// GetFrameBuffer returns an empty buffer for a frame of about hint bytes
// (ResponseSizeHint).
func GetFrameBuffer(hint int) []byte { return bufpool.Get(hint) }

// PutFrameBuffer returns a written frame's buffer; nothing may read it after.
func PutFrameBuffer(b []byte) { bufpool.Put(b) }
