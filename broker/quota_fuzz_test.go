package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// securitySeedRequests are the issue-9 requests (SASL, client quotas,
// ACLs, SCRAM credentials) as clients send them: FuzzRequestFrame's
// corpus starts from them too.
func securitySeedRequests() []kmsg.Request {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "SCRAM-SHA-512"
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 2, []byte("n,,n=alice,r=abcdef")
	dq := kmsg.NewPtrDescribeClientQuotasRequest()
	dq.Version, dq.Strict = 1, true
	dq.Components = []kmsg.DescribeClientQuotasRequestComponent{{EntityType: "user", MatchType: 0, Match: kmsg.StringPtr("alice")},
		{EntityType: "client-id", MatchType: 1}}
	aq := kmsg.NewPtrAlterClientQuotasRequest()
	aq.Version = 1
	aq.Entries = []kmsg.AlterClientQuotasRequestEntry{{
		Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "client-id", Name: kmsg.StringPtr("c")}},
		Ops:    []kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 1024}, {Key: "request_percentage", Remove: true}},
	}}
	ca := kmsg.NewPtrCreateACLsRequest()
	ca.Version = 3
	ca.Creations = []kmsg.CreateACLsRequestCreation{{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "t",
		ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: "User:alice", Host: "*",
		Operation: kmsg.ACLOperationRead, PermissionType: kmsg.ACLPermissionTypeAllow}}
	da := kmsg.NewPtrDescribeACLsRequest()
	da.Version = 3
	us := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	us.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{{Name: "alice", Mechanism: 2, Iterations: 8192,
		Salt: []byte("salt"), SaltedPassword: make([]byte, 64)}}
	return []kmsg.Request{hs, au, dq, aq, ca, da, us, kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()}
}
