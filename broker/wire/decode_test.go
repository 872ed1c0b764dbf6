package wire

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// metadataOnly serves Metadata v0-12 and ApiVersions v0-4.
func metadataOnly(key int16) (int16, int16, bool) {
	switch key {
	case 3:
		return 0, 12, true
	case APIVersionsKey:
		return 0, 4, true
	}
	return 0, 0, false
}

func encode(req kmsg.Request, version int16) []byte {
	req.SetVersion(version)
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("c")).AppendRequest(nil, req, 42)[4:]
}

func TestDecodeRequest(t *testing.T) {
	hdr, req, err := DecodeRequest(encode(kmsg.NewPtrMetadataRequest(), 12), metadataOnly)
	if err != nil || hdr != (RequestHeader{APIKey: 3, Version: 12, CorrelationID: 42, ClientID: "c"}) || req.GetVersion() != 12 {
		t.Fatalf("metadata v12: %+v %v %v", hdr, req, err)
	}
	// ApiVersions beyond the served range is answered, not an error.
	hdr, req, err = DecodeRequest(encode(kmsg.NewPtrApiVersionsRequest(), 4)[:MinRequestHeaderBytes], func(key int16) (int16, int16, bool) {
		return 0, 3, key == APIVersionsKey
	})
	if err != nil || req != nil || hdr.APIKey != APIVersionsKey || hdr.CorrelationID != 42 {
		t.Fatalf("ApiVersions fallback: %+v %v %v", hdr, req, err)
	}
	truncated := encode(kmsg.NewPtrMetadataRequest(), 12)
	for name, tc := range map[string]struct {
		frame []byte
		want  error
	}{
		"short":           {frame: []byte{0, 3, 0}, want: ErrFrameTooSmall},
		"unknown key":     {frame: encode(kmsg.NewPtrFetchRequest(), 4), want: ErrUnsupportedAPI},
		"version too new": {frame: encode(kmsg.NewPtrMetadataRequest(), 13), want: ErrUnsupportedVersion},
		"bad header":      {frame: []byte{0, 3, 0, 12, 0, 0, 0, 42, 0, 9, 'c'}, want: ErrMalformedHeader},
		"bad body":        {frame: append(truncated[:len(truncated)-2:len(truncated)-2], 0xff), want: ErrMalformedBody},
	} {
		if _, req, err := DecodeRequest(tc.frame, metadataOnly); !errors.Is(err, tc.want) || req != nil {
			t.Errorf("%s: req %v err %v, want %v", name, req, err, tc.want)
		}
	}
}
