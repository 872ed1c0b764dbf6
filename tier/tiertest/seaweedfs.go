package tiertest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testkit"
)

// SeaweedFSBinary returns the weed binary path, or "" if it is missing.
func SeaweedFSBinary() string { return toolBinary("STRATA_WEED_BIN", "weed") }

// seaweedFSConfig gives the test keys every S3 action.
const seaweedFSConfig = `{"identities":[{"name":"strata-test","credentials":[{"accessKey":%q,"secretKey":%q}],` +
	`"actions":["Admin","Read","Write","List","Tagging"]}]}`

// seaweedFSFlavor runs `weed server` (master, volume server, filer and S3
// gateway in one process) on loopback ports only: every port it would
// otherwise take by default (gRPC, Iceberg, Lance) is set or turned off, so
// that servers of concurrent tests never collide.
var seaweedFSFlavor = flavor{
	name: "SeaweedFS",
	command: func(s *S3Server) *exec.Cmd {
		p := s.extraPorts
		return exec.Command(s.bin, "server", "-dir="+s.dataDir, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
			"-master.port="+p[0], "-master.port.grpc="+p[1], "-master.volumeSizeLimitMB=64",
			"-volume.port="+p[2], "-volume.port.grpc="+p[3], "-volume.max=0",
			"-filer", "-filer.port="+p[4], "-filer.port.grpc="+p[5],
			"-s3", "-s3.port="+port(s.Addr), "-s3.port.grpc="+p[6], "-s3.port.iceberg=0", "-s3.port.lance=0",
			"-s3.config="+s.configFile)
	},
	ready: func(s *S3Server) bool {
		client := &http.Client{Timeout: time.Second}
		resp, err := client.Get(s.Endpoint + "/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true // any answer: the gateway serves (the bucket waits for the volumes)
	},
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// StartSeaweedFS starts a SeaweedFS server with the test keys and a fresh
// bucket; t.Cleanup stops it.
func StartSeaweedFS(t testing.TB) *S3Server {
	t.Helper()
	bin := SeaweedFSBinary()
	if bin == "" {
		testkit.Missing(t, "SeaweedFS binary missing: run scripts/install-seaweedfs.sh (or set STRATA_WEED_BIN)")
	}
	config := filepath.Join(t.TempDir(), "s3.json")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(seaweedFSConfig, AccessKey, SecretKey)), 0o600); err != nil {
		t.Fatal(err)
	}
	return startServer(t, seaweedFSFlavor, bin, func(s *S3Server) {
		s.configFile = config
		s.extraPorts = s.extraPorts[:0]
		for range 7 {
			s.extraPorts = append(s.extraPorts, port(testkit.FreeAddr(t)))
		}
	})
}
