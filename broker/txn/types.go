package txn

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TopicName is the internal topic of transaction state.
const TopicName = "__transaction_state"

// State is a transaction's state; the values are Kafka's record encoding.
type State = kmsg.TransactionState

const (
	StateEmpty             = kmsg.TransactionStateEmpty
	StateOngoing           = kmsg.TransactionStateOngoing
	StatePrepareCommit     = kmsg.TransactionStatePrepareCommit
	StatePrepareAbort      = kmsg.TransactionStatePrepareAbort
	StateCompleteCommit    = kmsg.TransactionStateCompleteCommit
	StateCompleteAbort     = kmsg.TransactionStateCompleteAbort
	StateDead              = kmsg.TransactionStateDead
	StatePrepareEpochFence = kmsg.TransactionStatePrepareEpochFence
)

// StateName is Kafka's name for s (DescribeTransactions, ListTransactions).
func StateName(s State) string { return s.String() }

// TopicPartition names one partition in a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Meta is a snapshot of one transactional id.
type Meta struct {
	ID                    string
	ProducerID            int64
	ProducerEpoch         int16
	LastProducerID        int64 // -1: none (the id before an epoch overflow)
	LastProducerEpoch     int16 // -1: none (the epoch before the last bump)
	TimeoutMs             int32
	State                 State
	Partitions            []TopicPartition // sorted
	StartMs, LastUpdateMs int64
}

// Markers is a marker job: write a commit/abort marker for the producer to
// every partition, with the coordinator epoch of the id's partition.
type Markers struct {
	ID            string
	ProducerID    int64
	ProducerEpoch int16
	Commit        bool
	Partitions    []TopicPartition
}

// Error codes the machine answers (Kafka's).
var (
	codeConcurrent   = kerr.ConcurrentTransactions.Code
	codeFenced       = kerr.ProducerFenced.Code
	codeInvalidState = kerr.InvalidTxnState.Code
	codeMapping      = kerr.InvalidProducerIDMapping.Code
	codeBadTimeout   = kerr.InvalidTransactionTimeout.Code
	codeNotFound     = kerr.TransactionalIDNotFound.Code
	codeNotAvailable = kerr.CoordinatorNotAvailable.Code
)

// ErrInvalidConfig is returned by Config.Validate.
var ErrInvalidConfig = errors.New("txn: invalid config")

// ErrCorruptRecord: a record of __transaction_state does not decode.
var ErrCorruptRecord = errors.New("txn: corrupt transaction state record")

// maxEpoch: an epoch bump reaching it rotates the producer id (Kafka keeps
// Short.MaxValue free).
const maxEpoch = 32767
