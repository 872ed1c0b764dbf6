package cluster

import "os"

// WipeEtcd deletes etcd's data dir; etcd must be down (KillEtcd). The next
// RestartEtcd starts an empty member on the same ports (its first start
// again: --initial-cluster applies), so every topic, tier manifest and
// group the cluster kept in etcd is gone, as after losing the etcd cluster
// in a disaster. Together with Kill and Wipe of every broker it leaves
// nothing but the bucket.
func (c *Cluster) WipeEtcd() {
	c.t.Helper()
	if c.Etcd.Running() {
		c.t.Fatal("wipe etcd: etcd is running (KillEtcd first)")
	}
	if err := os.RemoveAll(c.Etcd.dataDir); err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("cluster: etcd data dir wiped")
}
