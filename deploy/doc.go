// Package deploy holds the files that run Strata outside the test
// harnesses, and the tests that keep them honest:
//
//   - local-cluster.sh: etcd, MinIO and 3 brokers as processes on loopback
//     for development (start|stop|status|restart N [--dir DIR]), usable
//     from any directory;
//   - docker-compose.yml and Dockerfile: the same cluster in containers.
//     Healthchecks order the start: etcd (etcdctl) and MinIO (mc ready)
//     healthy, then the one-shot bucket creation (mkbucket) exits 0, then the
//     brokers, healthy once /readyz answers (httpcheck: the image has no curl);
//   - kubernetes/: `kubectl apply -k`: a 3-member etcd StatefulSet, a MinIO
//     for trying out (or an external S3: see kustomization.yaml) with its
//     Secret and a bucket Job, and 3 brokers (probes on /readyz and /healthz,
//     resources, anti-affinity, the node's zone as rack, a volume each,
//     PodDisruptionBudgets, headless and client Services);
//   - grafana/strata-dashboard.json and prometheus/alerts.yml: a dashboard and
//     alert rules (prometheus/prometheus.yml scrapes the compose cluster with
//     them) for replication, requests, the bucket tier, cold reads and
//     consumer-group lag;
//   - systemd/strata.service: one broker as a unit, configured by an
//     EnvironmentFile of STRATA_* variables.
//
// Every `--flag` and STRATA_* variable these files give strata must exist
// in `strata serve --help` (DESIGN.md §11 is the contract), and every
// metric and label the dashboard and the alerts query must be on a running
// broker's /metrics: deploy_test.go and metrics_test.go check both, and run
// local-cluster.sh against kcat.
package deploy
