#!/usr/bin/env bash
# The descheduler runbook's three experiments as a careful engineer would type them:
# kwokctl, kubectl, helm and the descheduler binary, one command after the other, waiting
# only with kubectl's own waits. This is the plain baseline bench/run_bench.py compares the
# plugin's "suite" figure against (bring-up, chart install, positive / nodefit / pdb with
# the pdb-lister-workaround policy, teardown).
#
#   bash bench/plain_runbook.sh WORKDIR
#
# WORKDIR/inputs holds what bench/plain_baseline.py wrote from the plugin's own Python
# sources: nodes.yaml, namespace.yaml, deployment.yaml, pdb.yaml, values-first-install.yaml (the lab's
# cmdOptions), values-null-policy.yaml and values-workaround.yaml (the policy). Tools and names come from the environment (see "Inputs" below).
#
# TEARDOWN=pods-first (default, the fastest correct form) deletes the Deployment with its
# pods before `kubectl delete namespace --wait`, as the plugin does; TEARDOWN=namespace
# deletes the namespace with its pods inside (the namespace controller needs two passes).
#
# stderr carries one "[timing] STEP SECONDS (at SECONDS)" line per step and one
# "[check] ok ID" per passed check; a failed check prints "[check] FAILED ID: why" and the
# script exits 1. Whatever happens (a failure, Ctrl-C, SIGTERM) the trap deletes the
# kwokctl cluster and makes sure none of its processes is left.
set -euo pipefail

# --- Inputs ---------------------------------------------------------------------------
WORKDIR=$(cd "${1:?usage: plain_runbook.sh WORKDIR}" && pwd)
: "${KWOKCTL:?}" "${KUBECTL:?}" "${HELM:?}" "${DESCHEDULER:?}"
: "${KUBE_APISERVER:?}" "${KUBE_CONTROLLER_MANAGER:?}" "${KUBE_SCHEDULER:?}" "${KWOK:?}" "${ETCD:?}"
: "${CHART:?path of the chart .tgz}" "${STAGES:?kwok-stages.yaml}" "${AUDIT_POLICY:?audit-policy.yaml}"
: "${CLUSTER_NAME:?}" "${WORKERS:?the 3 node names in nodes.yaml, space separated}"
NS=${LAB_NAMESPACE:-descheduler-lab}          # the lab namespace
RELEASE=${RELEASE:-descheduler}               # helm release, in kube-system
RELEASE_NS=kube-system
APP=${APP:-spread-demo}                       # the runbook's Deployment and PDB
REPLICAS=${REPLICAS:-3}
POOL=${POOL_LABEL:-descheduler.example.com/pool}
POOL_VALUE=${POOL_VALUE:-rebalance-lab}
TIMEOUT=${WAIT_TIMEOUT:-60s}                  # every kubectl wait
TEARDOWN=${TEARDOWN:-pods-first}              # lab teardown: namespace | pods-first (see teardown_lab)
read -r -a NODES <<<"$WORKERS"
SRC=${NODES[0]} DST=${NODES[1]}               # label moves from the source to the target
IN=$WORKDIR/inputs
ROUNDS=$WORKDIR/rounds
mkdir -p "$ROUNDS"
exec 3>>"$WORKDIR/commands.log"               # what the tools print; stderr: timings, checks

# kwokctl gets its own workdir and never a real kubeconfig (create: "", delete: /dev/null);
# kubectl and helm always get the cluster's kubeconfig file explicitly.
export KWOK_WORKDIR=$WORKDIR/kwok
export KUBECONFIG=/dev/null
export KUBECACHEDIR=$WORKDIR/kube-cache
export HELM_CACHE_HOME=$WORKDIR/helm-cache HELM_CONFIG_HOME=$WORKDIR/helm-config HELM_DATA_HOME=$WORKDIR/helm-data
CLUSTER_DIR=$KWOK_WORKDIR/clusters/$CLUSTER_NAME
KC=$CLUSTER_DIR/kubeconfig.yaml
AUDIT_LOG=$CLUSTER_DIR/logs/audit.log
kubectl() { "$KUBECTL" --kubeconfig "$KC" "$@"; }
helm() { "$HELM" --kubeconfig "$KC" "$@"; }

