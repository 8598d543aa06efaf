#!/usr/bin/env bash
# hack/conformance.sh -- run the DMTF Redfish validators (Service, Protocol, Interop with the
# OpenStack Ironic profile) against kubevirt-redfish served on 127.0.0.1. `make conformance`.
#
# Usage: hack/conformance.sh [demo] [apiserver]      (default: both)
#   demo       the binary's in-memory demo cluster (--demo)
#   apiserver  a real etcd + kube-apiserver with the KubeVirt/CDI CRDs (test/testenv), the demo
#              VMs and the simulator (test/conformance); the binary runs with --kubeconfig and
#              a config file exposing tenant-a and tenant-b to admin/password
#
# Exit status:
#   0  every validator of every backend reported 0 FAIL (after RPV_IGNORE/RIV_IGNORE)
#   1  failures (see the summary lines and the reports)
#   2  usage error
#   3  setup problem: build failed, server did not start, a validator crashed
#   4  the DMTF tool trees, the shared conformance folder or Debian packages are missing;
#      nothing was run (the message says how to get them)
#
# Environment (defaults in brackets):
#   SHARED_DIR     [<repo>/../shared]  holds conformance/run-validators.sh, the Ironic profile
#                  and dmtf/csdl (the DSP8010 schemas)
#   DMTF_MIRRORS   [/work/.mirror when it holds the snapshots]  folder of the fetch tool's bare
#                  snapshots "<owner>+<repo>/repo"
#   DMTF_HOME      [/tmp/dmtf]  the tool trees are extracted to $DMTF_HOME/src
#   CONFORMANCE_OUT [/tmp/kubevirt-redfish-conformance/<time>]  reports, one folder per backend
#   CONFORMANCE_HTTP [0]  1 = serve plain HTTP (two Protocol Validator assertions then fail)
#   RIV_IGNORE     ['SupportedApplyTimes#[0-9]+']  (a known Interop Validator bug)
#   RPV_IGNORE     []
#   INSTALL_DEPS   [0]  1 lets run-validators.sh apt-get the Debian packages it needs
#   Every other knob of run-validators.sh (RUN_RSV, RUN_RPV, RUN_RIV, RSV_ARGS, RIV_ARGS,
#   CA_BUNDLE, SHOW_FAILS, ...) is passed through; see `sed -n 1,80p $SHARED_DIR/conformance/
#   run-validators.sh`.
#
# Nothing is sent anywhere but 127.0.0.1: the servers and etcd/kube-apiserver listen there,
# the validators run offline against local schemas (run-validators.sh points the Interop
# Validator's external links at a dead local proxy), and the Go builds run with GOPROXY=off
# (the module cache must hold the dependencies: `go mod download` once).
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SHARED_DIR=${SHARED_DIR:-$ROOT/../shared}
RUNNER=$SHARED_DIR/conformance/run-validators.sh
DMTF_HOME=${DMTF_HOME:-/tmp/dmtf}
if [ -z "${DMTF_MIRRORS:-}" ] && [ -d /work/.mirror/DMTF+Redfish-Service-Validator/repo ]; then
	DMTF_MIRRORS=/work/.mirror
fi
DMTF_MIRRORS=${DMTF_MIRRORS:-}
CONFORMANCE_OUT=${CONFORMANCE_OUT:-/tmp/kubevirt-redfish-conformance/$(date +%Y%m%d-%H%M%S)}
CONFORMANCE_HTTP=${CONFORMANCE_HTTP:-0}
RIV_IGNORE=${RIV_IGNORE-SupportedApplyTimes#[0-9]+}
RPV_IGNORE=${RPV_IGNORE:-}
INSTALL_DEPS=${INSTALL_DEPS:-0}
RUN_RSV=${RUN_RSV:-1} RUN_RPV=${RUN_RPV:-1} RUN_RIV=${RUN_RIV:-1}
export DMTF_HOME DMTF_MIRRORS RIV_IGNORE RPV_IGNORE INSTALL_DEPS RUN_RSV RUN_RPV RUN_RIV
# The servers and the validators talk to 127.0.0.1 only; no proxy may get in between.
export NO_PROXY="127.0.0.1,localhost,::1${NO_PROXY:+,$NO_PROXY}" no_proxy="127.0.0.1,localhost,::1${no_proxy:+,$no_proxy}"

RF_USER=admin
RF_PASS=password

log() { printf '[conformance] %s\n' "$*" >&2; }

usage() { sed -n '5,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
BACKENDS=()
EXPLICIT=0
for a in "$@"; do
	case $a in
	demo | apiserver) BACKENDS+=("$a") EXPLICIT=1 ;;
	-h | --help) usage ;;
	*) echo "unknown backend: $a" >&2; usage ;;
	esac
