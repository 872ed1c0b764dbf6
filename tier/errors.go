package tier

import (
	"errors"

	"github.com/strata-log/strata/tier/objstore"
)

// Sentinel errors of the segment-object format and of OpenURL.
var (
	// ErrCorruptObject: an object's bytes fail a format check or a CRC. Such
	// an object is never served; the caller reports it and uses another copy
	// (the hot log, a replica) or fails the read.
	ErrCorruptObject = errors.New("tier: corrupt segment object")
	// ErrInvalidSegment: a hotlog segment cannot be encoded (bad batch,
	// decreasing offsets or epochs, too large).
	ErrInvalidSegment = errors.New("tier: invalid segment")
	// ErrOffsetNotInObject: the offset or timestamp asked for is not in the object.
	ErrOffsetNotInObject = errors.New("tier: offset not in segment object")
	// ErrBadURL: an --object-store URL that OpenURL cannot use.
	ErrBadURL = errors.New("tier: invalid object-store URL")
)

// ObjectStore is the object-store interface (see tier/objstore).
type ObjectStore = objstore.ObjectStore

// ObjectInfo describes one object (see tier/objstore).
type ObjectInfo = objstore.ObjectInfo
