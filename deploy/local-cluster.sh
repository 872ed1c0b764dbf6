#!/usr/bin/env bash
# A development cluster on loopback: etcd, MinIO (with a bucket) and 3
# `strata serve` brokers as background processes, all state under one
# directory.
#
#   deploy/local-cluster.sh start  [--dir DIR]   build strata, start everything, wait until ready
#   deploy/local-cluster.sh stop   [--dir DIR]   SIGTERM the brokers, then MinIO and etcd; wait for exits
#   deploy/local-cluster.sh status [--dir DIR]   what runs (exit 1 if something is not running)
#   deploy/local-cluster.sh restart N [--dir DIR]
#                          SIGTERM broker N, wait for its exit, start it again on
#                          its data (the same broker-N/) and wait until it is ready
#
# DIR (default: local-cluster/ at the repository root, wherever the script is
# run from; a relative --dir is taken from the current directory) holds:
# strata and mkbucket binaries, etcd/, minio/ (bucket data), broker-N/ (each
# broker's --data-dir), *.log and *.pid; a restarted broker's previous log is
# kept as broker-N.log.prev.
# Then: kcat -L -b 127.0.0.1:9091
#
# Environment (defaults in brackets):
#   CLUSTER_KAFKA_PORT [9091]   Kafka port of broker 1; broker N listens on +N-1
#   CLUSTER_HTTP_PORT [9641]    --http port of broker 1; broker N on +N-1
#   CLUSTER_ETCD_PORT [2379]    etcd client port (the peer port is this + 1)
#   CLUSTER_MINIO_PORT [9000]   MinIO S3 API port
#   CLUSTER_BROKERS [3]         number of brokers
#   CLUSTER_ETCD_BIN [etcd on PATH, else /usr/bin/etcd]
#   CLUSTER_MINIO_BIN [<repo>/.tools/bin/minio, from scripts/install-minio.sh]
#   CLUSTER_START_TIMEOUT [60]  seconds to wait for each process to become ready
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

kafka_port=${CLUSTER_KAFKA_PORT:-9091}
http_port=${CLUSTER_HTTP_PORT:-9641}
etcd_port=${CLUSTER_ETCD_PORT:-2379}
minio_port=${CLUSTER_MINIO_PORT:-9000}
brokers=${CLUSTER_BROKERS:-3}
start_timeout=${CLUSTER_START_TIMEOUT:-60}
etcd_bin=${CLUSTER_ETCD_BIN:-$(command -v etcd || echo /usr/bin/etcd)}
minio_bin=${CLUSTER_MINIO_BIN:-$repo/.tools/bin/minio}

# Development credentials of the local MinIO (never use them elsewhere).
access_key=strata-dev
secret_key=strata-dev-secret
bucket=strata
region=us-east-1

die() {
	printf 'local-cluster: %s\n' "$*" >&2
	exit 1
}
say() { printf 'local-cluster: %s\n' "$*"; }

usage() {
	die "usage: $0 start|stop|status [--dir DIR] | restart N [--dir DIR]"
}

# alive PID: the process exists and is not a zombie (an exited process
# re-parented to an init that has not reaped it yet).
alive() {
	local pid=$1 state
	[[ -r /proc/$pid/stat ]] || return 1
	state=$(sed -E 's/^[0-9]+ \(.*\) ([A-Za-z]).*/\1/' "/proc/$pid/stat" 2>/dev/null) || return 1
	[[ "$state" != Z && "$state" != X ]]
}

# pid_of NAME: the pid in DIR/NAME.pid if that process still runs. Every
# process started here has DIR in its command line: a pid reused by an
# unrelated process (a stale file after a reboot) is never signalled.
pid_of() {
	local file=$dir/$1.pid pid
	[[ -f "$file" ]] || return 1
	pid=$(<"$file")
	[[ "$pid" =~ ^[0-9]+$ ]] && alive "$pid" || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$dir" || return 1
	echo "$pid"
}

# launch NAME CMD...: starts CMD in the background in its own session
# (a Ctrl-C or hangup of this terminal does not reach it), detached from
# this script's stdio (so callers reading our output are not held open),
# with its output in DIR/NAME.log and its pid in DIR/NAME.pid. setsid
# execs CMD in place (a background job is no group leader), so $! is CMD.
launch() {
	local name=$1
	shift
	if pid_of "$name" >/dev/null; then
		die "$name already runs (pid $(pid_of "$name")); run stop first"
	fi
	setsid "$@" </dev/null >"$dir/$name.log" 2>&1 &
	echo $! >"$dir/$name.pid"
}

