package bench

// rawConn is the raw Fetch client's connection to one broker (ReadRaw):
// Fetch requests encoded by kmsg (RequestFormatter), responses read into
// one buffer reused for every response. kgo (Broker.Request) allocates a
// fresh buffer per response, which the runtime zeroes and the kernel
// faults in: on tierbench's cold read that was about a third of the
// client's CPU, on the same two cores as the broker it measures. With the
// reused buffer the client does what tierbench's raw GET baseline does
// (read into buffers it keeps, check CRCs), so the two compare like for
// like, and `strata bench consume --client raw` measures the broker.
//
// Frames (Kafka protocol): request = int32 size, then the request header
// and body (AppendRequest); response = int32 size, int32 correlation id,
// for flexible versions (Fetch v12+) a tagged-field section (KIP-482),
// then the body (FetchResponse.ReadFrom).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxRawResponse bounds a response frame before its buffer is allocated
// (the request asks for at most rawMaxBytes, plus one oversized batch per
// partition at worst).
const maxRawResponse = 256 << 20

// firstFlexibleFetch is the first Fetch version with a flexible header.
const firstFlexibleFetch = 12

var errRawFrame = errors.New("bench: bad response frame")

// rawConn is owned by one goroutine.
type rawConn struct {
	conn    net.Conn
	format  *kmsg.RequestFormatter
	version int16 // Fetch version used
	corr    int32 // correlation id of the last request
	wbuf    []byte
	rbuf    []byte // the last response; its RecordBatches are views of it
}

// fetchVersion is the highest Fetch version both kmsg and the broker know.
func fetchVersion(ctx context.Context, cl *kgo.Client) (int16, error) {
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	fetch := kmsg.NewPtrFetchRequest()
	for _, k := range resp.ApiKeys {
		if k.ApiKey == fetch.Key() {
			return min(k.MaxVersion, fetch.MaxVersion()), nil
		}
	}
	return 0, errors.New("broker lists no Fetch version")
}

func dialRaw(ctx context.Context, addr, clientID string, version int16) (*rawConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &rawConn{conn: c, format: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)), version: version}, nil
}

func (c *rawConn) Close() error { return c.conn.Close() }

// fetch sends req and returns its response. The response's record batches
// are views of the connection's buffer: valid until the next fetch.
func (c *rawConn) fetch(ctx context.Context, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	// A canceled ctx unblocks the read or write in progress.
	stop := context.AfterFunc(ctx, func() { _ = c.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req.SetVersion(c.version)
	c.corr++
	c.wbuf = c.format.AppendRequest(c.wbuf[:0], req, c.corr)
	if _, err := c.conn.Write(c.wbuf); err != nil {
		return nil, ctxOr(ctx, err)
	}
	body, err := c.readFrame()
	if err != nil {
		return nil, ctxOr(ctx, err)
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != c.corr {
		return nil, fmt.Errorf("%w: correlation id %d, want %d", errRawFrame, corr, c.corr)
	}
	body = body[4:]
	if c.version >= firstFlexibleFetch {
		if body, err = skipTags(body); err != nil {
			return nil, err
		}
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(c.version)
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: %v", errRawFrame, err)
	}
	return resp, nil
}

// readFrame reads one size-prefixed frame into the reused buffer.
func (c *rawConn) readFrame() ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > maxRawResponse {
		return nil, fmt.Errorf("%w: size %d", errRawFrame, n)
	}
	if cap(c.rbuf) < int(n) {
		c.rbuf = make([]byte, n)
	}
	buf := c.rbuf[:n]
	if _, err := io.ReadFull(c.conn, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// skipTags skips a tagged-field section: a uvarint count, then per field a
// uvarint tag, a uvarint size and that many bytes.
func skipTags(b []byte) ([]byte, error) {
	count, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, fmt.Errorf("%w: tag count", errRawFrame)
	}
	b = b[k:]
	for range count {
		if _, k = binary.Uvarint(b); k <= 0 {
			return nil, fmt.Errorf("%w: tag", errRawFrame)
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, fmt.Errorf("%w: tag size", errRawFrame)
		}
		b = b[k+int(size):]
	}
	return b, nil
}

// ctxOr reports ctx's error when it ended (the deadline set on cancel
// made the I/O fail), else err.
func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
