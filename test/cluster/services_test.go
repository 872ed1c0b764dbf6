package cluster

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/strata-log/strata/tier/tiertest"
)

// TestEtcdKillRestart: a SIGKILLed etcd comes back on the same port with
// its data.
func TestEtcdKillRestart(t *testing.T) {
	e := startEtcd(t, filepath.Join(t.TempDir(), "etcd"))
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "before the kill"); err != nil {
		t.Fatal(err)
	}
	if err := e.Kill(); err != nil {
		t.Fatal(err)
	}
	if e.Running() {
		t.Fatal("etcd still running after Kill")
	}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "before the kill" {
		t.Fatalf("after the restart: %v %v", resp, err)
	}
}

// TestMinIOKillRestart: while MinIO is killed its port refuses connections
// (held for the restart), and MinIO comes back on it with its objects.
func TestMinIOKillRestart(t *testing.T) {
	c := &Cluster{t: t, MinIO: tiertest.StartMinIO(t)}
	t.Cleanup(func() {
		if c.minioPort != nil {
			c.minioPort.release()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mc := c.MinIO.Client()
	if _, err := mc.PutObject(ctx, c.MinIO.Bucket, "o", bytes.NewReader([]byte("x")), 1, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	c.KillMinIO()
	if conn, err := net.DialTimeout("tcp", c.MinIO.Addr, time.Second); err == nil {
		conn.Close()
		t.Fatal("MinIO's port accepts connections while it is killed")
	}
	c.RestartMinIO()
	if _, err := mc.StatObject(ctx, c.MinIO.Bucket, "o", minio.StatObjectOptions{}); err != nil {
		t.Fatalf("object after the restart: %v", err)
	}
}

// TestFaultPlanReplays: a seed plans the same faults every time, each
// within the schedule's bounds, and every kind and broker shows up.
func TestFaultPlanReplays(t *testing.T) {
	a, b := newFaultPlan(7, 3), newFaultPlan(7, 3)
	kinds, brokers := map[faultKind]bool{}, map[int32]bool{}
	for i := 0; i < 200; i++ {
		fa, fb := a.next(), b.next()
		if fa != fb {
			t.Fatalf("fault %d: %v and %v from one seed", i, fa, fb)
		}
		if fa.hold < minFaultHold || fa.hold > maxFaultHold || fa.gap < fa.hold || fa.gap >= maxFaultGap || fa.gap < minFaultGap {
			t.Fatalf("fault %d out of bounds: %+v", i, fa)
		}
		kinds[fa.kind], brokers[fa.broker] = true, true
	}
	if len(kinds) != len(faultKinds) || len(brokers) != 3 {
		t.Fatalf("200 faults drew kinds %v and brokers %v", kinds, brokers)
	}
	if newFaultPlan(8, 3).next() == newFaultPlan(7, 3).next() && newFaultPlan(9, 3).next() == newFaultPlan(7, 3).next() {
		t.Fatal("different seeds plan the same faults")
	}
}