done
[ ${#BACKENDS[@]} -gt 0 ] || BACKENDS=(demo apiserver)

# ------------------------------------------------------------ prerequisites (exit 4)
missing_tools() {
	cat >&2 <<EOF
[conformance] $*

The validators are public DMTF tools; they are run from local copies and never committed here.
To get them:
  1. Bring these repository snapshots with the agent \`fetch\` tool (or any bare git clone laid
     out as <folder>/<owner>+<repo>/repo):
       DMTF/Redfish-Service-Validator  DMTF/Redfish-Protocol-Validator  DMTF/Redfish-Interop-Validator
       DMTF/python-redfish-library     DMTF/Redfish-Tacklebox
     (ethanfurman/aenum and mpetazzoni/sseclient are optional: stand-ins are generated)
  2. DMTF_MIRRORS=<folder> make conformance     (default folder: /work/.mirror)
  or extract the trees yourself into \$DMTF_HOME/src (now $DMTF_HOME/src): Redfish-Service-Validator,
  Redfish-Protocol-Validator, Redfish-Interop-Validator, python-redfish-library.
The shared folder (SHARED_DIR, now $SHARED_DIR) must hold conformance/run-validators.sh, the
Ironic profile and dmtf/csdl.
EOF
	exit 4
}
[ -f "$RUNNER" ] || missing_tools "no $RUNNER (set SHARED_DIR to the folder holding conformance/run-validators.sh)"
# have_tree DIR_NAME MARKER: extracted under $DMTF_HOME/src, or a snapshot in DMTF_MIRRORS.
have_tree() {
	[ -e "$DMTF_HOME/src/$1/$2" ] || { [ -n "$DMTF_MIRRORS" ] && [ -d "$DMTF_MIRRORS/DMTF+$1/repo" ]; }
}
absent=()
[ "$RUN_RSV" = 1 ] && ! have_tree Redfish-Service-Validator RedfishServiceValidator.py && absent+=(DMTF/Redfish-Service-Validator)
[ "$RUN_RPV" = 1 ] && ! have_tree Redfish-Protocol-Validator rf_protocol_validator.py && absent+=(DMTF/Redfish-Protocol-Validator)
[ "$RUN_RIV" = 1 ] && ! have_tree Redfish-Interop-Validator RedfishInteropValidator.py && absent+=(DMTF/Redfish-Interop-Validator)
have_tree python-redfish-library src/redfish/__init__.py || absent+=(DMTF/python-redfish-library)
[ ${#absent[@]} -eq 0 ] || missing_tools "DMTF tool trees not found (DMTF_MIRRORS='$DMTF_MIRRORS', DMTF_HOME=$DMTF_HOME): ${absent[*]}"
if [ "$INSTALL_DEPS" != 1 ]; then
	pkgs="python3 python3-requests python3-urllib3 python3-colorama python3-openpyxl python3-xlsxwriter
	      python3-pyasn1 python3-pyasn1-modules python3-jsonpatch python3-json-pointer
	      python3-requests-toolbelt python3-requests-unixsocket"
	[ "$RUN_RIV" = 1 ] && pkgs="$pkgs python3-jsonschema"
	miss=()
	for p in $pkgs; do
		[[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == "install ok installed" ]] || miss+=("$p")
	done
	if [ ${#miss[@]} -gt 0 ]; then
		log "missing Debian packages the validators need: ${miss[*]}"
		log "install them:  sudo apt-get install --no-install-recommends ${miss[*]}"
		log "(or run with INSTALL_DEPS=1 to let run-validators.sh install them)"
		exit 4
	fi
fi
for t in curl python3; do command -v "$t" >/dev/null || { log "$t is required"; exit 4; }; done

# ------------------------------------------------------------ processes and cleanup
PIDS=()  # servers and the apiserver environment we started
VPID=""  # the running validators: run-validators.sh in its own process group
TPID=""  # the tail that shows their output
cleanup() {
	local pid
	if [ -n "$VPID" ]; then
		kill -TERM -- "-$VPID" 2>/dev/null || kill -TERM "$VPID" 2>/dev/null
	fi
	[ -n "$TPID" ] && kill -TERM "$TPID" 2>/dev/null
	for pid in "${PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null
	done
	for pid in $VPID "${PIDS[@]}"; do
		# the server drains for up to 20 s; etcd/kube-apiserver take a few seconds
		for _ in $(seq 1 250); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	[ -n "$VPID" ] && kill -KILL -- "-$VPID" 2>/dev/null
	PIDS=() VPID="" TPID=""
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

stop_pid() { # stop_pid PID: stop one process we started and forget it
	local pid=$1 keep=() p
	kill -TERM "$pid" 2>/dev/null
	for _ in $(seq 1 250); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	for p in "${PIDS[@]}"; do [ "$p" = "$pid" ] || keep+=("$p"); done
	PIDS=("${keep[@]+"${keep[@]}"}")
}

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# wait_redfish URL PID LOG: wait for the service root to answer 200, or the server to die.
wait_redfish() {
	local url=$1 pid=$2 logf=$3
	for _ in $(seq 1 600); do
		kill -0 "$pid" 2>/dev/null || { log "the server exited; last lines of $logf:"; tail -n 20 "$logf" >&2; return 1; }
		[ "$(curl -ks --noproxy '*' -o /dev/null -w '%{http_code}' --max-time 2 "$url/redfish/v1/")" = 200 ] && return 0
		sleep 0.1
	done
	log "no answer from $url/redfish/v1/ after 60 s; last lines of $logf:"
	tail -n 20 "$logf" >&2
	return 1
}

# ------------------------------------------------------------ build
mkdir -p "$CONFORMANCE_OUT" || { log "cannot create $CONFORMANCE_OUT"; exit 3; }
CONFORMANCE_OUT=$(cd "$CONFORMANCE_OUT" && pwd)
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly" GOPROXY=off GOWORK=off
cd "$ROOT" || exit 3
log "building bin/kubevirt-redfish"
t0=$SECONDS
go build -o bin/kubevirt-redfish ./cmd/kubevirt-redfish || { log "build failed"; exit 3; }
log "built in $((SECONDS - t0))s ($(git log -1 --format='%h %s' 2>/dev/null))"
BIN=$ROOT/bin/kubevirt-redfish

SCHEME=https
TLS_FLAGS=(--insecure-http=false)
if [ "$CONFORMANCE_HTTP" = 1 ]; then
	SCHEME=http TLS_FLAGS=(--insecure-http=true)
elif [[ $("$BIN" -h 2>&1) != *-insecure-http* ]]; then
	log "this build has no TLS support (no --insecure-http flag): serving plain HTTP;"
	log "SEC_BASIC_AUTH_OVER_HTTPS and SEC_SESSION_CREATE_HTTPS_ONLY will fail"
	SCHEME=http TLS_FLAGS=()
fi

declare -a REPORT=()
STATUS=0
bump() { [ "$1" -gt "$STATUS" ] && STATUS=$1; return 0; }

# run_validators BACKEND URL: run the three validators, keep their summary lines.
run_validators() {
	local backend=$1 url=$2 out=$CONFORMANCE_OUT/$1 rc t0=$SECONDS
	log "[$backend] validators against $url -> $out"
	# In a session of its own, so that an interrupt can stop the validators at once (a
	# foreground command would hold off the traps until it ends); the tail shows its output.
	: >"$CONFORMANCE_OUT/$backend.log"
	OUT_DIR=$out setsid -w "$RUNNER" "$url" "$RF_USER" "$RF_PASS" >"$CONFORMANCE_OUT/$backend.log" 2>&1 </dev/null &
	VPID=$!
	tail -n +1 -f --pid="$VPID" "$CONFORMANCE_OUT/$backend.log" &
	TPID=$!
	wait "$VPID"
	rc=$?
	wait "$TPID" 2>/dev/null
	VPID="" TPID=""
	REPORT+=("== $backend ($url, exit $rc, $((SECONDS - t0))s, reports in $out)")
	while IFS= read -r l; do REPORT+=("$l"); done < <(grep -E '^(Service|Protocol|Interop) Validator: ' "$CONFORMANCE_OUT/$backend.log")
	case $rc in 0 | 1 | 3) bump "$rc" ;; *) bump 3 ;; esac
}

run_demo() {
	local port url pid logf=$CONFORMANCE_OUT/demo-server.log
	port=$(free_port) || return 3
	url=$SCHEME://127.0.0.1:$port
	log "[demo] starting $BIN --demo on $url (log: $logf)"
	"$BIN" --demo --listen "127.0.0.1:$port" "${TLS_FLAGS[@]}" >"$logf" 2>&1 &
	pid=$!
	PIDS+=("$pid")
	if ! wait_redfish "$url" "$pid" "$logf"; then
		REPORT+=("== demo: ERROR: the server did not start (see $logf)")
		stop_pid "$pid"
		bump 3
		return
	fi
	run_validators demo "$url"
	stop_pid "$pid"
}

run_apiserver() {
	local envsh ready=$CONFORMANCE_OUT/apiserver-env.ready envlog=$CONFORMANCE_OUT/apiserver-env.log
	local logf=$CONFORMANCE_OUT/apiserver-server.log cfg=$CONFORMANCE_OUT/apiserver-config.yaml
	local port url envpid pid kubeconfig t0
	if ! envsh=$(hack/tools.sh env) || ! eval "$envsh" || [ -z "${KRF_KUBE_APISERVER:-}" ]; then
		local msg="kube-apiserver/etcd/CRDs not available (run \`make tools\`; hack/tools.sh builds them from the Go module proxy, which this script does not use)"
		log "[apiserver] $msg"
		if [ "$EXPLICIT" = 1 ]; then
			REPORT+=("== apiserver: ERROR: $msg")
			bump 3
		else
			REPORT+=("== apiserver: SKIPPED: $msg")
		fi
		return
	fi
	export KRF_KUBE_APISERVER KRF_ETCD KRF_CRD_DIR
	log "[apiserver] building bin/conformance-env"
	go build -o bin/conformance-env ./test/conformance || { REPORT+=("== apiserver: ERROR: test/conformance does not build"); bump 3; return; }
	rm -f "$ready"
	t0=$SECONDS
	log "[apiserver] starting etcd + kube-apiserver + simulator (log: $envlog)"
	bin/conformance-env -ready "$ready" >"$envlog" 2>&1 &
	envpid=$!
	PIDS+=("$envpid")
	while [ ! -s "$ready" ]; do
		if ! kill -0 "$envpid" 2>/dev/null || [ $((SECONDS - t0)) -gt 300 ]; then
			log "[apiserver] the environment did not come up; last lines of $envlog:"
			tail -n 30 "$envlog" >&2
			REPORT+=("== apiserver: ERROR: etcd/kube-apiserver did not start (see $envlog)")
			stop_pid "$envpid"
			bump 3
			return
		fi
		sleep 0.2
	done
	kubeconfig=$(cat "$ready")
	log "[apiserver] environment up in $((SECONDS - t0))s; kubeconfig $kubeconfig"

	port=$(free_port) || return 3
	url=$SCHEME://127.0.0.1:$port
	cat >"$cfg" <<EOF
# written by hack/conformance.sh: the demo tenants, exposed to admin (password from the environment)
listen: 127.0.0.1:$port
tls:
  insecureHTTP: $([ "$SCHEME" = http ] && echo true || echo false)
allowlist:
  - name: tenant-a
    namespace: tenant-a
  - name: tenant-b
    namespace: tenant-b
users:
  - username: $RF_USER
    role: Administrator
    passwordEnv: KRF_CONFORMANCE_PASSWORD
    allow: ["*"]
EOF
	if [ "$SCHEME" = http ] && [ ${#TLS_FLAGS[@]} -eq 0 ]; then
		sed -i '/^tls:/,/insecureHTTP/d' "$cfg" # a build without TLS knows no tls key
	fi
	log "[apiserver] starting $BIN --config $cfg --kubeconfig ... on $url (log: $logf)"
	KRF_CONFORMANCE_PASSWORD=$RF_PASS "$BIN" --config "$cfg" --kubeconfig "$kubeconfig" \
		--namespace kubevirt-redfish >"$logf" 2>&1 &
	pid=$!
	PIDS+=("$pid")
	if ! wait_redfish "$url" "$pid" "$logf"; then
		REPORT+=("== apiserver: ERROR: the server did not start (see $logf)")
		stop_pid "$pid"
		stop_pid "$envpid"
		bump 3
		return
	fi
	run_validators apiserver "$url"
	stop_pid "$pid"
	stop_pid "$envpid"
}

T_ALL=$SECONDS
for b in "${BACKENDS[@]}"; do
	"run_$b"
done

echo
echo "kubevirt-redfish conformance ($(git log -1 --format='%h' 2>/dev/null)$([ -n "$(git status --porcelain -- pkg cmd 2>/dev/null)" ] && echo ', uncommitted changes in pkg/ cmd/'); $((SECONDS - T_ALL))s; reports in $CONFORMANCE_OUT)"
[ -n "$RPV_IGNORE" ] && echo "RPV_IGNORE=$RPV_IGNORE"
[ -n "$RIV_IGNORE" ] && echo "RIV_IGNORE=$RIV_IGNORE"
printf '%s\n' "${REPORT[@]}"
exit "$STATUS"
