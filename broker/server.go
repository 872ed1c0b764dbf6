package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiEntry is one row of the dispatch table.
type apiEntry struct {
	minVersion, maxVersion int16
	handle                 handlerFunc
}

// apiTable maps an API key to its supported versions and handler.
type apiTable map[int16]apiEntry

// adminVersions are the versions of the connection/admin half's APIs: at
// most what kmsg knows, covering what franz-go and librdkafka 2.x send.
var adminVersions = map[int16][2]int16{
	3:  {0, 13}, // Metadata
	18: {0, 4},  // ApiVersions
	19: {0, 7},  // CreateTopics
	20: {0, 6},  // DeleteTopics
	22: {0, 5},  // InitProducerID (transactional ids: txn_wiring.go)
	32: {0, 4},  // DescribeConfigs
	33: {0, 2},  // AlterConfigs
	37: {0, 3},  // CreatePartitions
	44: {0, 1},  // IncrementalAlterConfigs
	60: {0, 1},  // DescribeCluster
}

// newAPITable binds the handlers of b (which may be nil in decode-only
// tests: method values on a nil pointer are never called there).
func newAPITable(b *Broker) apiTable {
	handlers := map[int16]handlerFunc{
		0: b.handleProduce, 1: b.handleFetch, 2: b.handleListOffsets,
		21: b.handleDeleteRecords, 23: b.handleOffsetForLeaderEpoch, 27: b.handleWriteTxnMarkers,
		3: b.handleMetadata, 18: b.handleApiVersions, 19: b.handleCreateTopics,
		20: b.handleDeleteTopics, 22: b.handleInitProducerID, 32: b.handleDescribeConfigs,
		33: b.handleAlterConfigs, 37: b.handleCreatePartitions,
		44: b.handleIncrementalAlterConfigs, 60: b.handleDescribeCluster,
		saslHandshakeKey: b.handleSASLUnreachable, saslAuthenticateKey: b.handleSASLUnreachable,
	}
	for key, h := range groupHandlers(b) {
		handlers[key] = h
	}
	for key, h := range txnHandlers(b) {
		handlers[key] = h
	}
	for key, h := range authzHandlers(b) {
		handlers[key] = h
	}
	for key, h := range quotaHandlers(b) {
		handlers[key] = h
	}
	b.wrapQuotaHandlers(handlers) // client quotas (quotas.go)
	t := apiTable{}
	for _, versions := range []map[int16][2]int16{dataPathVersions, adminVersions, groupVersions, txnVersions, saslVersions, authzVersions, quotaVersions} {
		for key, v := range versions {
			h, ok := handlers[key]
			if !ok {
				panic(fmt.Sprintf("broker: api key %d has versions but no handler", key))
			}
			t[key] = apiEntry{minVersion: v[0], maxVersion: clampToKmsg(key, v[1]), handle: h}
		}
	}
	return t
}

// clampToKmsg never advertises a version kmsg cannot decode.
func clampToKmsg(key, maxVersion int16) int16 {
	if req := kmsg.RequestForKey(key); req != nil && req.MaxVersion() < maxVersion {
		return req.MaxVersion()
	}
	return maxVersion
}

// decodedRequest is a request ready for its handler. req is nil for an
// ApiVersions request at a version this broker does not speak: it gets the
// v0 fallback answer.
type decodedRequest struct {
	hdr   requestHeader
	req   kmsg.Request
	entry apiEntry
}

// decode parses header and body of one frame. Errors close the connection.
func (t apiTable) decode(frame []byte) (decodedRequest, error) {
	if len(frame) < minRequestHeaderBytes {
		return decodedRequest{}, ErrFrameTooSmall
	}
	prefix := parseHeaderPrefix(frame)
	entry, ok := t[prefix.apiKey]
	if !ok {
		return decodedRequest{hdr: prefix}, fmt.Errorf("%w: %d", ErrUnsupportedAPI, prefix.apiKey)
	}
	if prefix.version < entry.minVersion || prefix.version > entry.maxVersion {
		if prefix.apiKey == apiVersionsKey {
			return decodedRequest{hdr: prefix}, nil
		}
		return decodedRequest{hdr: prefix}, fmt.Errorf("%w: key %d version %d", ErrUnsupportedVersion, prefix.apiKey, prefix.version)
	}
	req := kmsg.RequestForKey(prefix.apiKey)
	req.SetVersion(prefix.version)
	hdr, body, err := parseRequestHeader(frame, req.IsFlexible())
	if err != nil {
		return decodedRequest{hdr: prefix}, err
	}
	if err := req.ReadFrom(body); err != nil {
		return decodedRequest{hdr: hdr}, fmt.Errorf("%w: key %d version %d: %v", ErrMalformedBody, hdr.apiKey, hdr.version, err)
	}
	return decodedRequest{hdr: hdr, req: req, entry: entry}, nil
}

// apiKeys lists the supported keys in key order (the ApiVersions answer).
func (t apiTable) apiKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(t))
	for key, e := range t {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = key, e.minVersion, e.maxVersion
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ApiKey < keys[j].ApiKey })
	return keys
}

// acceptLoop accepts connections of one listener until it closes.
func (b *Broker) acceptLoop(l *listener) {
	defer b.loops.Done()
	var backoff time.Duration
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary failures (EMFILE...): back off instead of spinning.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			b.log.Warn("accept failed", "listener", l.cfg.Name, "err", err, "backoff", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		b.startConn(nc, l.cfg)
	}
}

// startConn registers and serves a connection, unless shutdown has begun
// or the connection limits are reached (it is closed at once then).
func (b *Broker) startConn(nc net.Conn, l ListenerConfig) {
	host := remoteHost(nc)
	b.conns.mu.Lock()
	defer b.conns.mu.Unlock()
	if b.conns.closing {
		_ = nc.Close()
		return
	}
	if !b.admitLocked(host, l.Name) {
		b.log.Debug("connection refused by the connection limits", "remote", nc.RemoteAddr().String(), "listener", l.Name)
		_ = nc.Close()
		return
	}
	c := newConn(b, nc, l, b.handlerCtx)
	b.conns.set[c] = struct{}{}
	b.conns.wg.Add(1)
	go func() {
		defer b.conns.wg.Done()
		c.serve()
		b.conns.mu.Lock()
		delete(b.conns.set, c)
		b.releaseLocked(host)
		b.conns.mu.Unlock()
	}()
}

// drainConns stops reading on every connection and waits for the requests
// in flight to be answered, until ctx ends; then it closes what is left.
func (b *Broker) drainConns(ctx context.Context) error {
	b.conns.mu.Lock()
	b.conns.closing = true
	for c := range b.conns.set {
		c.stopReading()
	}
	b.conns.mu.Unlock()
	done := make(chan struct{})
	go func() {
		b.conns.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	b.handlerCancel()
	b.conns.mu.Lock()
	for c := range b.conns.set {
		c.close()
	}
	b.conns.mu.Unlock()
	<-done
	return ctx.Err()
}
