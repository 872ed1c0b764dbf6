// Package deploy holds the files that run Strata outside the test
// harnesses, and the test that keeps them honest:
//
//   - local-cluster.sh: etcd, MinIO and 3 brokers as processes on loopback
//     for development (start|stop|status [--dir DIR]);
//   - docker-compose.yml and Dockerfile: the same cluster in containers,
//     with a bucket-creating init step (mkbucket);
//   - kubernetes/: a StatefulSet of 3 brokers behind a headless Service,
//     configured by a ConfigMap (etcd endpoints, S3 settings) and a Secret
//     (S3 credentials);
//   - systemd/strata.service: one broker as a unit, configured by an
//     EnvironmentFile of STRATA_* variables.
//
// Every `--flag` and STRATA_* variable these files give strata must exist
// in `strata serve --help` (DESIGN.md §11 is the contract); deploy_test.go
// checks that, and runs local-cluster.sh against kcat.
package deploy