# --- Timing and checks ----------------------------------------------------------------
T0=$(date +%s.%N) STEP="" STEP_T0=""
step() {  # close the running step (prints its time), then open the next one if named
  local now; now=$(date +%s.%N)
  if [[ -n $STEP ]]; then
    awk -v s="$STEP" -v a="$STEP_T0" -v b="$now" -v t="$T0" \
      'BEGIN { printf "[timing] %s %.3fs (at %.3fs)\n", s, b - a, b - t }' >&2
  fi
  STEP=${1:-} STEP_T0=$now
}
ok() { echo "[check] ok $1" >&2; }
fail() { echo "[check] FAILED $1: $2" >&2; exit 1; }
check() {  # check ID WHY-IF-FAILED TEST...
  local id=$1 why=$2; shift 2
  if "$@"; then ok "$id"; else fail "$id" "$why"; fi
}

# --- Cleanup: always delete the cluster and leave no process --------------------------
CREATED=0
cleanup() {
  local rc=$?
  trap - EXIT INT TERM ERR
  set +e
  rm -f "$ROUNDS"/*/sa.kubeconfig  # a round's token, when it was interrupted
  if ((CREATED)); then
    [[ $rc -ne 0 ]] && echo "[plain] exit $rc: deleting cluster $CLUSTER_NAME" >&2
    delete_cluster
  fi
  exit "$rc"
}
COMPONENT_PIDS=""
delete_cluster() {  # kwokctl delete; then no component may still run (checked by pid)
  local pid
  COMPONENT_PIDS=$(cat "$CLUSTER_DIR"/pids/*.pid 2>/dev/null || true)
  "$KWOKCTL" delete cluster --name "$CLUSTER_NAME" --kubeconfig /dev/null >&3 2>&3 ||
    echo "[plain] kwokctl delete cluster failed (see commands.log)" >&2
  for pid in $COMPONENT_PIDS; do
    if running "$pid"; then
      echo "[plain] component $pid survived kwokctl delete: SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  CREATED=0
}
running() {  # pid $1 is alive (not a zombie) and is one of this cluster's processes
  [[ -r /proc/$1/stat && $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) != Z ]] &&
    grep -qsF "$CLUSTER_DIR" "/proc/$1/cmdline"
}
trap cleanup EXIT
set -E  # a command failing outside a check (a wait timing out, say) names its step
trap 'echo "[check] FAILED step:${STEP:-start}: exit $? at line $(caller 0 | cut -d" " -f1,2): $BASH_COMMAND" >&2' ERR
trap 'exit 130' INT
trap 'exit 143' TERM

# --- Bring-up: the embedded cluster, exactly as the provider creates it ------------------
step bring-up.kwokctl-create
CREATED=1
# kwokctl picks free ports at creation, unsafely when two creations overlap: take the lock
# the embedded provider takes (CREATE_LOCK) when there is one.
${CREATE_LOCK:+flock "$CREATE_LOCK"} \
  "$KWOKCTL" create cluster --name "$CLUSTER_NAME" --runtime binary --kubeconfig "" \
  -c "$STAGES" \
  --kube-apiserver-binary "$KUBE_APISERVER" \
  --kube-controller-manager-binary "$KUBE_CONTROLLER_MANAGER" \
  --kube-scheduler-binary "$KUBE_SCHEDULER" \
  --kwok-controller-binary "$KWOK" \
  --etcd-binary "$ETCD" \
  --disable-qps-limits \
  --enable-crds=Logs \
  --kube-audit-policy "$AUDIT_POLICY" \
  --extra-args kwok-controller=manage-all-nodes=false \
  --extra-args kwok-controller=manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --wait 60s >&3 2>&3 || fail bring-up/kwokctl-create "kwokctl create cluster failed: $(tail -n 3 "$WORKDIR/commands.log")"

step bring-up.nodes
kubectl create -f "$IN/nodes.yaml" >&3
kubectl wait --for=condition=Ready "${NODES[@]/#/node/}" --timeout="$TIMEOUT" >&3

# --- Install: suspended and in dry run, then the workaround policy with dry run off ------
step install.preflight
can_i_evict() {  # as the chart's ServiceAccount, in the lab namespace
  kubectl auth can-i create pods --subresource=eviction -n "$NS" \
    --as="system:serviceaccount:$RELEASE_NS:$RELEASE" "$@"
}
echo "[plain] can-i evict before install: $(can_i_evict || true)" >&2

step install.helm-install
helm install "$RELEASE" "$CHART" --namespace "$RELEASE_NS" -f "$IN/values-first-install.yaml" \
  --set suspend=true --set cmdOptions.dry-run=true --wait >&3
CRONJOB=$(kubectl get cronjob -n "$RELEASE_NS" -l "app.kubernetes.io/instance=$RELEASE" \
  -o jsonpath='{.items[0].metadata.name}')
cronjob_is() {  # the live CronJob: suspended, and carrying exactly this --dry-run flag
  local got
  got=$(kubectl get cronjob "$CRONJOB" -n "$RELEASE_NS" \
    -o jsonpath='{.spec.suspend} {.spec.jobTemplate.spec.template.spec.containers[0].args}')
  [[ $got == "true "* && $got == *"\"$1\""* ]]
}
check install/suspended-dry-run "CronJob $CRONJOB not suspended with --dry-run=true" \
  cronjob_is --dry-run=true

step install.helm-upgrade-policy
helm upgrade "$RELEASE" "$CHART" --namespace "$RELEASE_NS" -f "$IN/values-first-install.yaml" \
  -f "$IN/values-null-policy.yaml" -f "$IN/values-workaround.yaml" \
  --set suspend=true --set cmdOptions.dry-run=false --wait >&3
check install/suspended-dry-run-off "CronJob $CRONJOB not suspended with --dry-run=false" \
  cronjob_is --dry-run=false
# The ConfigMap the CronJob mounts, and where: the round reads its policy from there.
CONFIGMAP=$(kubectl get cronjob "$CRONJOB" -n "$RELEASE_NS" \
  -o jsonpath='{.spec.jobTemplate.spec.template.spec.volumes[?(@.configMap)].configMap.name}')
POLICY=$(kubectl get configmap "$CONFIGMAP" -n "$RELEASE_NS" -o jsonpath='{.data.policy\.yaml}')
policy_is_workaround() {  # minPodAge 0s, PodsWithoutPDB no longer enabled, events on
  grep -q 'minPodAge: 0s' <<<"$POLICY" && ! grep -q PodsWithoutPDB <<<"$POLICY" &&
    grep -q 'evictionFailureEventNotification: true' <<<"$POLICY"
}
check install/live-policy "ConfigMap $CONFIGMAP does not hold the workaround policy" \
  policy_is_workaround
check install/can-i-evict "ServiceAccount $RELEASE may not create pods/eviction in $NS" \
  can_i_evict --quiet

# --- Lab helpers ------------------------------------------------------------------------
pods() {  # one line per lab pod: uid|node|phase|ready|deletionTimestamp
  kubectl get pods -n "$NS" -l "app=$APP" -o jsonpath='{range .items[*]}{.metadata.uid}|{.spec.nodeName}|{.status.phase}|{.status.conditions[?(@.type=="Ready")].status}|{.metadata.deletionTimestamp}{"\n"}{end}'
}
pod_names() { kubectl get pods -n "$NS" -l "app=$APP" -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort; }
uids() { pods | cut -d'|' -f1 | sort; }
pdb_field() { kubectl get pdb "$APP" -n "$NS" -o jsonpath="{.status.$1}"; }
all_on() {  # exactly REPLICAS pods, all Running and Ready on node $1
  local p; p=$(pods)
  [[ $(awk -F'|' -v n="$1" '$2 == n && $3 == "Running" && $4 == "True" && $5 == ""' <<<"$p" | wc -l) -eq $REPLICAS &&
    $(grep -c . <<<"$p") -eq $REPLICAS ]]
}
no_pending() { [[ -z $(pods | awk -F'|' '$5 == "" && ($3 == "Pending" || $2 == "")') ]]; }
audit_lines() { wc -l <"$AUDIT_LOG"; }
evictions_since() {  # the API server's eviction requests after line $1: "ns/pod code user"
  tail -n +"$(($1 + 1))" "$AUDIT_LOG" | grep '"subresource":"eviction"' |
    sed -E 's/.*"username":"([^"]*)".*"objectRef":\{[^}]*"namespace":"([^"]*)","name":"([^"]*)".*"code":([0-9]+).*/\2\/\3 \4 \1/' || true
}

