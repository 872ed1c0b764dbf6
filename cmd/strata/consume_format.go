package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// How `strata consume` prints a record (--format):
//
//	value       the value and a newline (the default)
//	key:value   the key, a TAB, the value and a newline (as --print-key);
//	            a TAB because keys rarely hold one and `cut -f` splits on it
//	json        one JSON object per line (see jsonRecord)
//	otherwise   a kcat-style format string, printed as given (add \n
//	            yourself): %t topic, %p partition, %o offset, %k key,
//	            %s value, %T timestamp (ms since the epoch), %h headers
//	            (k=v,k=v), %K key length, %S value length (-1 when the key
//	            or value is null), %% a percent sign; escapes \n \t \r \\.

// recordFormatter writes one record in a chosen format.
type recordFormatter func(w io.Writer, r *kgo.Record) error

// formatHelp is the --format flag's help text.
const formatHelp = "record format: value, key:value (key TAB value), json (one object per line), " +
	"or a kcat-style string with %t %p %o %k %s %T %h %K %S %% and \\n \\t \\r \\\\ escapes"

// parseRecordFormat compiles a --format value.
func parseRecordFormat(format string) (recordFormatter, error) {
	switch format {
	case "value":
		format = `%s\n`
	case "key:value":
		format = `%k\t%s\n`
	case "json":
		return writeJSONRecord, nil
	}
	if !strings.ContainsAny(format, `%\`) {
		return nil, usageErrorf("--format %q: want value, key:value, json or a format string with %%-tokens such as '%%k %%s\\n'", format)
	}
	segments, err := parseFormatString(format)
	if err != nil {
		return nil, err
	}
	return func(w io.Writer, r *kgo.Record) error {
		var buf []byte
		for _, s := range segments {
			buf = s.appendTo(buf, r)
		}
		_, err := w.Write(buf)
		return err
	}, nil
}

// formatSegment is literal text (field == 0) or one %-field.
type formatSegment struct {
	literal string
	field   byte
}

func (s formatSegment) appendTo(buf []byte, r *kgo.Record) []byte {
	switch s.field {
	case 0:
		return append(buf, s.literal...)
	case 't':
		return append(buf, r.Topic...)
	case 'p':
		return strconv.AppendInt(buf, int64(r.Partition), 10)
	case 'o':
		return strconv.AppendInt(buf, r.Offset, 10)
	case 'k':
		return append(buf, r.Key...)
	case 's':
		return append(buf, r.Value...)
	case 'T':
		return strconv.AppendInt(buf, r.Timestamp.UnixMilli(), 10)
	case 'K':
		return strconv.AppendInt(buf, nullableLen(r.Key), 10)
	case 'S':
		return strconv.AppendInt(buf, nullableLen(r.Value), 10)
	case 'h':
		for i, h := range r.Headers {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(append(append(buf, h.Key...), '='), h.Value...)
		}
		return buf
	}
	panic("consume: unknown format field " + string(s.field)) // parseFormatString admits none
}

// nullableLen is kcat's length: -1 for a null key or value.
func nullableLen(b []byte) int64 {
	if b == nil {
		return -1
	}
	return int64(len(b))
}

// parseFormatString splits a kcat-style format into literal and field
// segments; an unknown %-token or escape is a usage error, so a typo
// does not print silently wrong output.
func parseFormatString(format string) ([]formatSegment, error) {
	var segments []formatSegment
	var literal strings.Builder
	flush := func() {
		if literal.Len() > 0 {
			segments = append(segments, formatSegment{literal: literal.String()})
			literal.Reset()
		}
	}
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' && c != '\\' {
			literal.WriteByte(c)
			continue
		}
		if i+1 == len(format) {
			return nil, usageErrorf("--format %q ends in a lone %q", format, c)
		}
		i++
		next := format[i]
		switch {
		case c == '%' && next == '%':
			literal.WriteByte('%')
		case c == '%' && strings.IndexByte("tpoksThKS", next) >= 0:
			flush()
			segments = append(segments, formatSegment{field: next})
		case c == '\\' && strings.IndexByte(`ntr\`, next) >= 0:
			literal.WriteByte(escapedByte(next))
		default:
			return nil, usageErrorf("--format %q: unknown %c%c (want %%t %%p %%o %%k %%s %%T %%h %%K %%S %%%% or \\n \\t \\r \\\\)", format, c, next)
		}
	}
	flush()
	return segments, nil
}

// escapedByte is the byte a backslash escape stands for.
func escapedByte(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 't':
		return '\t'
	case 'r':
		return '\r'
	}
	return c
}

// jsonRecord is one line of --format json. Keys and values are JSON
// strings when their bytes are valid UTF-8 and null when absent;
// otherwise the field is left out and key_base64 (value_base64) holds the
// bytes in standard, padded base64, so a reader never mistakes encoded
// bytes for text. Header values follow the same rule; header keys are
// always strings.
type jsonRecord struct {
	Topic       string          `json:"topic"`
	Partition   int32           `json:"partition"`
	Offset      int64           `json:"offset"`
	Timestamp   int64           `json:"timestamp"` // ms since the epoch
	Key         json.RawMessage `json:"key,omitempty"`
	KeyBase64   string          `json:"key_base64,omitempty"`
	Value       json.RawMessage `json:"value,omitempty"`
	ValueBase64 string          `json:"value_base64,omitempty"`
	Headers     []jsonHeader    `json:"headers"`
}

type jsonHeader struct {
	Key         string          `json:"key"`
	Value       json.RawMessage `json:"value,omitempty"`
	ValueBase64 string          `json:"value_base64,omitempty"`
}

func writeJSONRecord(w io.Writer, r *kgo.Record) error {
	out := jsonRecord{
		Topic:     r.Topic,
		Partition: r.Partition,
		Offset:    r.Offset,
		Timestamp: r.Timestamp.UnixMilli(),
		Headers:   make([]jsonHeader, 0, len(r.Headers)),
	}
	out.Key, out.KeyBase64 = textOrBase64(r.Key)
	out.Value, out.ValueBase64 = textOrBase64(r.Value)
	for _, h := range r.Headers {
		jh := jsonHeader{Key: h.Key}
		jh.Value, jh.ValueBase64 = textOrBase64(h.Value)
		out.Headers = append(out.Headers, jh)
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // values print as they are: <, > and & stay readable
	return enc.Encode(out)
}

// textOrBase64 encodes b as a JSON string (or null when nil) if it is valid
// UTF-8, else as base64 for the *_base64 field.
func textOrBase64(b []byte) (json.RawMessage, string) {
	switch {
	case b == nil:
		return json.RawMessage("null"), ""
	case utf8.Valid(b):
		var quoted bytes.Buffer
		enc := json.NewEncoder(&quoted)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(string(b)) // a string always encodes
		return bytes.TrimSuffix(quoted.Bytes(), []byte("\n")), ""
	}
	return nil, base64.StdEncoding.EncodeToString(b)
}
