package tier

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-log/strata/tier/file"
	"github.com/strata-log/strata/tier/objstore"
)

func TestSegmentKeyRoundTrip(t *testing.T) {
	parts := SegmentKeyParts{Cluster: "prod", Topic: "orders.v1", TopicID: testTopicID, Partition: 12,
		BaseOffset: 52340, Epoch: 7}
	key, err := SegmentKey(parts)
	if err != nil {
		t.Fatal(err)
	}
	wantPrefix := "prod/topics/orders.v1-" + testTopicID.String() + "/00012/00000000000000052340-7-"
	if !strings.HasPrefix(key, wantPrefix) || !strings.HasSuffix(key, ".seg") || objstore.ValidateKey(key) != nil {
		t.Fatalf("key %q, want prefix %q", key, wantPrefix)
	}
	if !strings.HasPrefix(key, PartitionPrefix("prod", "orders.v1", testTopicID, 12)) {
		t.Fatalf("key %q not under its partition prefix", key)
	}
	got, err := ParseSegmentKey(key)
	parts.UUID = got.UUID
	if err != nil || got != parts || !validUUID(got.UUID) {
		t.Fatalf("parsed %+v, %v; want %+v", got, err, parts)
	}
	other, _ := SegmentKey(SegmentKeyParts{Cluster: "prod", Topic: "orders.v1", TopicID: testTopicID, Partition: 12, BaseOffset: 52340, Epoch: 7})
	if other == key {
		t.Fatal("two uploads of one segment got the same key")
	}
	// Listing order is offset order.
	a, _ := SegmentKey(SegmentKeyParts{Cluster: "c", Topic: "t", TopicID: testTopicID, BaseOffset: 999, Epoch: 10})
	b, _ := SegmentKey(SegmentKeyParts{Cluster: "c", Topic: "t", TopicID: testTopicID, BaseOffset: 1000, Epoch: 1})
	if a >= b {
		t.Fatalf("%q sorts after %q", a, b)
	}
	if k := TopicConfigKey("c", "t", testTopicID); k != "c/topics/t-"+testTopicID.String()+"/topic.json" {
		t.Fatalf("topic config key %q", k)
	}
}

func TestParseSegmentKeyRejects(t *testing.T) {
	good, _ := SegmentKey(SegmentKeyParts{Cluster: "c", Topic: "t", TopicID: testTopicID, BaseOffset: 5, Epoch: 1})
	id := testTopicID.String()
	for _, key := range []string{
		"", "c/topics/t-" + id + "/topic.json",
		strings.Replace(good, "/topics/", "/topix/", 1),
		strings.Replace(good, ".seg", ".tmp", 1),
		strings.Replace(good, "/00000/", "/0000/", 1),
		strings.Replace(good, "-1-", "-x-", 1),
		strings.Replace(good, "00000000000000000005", "5", 1),
		good[:len(good)-10] + ".seg",
		"c/topics/bad$name-" + id + "/00000/00000000000000000005-1-" + NewUUID() + ".seg",
		"c/topics/t-short/00000/00000000000000000005-1-" + NewUUID() + ".seg",
	} {
		if _, err := ParseSegmentKey(key); !errors.Is(err, ErrCorruptObject) {
			t.Errorf("ParseSegmentKey(%q) = %v, want ErrCorruptObject", key, err)
		}
	}
}