arrange_violation() {  # runbook: label the source, deploy, move the label, add the PDB
  # Timed in parts: the commands that make the lab state (`$exp.arrange.deploy`, `.move`,
  # `.pdb`: the lab's minimal arrange in its fastest form, one kubectl call per change and
  # kubectl's own waits; bench/floor.py's floor with arrange) apart from the checks.
  local exp=$1
  step "$exp.arrange.deploy"
  kubectl label node "$SRC" "$POOL=$POOL_VALUE" --overwrite >&3
  kubectl create -n "$NS" -f "$IN/namespace.yaml" -f "$IN/deployment.yaml" >&3
  kubectl rollout status deployment/"$APP" -n "$NS" --timeout="$TIMEOUT" >&3
  step "$exp.arrange.check-start"
  check "$exp/starts-on-source" "pods not all Ready on $SRC: $(pods | tr '\n' ';')" all_on "$SRC"
  UIDS0=$(uids)
  GEN0=$(kubectl get deployment "$APP" -n "$NS" -o jsonpath='{.metadata.generation}')
  step "$exp.arrange.move"
  kubectl label node "$DST" "$POOL=$POOL_VALUE" --overwrite >&3
  kubectl label node "$SRC" "$POOL-" >&3
  step "$exp.arrange.check-moved"
  same_pods() { [[ $(uids) == "$UIDS0" && $(kubectl get deployment "$APP" -n "$NS" -o jsonpath='{.metadata.generation}') == "$GEN0" ]]; }
  check "$exp/no-rollout" "moving the label changed the pods or the Deployment" same_pods
  check "$exp/pods-violate-affinity" "pods not all still on $SRC" all_on "$SRC"
  step "$exp.arrange.pdb"
  kubectl create -n "$NS" -f "$IN/pdb.yaml" >&3  # minAvailable 2
  kubectl wait pdb/"$APP" -n "$NS" --for=jsonpath='{.status.disruptionsAllowed}'=$((REPLICAS - 2)) \
    --timeout="$TIMEOUT" >&3
}