# wait_until NAME CHECK...: polls CHECK until it succeeds, failing if NAME
# exits or the timeout passes.
wait_until() {
	local name=$1 deadline=$((SECONDS + start_timeout))
	shift
	until "$@" >/dev/null 2>&1; do
		pid_of "$name" >/dev/null || die "$name exited; see $dir/$name.log (then: $0 stop --dir $dir)"
		((SECONDS < deadline)) || die "$name not ready after ${start_timeout}s; see $dir/$name.log (then: $0 stop --dir $dir)"
		sleep 0.2
	done
}

# port_open PORT: something accepts connections on 127.0.0.1:PORT (bash's
# /dev/tcp: no curl needed). etcd serves once it listens; MinIO's readiness
# is then awaited by mkbucket, which retries.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# http_ok PORT PATH: GET http://127.0.0.1:PORT/PATH answers 200 (HTTP/1.0
# over /dev/tcp, so the server closes the connection after the answer).
http_ok() {
	(
		exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$2" >&3
		IFS= read -r -t 5 status <&3 || exit 1
		[[ "$status" == *" 200 "* ]]
	) 2>/dev/null
}

start_etcd() {
	launch etcd "$etcd_bin" --name local --data-dir "$dir/etcd" \
		--listen-client-urls "http://127.0.0.1:$etcd_port" \
		--advertise-client-urls "http://127.0.0.1:$etcd_port" \
		--listen-peer-urls "http://127.0.0.1:$((etcd_port + 1))" \
		--initial-advertise-peer-urls "http://127.0.0.1:$((etcd_port + 1))" \
		--initial-cluster "local=http://127.0.0.1:$((etcd_port + 1))"
	wait_until etcd port_open "$etcd_port"
	say "etcd on 127.0.0.1:$etcd_port"
}

start_minio() {
	mkdir -p "$dir/minio"
	MINIO_ROOT_USER=$access_key MINIO_ROOT_PASSWORD=$secret_key MINIO_BROWSER=off MINIO_UPDATE=off MINIO_CI_CD=1 \
		launch minio "$minio_bin" server --quiet --address "127.0.0.1:$minio_port" "$dir/minio"
	wait_until minio port_open "$minio_port"
	MINIO_ROOT_USER=$access_key MINIO_ROOT_PASSWORD=$secret_key \
		"$dir/mkbucket" "http://127.0.0.1:$minio_port" "$bucket" "$region" ||
		die "could not create bucket $bucket"
	write_credentials
	say "MinIO on 127.0.0.1:$minio_port, bucket $bucket"
}

# write_credentials puts MinIO's keys in an AWS shared-credentials file for
# the brokers (keys never go in the --object-store URL).
write_credentials() {
	(umask 077 && printf '[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n' \
		"$access_key" "$secret_key" >"$dir/aws-credentials")
}

object_store_url() {
	printf 's3://%s/local?endpoint=http://127.0.0.1:%s&region=%s&credentials-file=%s' \
		"$bucket" "$minio_port" "$region" "$dir/aws-credentials"
}

start_broker() {
	local i=$1
	local name=broker-$i
	mkdir -p "$dir/$name"
	launch "$name" "$dir/strata" serve \
		--node-id "$i" \
		--listen "127.0.0.1:$((kafka_port + i - 1))" \
		--http "127.0.0.1:$((http_port + i - 1))" \
		--data-dir "$dir/$name" \
		--etcd "127.0.0.1:$etcd_port" \
		--object-store "$(object_store_url)" \
		--default-replication-factor "$((brokers < 3 ? brokers : 3))"
}

# wait_broker I: waits until broker I logs that it serves Kafka and its
# /readyz answers 200.
wait_broker() {
	local i=$1
	wait_until "broker-$i" grep -q 'strata: serving kafka on' "$dir/broker-$i.log"
	wait_until "broker-$i" http_ok "$((http_port + i - 1))" /readyz
	say "broker $i on 127.0.0.1:$((kafka_port + i - 1)) (http 127.0.0.1:$((http_port + i - 1)))"
}

