package broker

// CONTRACT STUB (lead): the follower helper replaces this file.
// See /work/notes/issue5-contract.md.

// fetcherManager owns the follower fetchers: one goroutine and one peer
// connection per leader broker this node follows.
type fetcherManager struct{}