run_round() {  # a Job from the suspended CronJob, its pod run here as a kubelet would
  local exp=$1 job=$2 pod uid sa image server ca token rc=0 dir=$ROUNDS/$2
  step "$exp.round"
  mkdir -p "$dir/policy-dir"
  AUDIT0=$(audit_lines)
  [[ $(kubectl get cronjob "$CRONJOB" -n "$RELEASE_NS" -o jsonpath='{.spec.suspend}') == true ]] ||
    fail "$exp/cronjob-suspended" "CronJob $CRONJOB is not suspended: no round"
  step "$exp.round.schedule"  # the Job created until its pod is scheduled (part of the floor)
  kubectl create job --from=cronjob/"$CRONJOB" "$job" -n "$RELEASE_NS" >&3
  # kwok leaves the descheduler's pod alone (kwok-stages.yaml): once it is scheduled, run it.
  read -r pod uid sa image < <(kubectl wait --for=create --for=condition=PodScheduled pod \
    -l "batch.kubernetes.io/job-name=$job" -n "$RELEASE_NS" --timeout="$TIMEOUT" \
    -o jsonpath='{.metadata.name} {.metadata.uid} {.spec.serviceAccountName} {.spec.containers[0].image}{"\n"}')
  [[ -n ${image:-} ]] || fail "$exp/job-pod" "no scheduled pod for Job $job"
  step "$exp.round.prepare"  # what the pod would mount, its identity, its status Running
  # What the pod would mount and run: the policy from the ConfigMap, the CronJob's args.
  kubectl get configmap "$CONFIGMAP" -n "$RELEASE_NS" -o jsonpath='{.data.policy\.yaml}' \
    >"$dir/policy-dir/policy.yaml"
  local mount args=()
  mount=$(kubectl get cronjob "$CRONJOB" -n "$RELEASE_NS" \
    -o jsonpath='{.spec.jobTemplate.spec.template.spec.containers[0].volumeMounts[0].mountPath}')
  mapfile -t args < <(kubectl get cronjob "$CRONJOB" -n "$RELEASE_NS" \
    -o jsonpath='{range .spec.jobTemplate.spec.template.spec.containers[0].args[*]}{@}{"\n"}{end}')
  args=("${args[@]//=$mount\//=$dir/policy-dir/}")
  # The pod's identity: a token of its ServiceAccount bound to the pod, so the chart's RBAC applies.
  read -r server ca < <(kubectl config view --raw --minify --flatten \
    -o jsonpath='{.clusters[0].cluster.server} {.clusters[0].cluster.certificate-authority-data}{"\n"}')
  token=$(kubectl create token "$sa" -n "$RELEASE_NS" --duration=10m \
    --bound-object-kind=Pod --bound-object-name="$pod" --bound-object-uid="$uid")
  (umask 077; cat >"$dir/sa.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "$server", certificate-authority-data: "$ca"}}]
users: [{name: "system:serviceaccount:$RELEASE_NS:$sa", user: {token: "$token"}}]
contexts: [{name: c, context: {cluster: c, user: "system:serviceaccount:$RELEASE_NS:$sa"}}]
current-context: c
EOF
  )
  local now; now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  kubectl patch pod "$pod" -n "$RELEASE_NS" --subresource=status --type=merge -p "{\"status\":{\"phase\":\"Running\",\"startTime\":\"$now\",\"conditions\":[{\"type\":\"Initialized\",\"status\":\"True\"},{\"type\":\"ContainersReady\",\"status\":\"True\"},{\"type\":\"Ready\",\"status\":\"True\"}],\"containerStatuses\":[{\"name\":\"descheduler\",\"image\":\"$image\",\"imageID\":\"\",\"ready\":true,\"restartCount\":0,\"started\":true,\"state\":{\"running\":{\"startedAt\":\"$now\"}}}]}}" >&3
  step "$exp.round.descheduler"
  env -i PATH="$PATH" HOME="$dir" timeout --kill-after=5 120 "$DESCHEDULER" "${args[@]}" \
    --client-connection-kubeconfig="$dir/sa.kubeconfig" --bind-address=127.0.0.1 --secure-port=0 \
    >"$dir/descheduler.log" 2>&1 || rc=$?
  rm -f "$dir/sa.kubeconfig"
  step "$exp.round.finish"
  LOG=$dir/descheduler.log
  local end phase=Succeeded reason=Completed
  end=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  ((rc == 0)) || phase=Failed reason=Error
  kubectl patch pod "$pod" -n "$RELEASE_NS" --subresource=status --type=merge -p "{\"status\":{\"phase\":\"$phase\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\",\"reason\":\"PodCompleted\"},{\"type\":\"ContainersReady\",\"status\":\"False\",\"reason\":\"PodCompleted\"}],\"containerStatuses\":[{\"name\":\"descheduler\",\"image\":\"$image\",\"imageID\":\"\",\"ready\":false,\"restartCount\":0,\"started\":false,\"state\":{\"terminated\":{\"exitCode\":$rc,\"reason\":\"$reason\",\"startedAt\":\"$now\",\"finishedAt\":\"$end\"}}}]}}" >&3
  ((rc == 0)) || fail "$exp/job-completed" "descheduler exited $rc; log $LOG: $(tail -c 400 "$LOG")"
  kubectl wait --for=condition=Complete job/"$job" -n "$RELEASE_NS" --timeout="$TIMEOUT" >&3
  ok "$exp/job-completed"
  not_skipped() { grep -q '"msg":"Number of evictions/requests"' "$LOG" && ! grep -q '"msg":"Skipping descheduling cycle' "$LOG"; }
  check "$exp/round-not-skipped" "the descheduler did not run its cycle (see $LOG)" not_skipped
  EVICTIONS=$(evictions_since "$AUDIT0")
  echo "[plain] $job: eviction requests at the API server: $(tr '\n' ';' <<<"${EVICTIONS:-none}")" >&2
  no_outside() { [[ -z $(grep -v "^$NS/" <<<"$EVICTIONS" | grep -v '^$' || true) ]]; }
  check "$exp/no-eviction-outside-lab" "eviction requests outside the lab: $EVICTIONS" no_outside
}