func TestOpenURLFile(t *testing.T) {
	dir := t.TempDir()
	b, err := OpenURL(context.Background(), "file://"+filepath.Join(dir, "objects"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Backend.(*file.Store); !ok {
		t.Fatalf("backend %T, want *file.Store", b.Backend)
	}
	ctx := context.Background()
	if err := b.Put(ctx, "c/k", strings.NewReader("abc"), 3); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(ctx, "c/k"); err != nil {
		t.Fatal(err)
	}
	if got := b.Counts.Total(objstore.OpPut); got.Requests != 1 || got.Bytes != 3 {
		t.Fatalf("put counted as %+v", got)
	}
	t.Chdir(dir)
	rel, err := OpenURL(context.Background(), "file:objects", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rel.Stat(ctx, "c/k"); err != nil {
		t.Fatalf("relative file URL does not see the object: %v", err)
	}
}

func TestS3ConfigFromURL(t *testing.T) {
	u, _ := url.Parse("s3://bkt/some/prefix/?endpoint=http://127.0.0.1:9000&region=eu-west-1&sse=aws:kms&sse-kms-key-id=k1&part-size=8388608&concurrency=8&credentials-file=/etc/strata/aws&profile=tier")
	cfg, err := S3ConfigFromURL(u)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Bucket != "bkt" || cfg.Prefix != "some/prefix" || cfg.Endpoint != "http://127.0.0.1:9000" || cfg.Region != "eu-west-1" ||
		!cfg.PathStyle || cfg.SSE != "aws:kms" || cfg.SSEKMSKeyID != "k1" || cfg.PartSize != 8<<20 || cfg.Concurrency != 8 ||
		cfg.CredentialsFile != "/etc/strata/aws" || cfg.Profile != "tier" || cfg.AccessKeyID != "" {
		t.Fatalf("config %+v", cfg)
	}
	u, _ = url.Parse("s3://bkt?region=us-east-2")
	if cfg, err := S3ConfigFromURL(u); err != nil || cfg.PathStyle || cfg.Prefix != "" || cfg.Endpoint != "" {
		t.Fatalf("AWS URL: %+v, %v", cfg, err)
	}
	u, _ = url.Parse("s3://bkt?endpoint=http://h:1&path-style=false")
	if cfg, err := S3ConfigFromURL(u); err != nil || cfg.PathStyle {
		t.Fatalf("path-style=false: %+v, %v", cfg, err)
	}
	if got := Redact(mustParse("s3://b/p?secret-key=hunter2&region=r")); strings.Contains(got, "hunter2") {
		t.Fatalf("redacted URL %q shows the secret", got)
	}
}

// Keys in the URL are refused, and the error does not repeat them.
func TestS3URLRefusesKeys(t *testing.T) {
	for _, raw := range []string{
		"s3://b/p?endpoint=http://h:1&access-key=AKIAEXAMPLE&secret-key=hunter2",
		"s3://b/p?secret-key=hunter2",
		"s3://AKIAEXAMPLE:hunter2@b/p",
	} {
		_, err := OpenURL(context.Background(), raw, nil)
		if !errors.Is(err, ErrBadURL) || !errors.Is(err, ErrCredentialsInURL) {
			t.Errorf("%s: %v, want ErrCredentialsInURL", Redact(mustParse(raw)), err)
		}
		if err != nil && (strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "AKIAEXAMPLE")) {
			t.Errorf("error shows the keys: %v", err)
		}
	}
	for _, raw := range []string{"s3://b?sse=rot13", "s3://b?sse=AES256&sse-kms-key-id=k", "s3://b?sse-kms-key-id=k"} {
		if _, err := S3ConfigFromURL(mustParse(raw)); !errors.Is(err, ErrBadURL) {
			t.Errorf("%s: %v, want ErrBadURL", raw, err)
		}
	}
	// A URL that does not parse is not quoted back (it may hold a secret).
	if _, err := OpenURL(context.Background(), "s3://b/p?secret-key=hunter2&x=%zz\x7f", nil); err == nil ||
		strings.Contains(err.Error(), "hunter2") {
		t.Errorf("unparsable URL error: %v", err)
	}
}

func mustParse(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

func TestOpenURLRejects(t *testing.T) {
	for _, raw := range []string{
		"", "ftp://x/y", "file://host/path", "file:///p?x=1", "s3://", "s3://b?bogus=1",
		"s3://b?part-size=-5", "s3://b?path-style=maybe", "s3://b?sse=rot13", "s3://b?part-size=1024",
		"%zz",
	} {
		if _, err := OpenURL(context.Background(), raw, nil); !errors.Is(err, ErrBadURL) {
			t.Errorf("OpenURL(%q) = %v, want ErrBadURL", raw, err)
		}
	}
}
