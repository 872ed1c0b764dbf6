package tier

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/strata-log/strata/tier/tiertest"
)

// The probe writes, reads and deletes under <cluster>/probe/ of a real
// bucket and leaves nothing; against a missing bucket it fails at the
// write, saying so.
func TestProbeBucketOnMinIO(t *testing.T) {
	m := tiertest.StartMinIO(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bucket, err := OpenURL(ctx, m.URL("probed"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ProbeBucket(ctx, bucket.Backend, "strata", 3); err != nil {
		t.Fatalf("probe of a working bucket: %v", err)
	}
	for obj := range m.Client().ListObjects(ctx, m.Bucket, minio.ListObjectsOptions{Prefix: "probed/", Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		t.Fatalf("the probe left %s behind", obj.Key)
	}
	missing, err := OpenURL(ctx, strings.Replace(m.URL("probed"), "s3://"+m.Bucket, "s3://no-such-bucket", 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = ProbeBucket(ctx, missing.Backend, "strata", 3)
	if err == nil || !strings.Contains(err.Error(), "bucket probe: write") || !strings.Contains(err.Error(), "bucket does not exist") {
		t.Fatalf("probe of a missing bucket: %v", err)
	}
}