teardown_lab() {  # the Job, the namespace (waited for), the node labels
  local exp=$1 job=$2
  step "$exp.teardown.job"
  kubectl delete job "$job" -n "$RELEASE_NS" --wait --timeout="$TIMEOUT" >&3
  step "$exp.teardown.namespace"
  if [[ $TEARDOWN == pods-first ]]; then
    # The Deployment and its pods first (foreground: --wait returns once they are gone), so
    # the namespace controller finds no pod and finishes in one pass; with pods still in it,
    # it requeues itself on the pods' 30 s grace period estimate (seconds, not milliseconds).
    kubectl delete deployment "$APP" -n "$NS" --cascade=foreground --wait --timeout="$TIMEOUT" >&3
  fi
  kubectl delete namespace "$NS" --wait --timeout="$TIMEOUT" >&3
  step "$exp.teardown.labels"
  kubectl label node "$SRC" "$DST" "$POOL-" >&3
}

log_count() { grep -c "$1" "$LOG" || true; }

# --- positive: one round moves exactly one violating pod to the target -------------------
arrange_violation positive
run_round positive descheduler-positive
step positive.assess
EVICTED=$(grep '"msg":"Evicted pod"' "$LOG" | sed -E 's/.*"pod":\{"name":"([^"]+)".*/\1/')
one_evicted() {
  [[ $(log_count '"msg":"Evicted pod"') -eq 1 && $(grep -c . <<<"$EVICTIONS") -eq 1 &&
    $EVICTIONS == "$NS/$EVICTED 201 system:serviceaccount:$RELEASE_NS:"* ]]
}
check positive/one-evicted "log evicted [$EVICTED], API server saw [$EVICTIONS]" one_evicted
by_strategy() { grep '"msg":"Evicted pod"' "$LOG" | grep -q '"strategy":"RemovePodsViolatingNodeAffinity"'; }
check positive/evicted-by-strategy "eviction not by RemovePodsViolatingNodeAffinity" by_strategy
kubectl wait --for=delete pod/"$EVICTED" -n "$NS" --timeout="$TIMEOUT" >&3
kubectl wait --for=create --for=condition=Ready pod -l "app=$APP" --field-selector "spec.nodeName=$DST" \
  -n "$NS" --timeout="$TIMEOUT" >&3
