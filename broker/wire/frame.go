package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Sentinel errors of the request decode path. Any of them closes the
// connection.
var (
	ErrFrameTooLarge      = errors.New("wire: request frame larger than socket.request.max.bytes")
	ErrFrameTooSmall      = errors.New("wire: request frame smaller than a request header")
	ErrMalformedHeader    = errors.New("wire: malformed request header")
	ErrMalformedBody      = errors.New("wire: malformed request body")
	ErrUnsupportedAPI     = errors.New("wire: unsupported api key")
	ErrUnsupportedVersion = errors.New("wire: unsupported api version")
)

// MinRequestHeaderBytes is api key + version + correlation id + the client
// id length: no valid request frame is shorter.
const MinRequestHeaderBytes = 2 + 2 + 4 + 2

// APIVersionsKey is ApiVersions' key: the one API whose unsupported
// versions are answered, and whose response header is never flexible.
const APIVersionsKey = 18

// RequestHeader is the decoded Kafka request header (v1 or v2).
type RequestHeader struct {
	APIKey        int16
	Version       int16
	CorrelationID int32
	ClientID      string
}

// ReadFrame reads one size-prefixed frame. The size is checked against
// [MinRequestHeaderBytes, maxBytes] before the frame is allocated.
func ReadFrame(r io.Reader, maxBytes int32) ([]byte, error) {
	var sizeBuf [4]byte
	if _, err := io.ReadFull(r, sizeBuf[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	if size < MinRequestHeaderBytes {
		return nil, fmt.Errorf("%w: %d bytes", ErrFrameTooSmall, size)
	}
	if size > maxBytes {
		return nil, fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, size, maxBytes)
	}
	return readBody(r, make([]byte, size))
}

// readBody fills frame (a frame's bytes after its size) from r.
func readBody(r io.Reader, frame []byte) ([]byte, error) {
	if _, err := io.ReadFull(r, frame); err != nil {
		return nil, err
	}
	return frame, nil
}

// ParseHeaderPrefix reads the fixed part every header version shares.
// REQUIRES: len(frame) >= MinRequestHeaderBytes (ReadFrame guarantees it).
func ParseHeaderPrefix(frame []byte) RequestHeader {
	return RequestHeader{
		APIKey:        int16(binary.BigEndian.Uint16(frame[0:])),
		Version:       int16(binary.BigEndian.Uint16(frame[2:])),
		CorrelationID: int32(binary.BigEndian.Uint32(frame[4:])),
	}
}

// ParseRequestHeader decodes the whole header and returns it with the body
// that follows. flexible selects header v2 (tagged fields after the client
// id); the client id is a non-compact nullable string in both versions.
func ParseRequestHeader(frame []byte, flexible bool) (RequestHeader, []byte, error) {
	if len(frame) < MinRequestHeaderBytes {
		return RequestHeader{}, nil, ErrFrameTooSmall
	}
	hdr := ParseHeaderPrefix(frame)
	rest := frame[8:]
	idLen := int16(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if idLen < -1 {
		return hdr, nil, fmt.Errorf("%w: client id length %d", ErrMalformedHeader, idLen)
	}
	if idLen > 0 {
		if int(idLen) > len(rest) {
			return hdr, nil, fmt.Errorf("%w: client id length %d past end", ErrMalformedHeader, idLen)
		}
		hdr.ClientID = string(rest[:idLen])
		rest = rest[idLen:]
	}
	if !flexible {
		return hdr, rest, nil
	}
	rest, err := skipTaggedFields(rest)
	if err != nil {
		return hdr, nil, err
	}
	return hdr, rest, nil
}

// skipTaggedFields skips a tagged-field section: a uvarint count, then per
// field a uvarint tag, a uvarint size and size bytes. Each size is checked
// against what remains, so nothing is allocated.
func skipTaggedFields(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, fmt.Errorf("%w: tagged field count", ErrMalformedHeader)
	}
	b = b[n:]
	if count > uint64(len(b)) { // every field takes at least 2 bytes
		return nil, fmt.Errorf("%w: %d tagged fields in %d bytes", ErrMalformedHeader, count, len(b))
	}
	for i := uint64(0); i < count; i++ {
		if _, n = binary.Uvarint(b); n <= 0 {
			return nil, fmt.Errorf("%w: tag", ErrMalformedHeader)
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, fmt.Errorf("%w: tagged field size", ErrMalformedHeader)
		}
		b = b[n+int(size):]
	}
	return b, nil
}

// AppendResponseFrame appends a whole response frame: size, correlation id,
// the tagged-field byte of a flexible response header (never for
// ApiVersions), and the body encoded by kmsg at resp's version.
func AppendResponseFrame(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if resp.IsFlexible() && resp.Key() != APIVersionsKey {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// ResponseSizeHint estimates a response's encoded frame size so that the
// frame buffer is allocated once. Fetch responses carry megabytes of record
// batches, and growing the buffer by appending doubles the copies and the
// garbage (it was 41% of broker CPU during a cold catch-up). Other
// responses are small; the hint only needs to be an upper bound for fetches.
func ResponseSizeHint(resp kmsg.Response) int {
	fetch, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return 512
	}
	n := 1024
	for i := range fetch.Topics {
		topic := &fetch.Topics[i]
		n += 64 + len(topic.Topic)
		for j := range topic.Partitions {
			part := &topic.Partitions[j]
			n += 128 + len(part.RecordBatches) + 24*len(part.AbortedTransactions)
		}
	}
	return n
}

// VersionsFunc reports the served version range of an API key; ok is false
// for a key that is not served.
type VersionsFunc func(key int16) (minVersion, maxVersion int16, ok bool)

// DecodeRequest parses the header and body of one request frame. An
// unknown key, an unsupported version, a malformed header or body is an
// error (the connection closes); the header returned with it is what could
// be read. ApiVersions at an unsupported version is no error: req is nil,
// and the caller answers with its v0 fallback.
func DecodeRequest(frame []byte, versions VersionsFunc) (hdr RequestHeader, req kmsg.Request, err error) {
	if len(frame) < MinRequestHeaderBytes {
		return RequestHeader{}, nil, ErrFrameTooSmall
	}
	prefix := ParseHeaderPrefix(frame)
	minVersion, maxVersion, ok := versions(prefix.APIKey)
	if !ok {
		return prefix, nil, fmt.Errorf("%w: %d", ErrUnsupportedAPI, prefix.APIKey)
	}
	if prefix.Version < minVersion || prefix.Version > maxVersion {
		if prefix.APIKey == APIVersionsKey {
			return prefix, nil, nil
		}
		return prefix, nil, fmt.Errorf("%w: key %d version %d", ErrUnsupportedVersion, prefix.APIKey, prefix.Version)
	}
	req = kmsg.RequestForKey(prefix.APIKey)
	req.SetVersion(prefix.Version)
	hdr, body, err := ParseRequestHeader(frame, req.IsFlexible())
	if err != nil {
		return prefix, nil, err
	}
	if err := req.ReadFrom(body); err != nil {
		return hdr, nil, fmt.Errorf("%w: key %d version %d: %v", ErrMalformedBody, hdr.APIKey, hdr.Version, err)
	}
	return hdr, req, nil
}