cmd_start() {
	[[ -x "$etcd_bin" ]] || die "etcd not found at $etcd_bin (Debian: apt-get install etcd-server)"
	[[ -x "$minio_bin" ]] || die "MinIO not found at $minio_bin (run scripts/install-minio.sh)"
	mkdir -p "$dir"
	say "building strata and mkbucket into $dir"
	(cd "$repo" && go build -o "$dir/strata" ./cmd/strata && go build -o "$dir/mkbucket" ./deploy/mkbucket) ||
		die "build failed"
	start_etcd
	start_minio
	local i
	for ((i = 1; i <= brokers; i++)); do
		start_broker "$i"
	done
	for ((i = 1; i <= brokers; i++)); do
		wait_broker "$i"
	done
	say "ready: kcat -L -b 127.0.0.1:$kafka_port"
}

# wait_exit NAME SECONDS: waits for NAME (already signalled) to exit,
# SIGKILLing it after SECONDS.
wait_exit() {
	local name=$1 grace=$2 pid deadline
	if pid=$(pid_of "$name"); then
		deadline=$((SECONDS + grace))
		while alive "$pid"; do
			if ((SECONDS >= deadline)); then
				say "$name (pid $pid) did not exit in ${grace}s: SIGKILL"
				kill -KILL "$pid" 2>/dev/null || true
				sleep 0.5
				break
			fi
			sleep 0.1
		done
	fi
	if [[ -f "$dir/$name.pid" ]]; then
		rm -f "$dir/$name.pid"
		say "stopped $name"
	fi
}

# stop_one NAME SECONDS: SIGTERM, then wait_exit.
stop_one() {
	local pid
	if pid=$(pid_of "$1"); then
		kill -TERM "$pid" 2>/dev/null || true
	fi
	wait_exit "$@"
}

cmd_stop() {
	local file name pid names=()
	# SIGTERM every broker at once (whatever CLUSTER_BROKERS was at start):
	# each hands its leaderships to the others, then they exit.
	for file in "$dir"/broker-*.pid; do
		[[ -e "$file" ]] || continue
		name=$(basename "$file" .pid)
		names+=("$name")
		if pid=$(pid_of "$name"); then
			kill -TERM "$pid" 2>/dev/null || true
		fi
	done
	for name in "${names[@]}"; do
		wait_exit "$name" 60
	done
	stop_one minio 30
	stop_one etcd 30
}

# cmd_restart N: a controlled restart of one broker (SIGTERM hands its
# leaderships to the others), on the same data directory and ports.
cmd_restart() {
	local i=$1 name=broker-$1 old new
	[[ "$i" =~ ^[1-9][0-9]*$ ]] || die "restart: broker number expected, got '$i'"
	[[ -d "$dir/$name" && -x "$dir/strata" ]] || die "restart: no $name in $dir (run start first)"
	old=$(pid_of "$name") || old=none
	stop_one "$name" 60
	[[ -f "$dir/$name.log" ]] && mv -f "$dir/$name.log" "$dir/$name.log.prev"
	start_broker "$i"
	wait_broker "$i"
	new=$(pid_of "$name") || die "$name exited after its restart; see $dir/$name.log"
	say "restarted $name (pid $old -> $new)"
}

cmd_status() {
	local name pid down=0
	for name in etcd minio $(seq -f 'broker-%g' 1 "$brokers"); do
		if pid=$(pid_of "$name"); then
			say "$name: running (pid $pid)"
		else
			say "$name: not running"
			down=1
		fi
	done
	return "$down"
}

main() {
	(($# >= 1)) || usage
	local cmd=$1 broker=
	shift
	if [[ $cmd == restart ]]; then
		(($# >= 1)) || usage
		broker=$1
		shift
	fi
	dir=$repo/local-cluster
	while (($# > 0)); do
		case $1 in
		--dir)
			(($# >= 2)) || usage
			dir=$2
			shift 2
			;;
		*) usage ;;
		esac
	done
	# Only start creates DIR: status, stop and restart of a cluster that
	# never ran leave no directory behind.
	[[ $cmd == start ]] && mkdir -p "$dir"
	if [[ -d "$dir" ]]; then
		dir=$(cd "$dir" && pwd)
	else
		dir=$(realpath -m -- "$dir")
	fi
	case $cmd in
	start) cmd_start ;;
	stop) cmd_stop ;;
	status) cmd_status ;;
	restart) cmd_restart "$broker" ;;
	*) usage ;;
	esac
}

main "$@"