UIDS1=$(uids)
one_gone() { [[ $(comm -23 <(echo "$UIDS0") <(echo "$UIDS1") | wc -l) -eq 1 ]]; }
check positive/evicted-uid-gone "UIDs before [$UIDS0] after [$UIDS1]" one_gone
NEW=$(comm -13 <(echo "$UIDS0") <(echo "$UIDS1"))
on_target() { [[ $(grep -c . <<<"$NEW") -eq 1 && -n $(pods | awk -F'|' -v u="$NEW" -v n="$DST" '$1 == u && $2 == n && $4 == "True"') ]]; }
check positive/replacement-on-target "new pods: $(pods | grep -F "$NEW" || true)" on_target
check positive/replicas-ready "not $REPLICAS Ready pods: $(pods | tr '\n' ';')" \
  test "$(pods | awk -F'|' '$4 == "True" && $5 == ""' | wc -l)" -eq "$REPLICAS"
healthy() { (($(pdb_field currentHealthy) >= $(pdb_field desiredHealthy))); }
check positive/pdb-healthy "PDB currentHealthy < desiredHealthy" healthy
echo "[plain] positive: PDB disruptionsAllowed=$(pdb_field disruptionsAllowed)" >&2
check positive/no-pending "Pending pods: $(pods | tr '\n' ';')" no_pending
teardown_lab positive descheduler-positive

# --- nodefit: no node carries the label, nodeFit stops every candidate --------------------
arrange_violation nodefit
step nodefit.arrange.unlabel
kubectl label node "$DST" "$POOL-" >&3
step nodefit.arrange.check-unlabelled
check nodefit/no-pool-node "nodes still labelled" \
  test -z "$(kubectl get nodes -l "$POOL=$POOL_VALUE" -o name)"
