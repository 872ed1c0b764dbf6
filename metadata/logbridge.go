package metadata

import (
	"context"
	"log/slog"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapToSlog returns a zap logger that forwards entries at or above min to
// logger. etcd's server and client log through zap; Strata logs through
// slog, and keeps etcd quiet (errors only) because etcd's info logs are
// noise to a Kafka operator.
func zapToSlog(logger *slog.Logger, min zapcore.Level, closing *atomic.Bool) *zap.Logger {
	return zap.New(&slogCore{logger: logger, min: min, closing: closing})
}

// slogCore is a zapcore.Core writing to slog. Immutable: With returns a copy.
type slogCore struct {
	logger *slog.Logger
	min    zapcore.Level
	fields []zapcore.Field
	// closing, once set, demotes everything to debug: while the server
	// stops, etcd reports each closed listener as an error.
	closing *atomic.Bool
}

var _ zapcore.Core = (*slogCore)(nil)

func (c *slogCore) Enabled(level zapcore.Level) bool { return level >= c.min }

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	clone := *c
	clone.fields = append(append([]zapcore.Field(nil), c.fields...), fields...)
	return &clone
}

func (c *slogCore) Check(entry zapcore.Entry, checked *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(entry.Level) {
		return checked.AddCore(entry, c)
	}
	return checked
}

func (c *slogCore) Write(entry zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	attrs := make([]slog.Attr, 0, len(enc.Fields)+1)
	attrs = append(attrs, slog.String("component", "etcd"))
	for k, v := range enc.Fields {
		attrs = append(attrs, slog.Any(k, v))
	}
	level := slogLevel(entry.Level)
	if c.closing != nil && c.closing.Load() {
		level = slog.LevelDebug
	}
	c.logger.LogAttrs(context.Background(), level, entry.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }

func slogLevel(level zapcore.Level) slog.Level {
	switch {
	case level >= zapcore.ErrorLevel:
		return slog.LevelError
	case level >= zapcore.WarnLevel:
		return slog.LevelWarn
	case level >= zapcore.InfoLevel:
		return slog.LevelInfo
	}
	return slog.LevelDebug
}
