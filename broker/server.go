package broker

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/wire"
)

// decodedRequest is a request ready for its handler. req is nil for an
// ApiVersions request at a version this broker does not speak: it gets the
// v0 fallback answer.
type decodedRequest struct {
	hdr   wire.RequestHeader
	req   kmsg.Request
	entry apiEntry
}

// decode parses header and body of one frame against the registry's
// versions. Errors close the connection.
func (t apiTable) decode(frame []byte) (decodedRequest, error) {
	hdr, req, err := wire.DecodeRequest(frame, t.versions)
	if err != nil || req == nil {
		return decodedRequest{hdr: hdr}, err
	}
	return decodedRequest{hdr: hdr, req: req, entry: t[hdr.APIKey]}, nil
}

// versions is the served version range of key; ok false for an unknown key.
func (t apiTable) versions(key int16) (minVersion, maxVersion int16, ok bool) {
	e, ok := t[key]
	return e.spec.minVersion, e.spec.maxVersion, ok
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
	if !b.admitConn(host, l.Name) {
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
		b.connLimits.Release(host)
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