run_round nodefit descheduler-negative-nodefit
step nodefit.assess
check nodefit/uids-unchanged "UIDs before [$UIDS0] after [$(uids)]" test "$(uids)" == "$UIDS0"
no_eviction() { [[ $(log_count '"msg":"Evicted pod"') -eq 0 && $(log_count '"msg":"Error evicting pod"') -eq 0 && -z $EVICTIONS ]]; }
check nodefit/no-eviction-request "eviction in the log or at the API server: [$EVICTIONS]" no_eviction
nodefit_every_pod() {  # one "does not fit on any other node" line per lab pod
  local stopped
  stopped=$(grep '"msg":"pod does not fit on any other node' "$LOG" | grep '"ExtensionPoint":"PreEvictionFilter"' |
    sed -E 's/.*"pod":\{"name":"([^"]+)".*/\1/' | sort -u)
  [[ -n $stopped && $stopped == "$(pod_names)" ]]
}
check nodefit/nodefit-stops-every-pod "not every pod stopped by nodeFit (see $LOG)" nodefit_every_pod
check nodefit/pdb-healthy "PDB currentHealthy < desiredHealthy" healthy
teardown_lab nodefit descheduler-negative-nodefit

# --- pdb: minAvailable = replicas, every eviction refused with 429 ----------------------
arrange_violation pdb
step pdb.arrange.pdb-zero
kubectl patch pdb "$APP" -n "$NS" --type=merge -p "{\"spec\":{\"minAvailable\":$REPLICAS}}" >&3
kubectl wait pdb/"$APP" -n "$NS" --for=jsonpath='{.status.disruptionsAllowed}'=0 --timeout="$TIMEOUT" >&3
step pdb.arrange.check-zero
check pdb/pdb-zero-before "disruptionsAllowed is not 0" test "$(pdb_field disruptionsAllowed)" == 0
run_round pdb descheduler-negative-pdb
step pdb.assess
check pdb/uids-unchanged "UIDs before [$UIDS0] after [$(uids)]" test "$(uids)" == "$UIDS0"
check pdb/no-eviction-succeeded "an eviction succeeded" \
  test "$(log_count '"msg":"Evicted pod"')" -eq 0 -a -z "$(grep ' 201 ' <<<"$EVICTIONS" || true)"
check pdb/no-pending "Pending pods: $(pods | tr '\n' ';')" no_pending
check pdb/pdb-still-zero "disruptionsAllowed is $(pdb_field disruptionsAllowed)" \
  test "$(pdb_field disruptionsAllowed)" == 0
refused_every_pod() {  # the log's refusals and the API server's 429s, one per lab pod
  local lab logged api
  lab=$(pod_names)
  logged=$(grep '"msg":"Error evicting pod"' "$LOG" | grep "Cannot evict pod as it would violate the pod's disruption budget" |
    sed -E 's/.*"pod":\{"name":"([^"]+)".*/\1/' | sort -u)
  api=$(awk '$2 == 429 {sub(/^[^\/]*\//, "", $1); print $1}' <<<"$EVICTIONS" | sort -u)
  [[ -n $lab && $logged == "$lab" && $api == "$lab" && $(awk '$2 != 429' <<<"$EVICTIONS" | grep -c . || true) -eq 0 ]]
}
check pdb/refused-429-per-candidate "refusals in the log / 429s [$EVICTIONS] do not cover every pod" \
  refused_every_pod
check pdb/pdb-healthy "PDB currentHealthy < desiredHealthy" healthy
teardown_lab pdb descheduler-negative-pdb

# --- Teardown ---------------------------------------------------------------------------
step teardown.helm-uninstall
helm uninstall "$RELEASE" --namespace "$RELEASE_NS" --wait >&3
step teardown.kwokctl-delete
delete_cluster
none_running() { local p; for p in $COMPONENT_PIDS; do ! running "$p" || return 1; done; }
check teardown/no-process-left "components of $CLUSTER_NAME still running ($COMPONENT_PIDS)" none_running
check teardown/cluster-dir-removed "$CLUSTER_DIR is still there" test ! -e "$CLUSTER_DIR"
step
echo "[plain] all checks passed" >&2
