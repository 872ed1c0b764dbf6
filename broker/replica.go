package broker

// CONTRACT STUB (lead): the replication-core helper replaces this file.
// See /work/notes/issue5-contract.md.

// registrationLost: the etcd registration is gone (lease lost or not
// renewed in time): stop leading every partition now.
func (b *Broker) registrationLost() {}

// registered: a new registration (b.registration()) is live; re-apply the
// partition states (a broker leads only states whose LeaderBrokerEpoch is
// its registration epoch).
func (b *Broker) registered() {}
