#!/usr/bin/env bash
# Checks a cluster started by scripts/kube-up end to end, in a namespace
# of its own that it deletes at the end:
#   - a PersistentVolumeClaim binds (StorageClass flowbox-hostpath, the
#     default), a pod writes into it, and a second pod reads the data back
#     after the first is deleted;
#   - a pod with hostUsers: false runs in a user namespace of its own (its
#     uid_map is not the node's) and reads and writes the same volume
#     through an ID-mapped mount (files keep their owners on disk);
#   - a pod with resources.limits.memory 64Mi sees that limit in its
#     memory cgroup; a fork bomb stops at the pod's pids.max, 1024
#     (podPidsLimit);
#   - kubectl logs and exec work (API server -> kubelet);
#   - the host reaches a pod's IP on TCP port 7070;
#   - deleting the namespace deletes the volume in /tmp/hostpath_pv.
#
#   scripts/kube/check.sh
#
# Environment:
#   FLOWBOX_KUBE_DIR           run directory of the cluster (/tmp/flowbox-kube)
#   FLOWBOX_KUBE_CHECK_IMAGE   image of the pods (default the pause image,
#                              which is a static busybox; any image with
#                              /bin/busybox works, e.g. flowbox-busybox:test
#                              loaded with FLOWBOX_KUBE_IMAGES)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=scripts/kube/lib.sh
. "$here/lib.sh"

image="${FLOWBOX_KUBE_CHECK_IMAGE:-$pause_image}"
ns=flowbox-check
kc() { "$kube_dir/bin/kubectl" --kubeconfig "$kube_dir/kubeconfig" "$@"; }
ok() { printf 'ok   %s\n' "$*" >&2; }
fail() { die "FAILED: $*"; }

# pod creates a pod in the check namespace running a shell script; $3 is
# extra YAML for the container (indented by 4), $4 for the pod's spec
# (indented by 2).
pod() {
	kc apply -n "$ns" -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
spec:
${4:-}
  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  volumes:
  - name: data
    persistentVolumeClaim:
      claimName: data
  containers:
  - name: main
    image: $image
    imagePullPolicy: Never
    command: [/bin/busybox, sh, -c, '$2']
    volumeMounts:
    - name: data
      mountPath: /data
${3:-}
EOF
}

# finished waits until pod $1 has exited and prints its logs.
finished() {
	kc wait -n "$ns" --for=jsonpath='{.status.phase}'=Succeeded "pod/$1" --timeout=60s >/dev/null ||
		fail "pod $1 did not succeed: $(kc get pod -n "$ns" "$1" -o wide 2>&1)"
	kc logs -n "$ns" "$1"
}

[ -f "$kube_dir/kubeconfig" ] || die "no cluster in $kube_dir: run scripts/kube-up first"
kc delete namespace "$ns" --ignore-not-found --wait=true >/dev/null
kc create namespace "$ns" >/dev/null
kc wait -n "$ns" --for=create serviceaccount/default --timeout=30s >/dev/null

# A claim of the default class, bound at once.
kc apply -n "$ns" -f - >/dev/null <<EOF
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 64Mi
EOF
kc wait -n "$ns" --for=jsonpath='{.status.phase}'=Bound pvc/data --timeout=60s >/dev/null ||
	fail "the claim did not bind: $(kc describe pvc -n "$ns" data)"
pv=$(kc get pvc -n "$ns" data -o 'jsonpath={.spec.volumeName}')
path=$(kc get pv "$pv" -o 'jsonpath={.spec.hostPath.path}')
ok "claim bound to $pv (class $(kc get pv "$pv" -o 'jsonpath={.spec.storageClassName}'), $path)"

# Data written by one pod survives it and is read by the next.
stamp="written-$(date +%s%N)"
pod writer "echo $stamp > /data/stamp && sync"
finished writer >/dev/null
kc delete pod -n "$ns" writer --wait=true >/dev/null
pod reader "cat /data/stamp"
[ "$(finished reader)" = "$stamp" ] || fail "the reader did not read what the writer wrote"
[ "$(cat "$path/stamp")" = "$stamp" ] || fail "the data is not in $path on the host"
ok "data written by one pod was read by the next, and is in $path"
kc delete pod -n "$ns" reader --wait=true >/dev/null

# A pod in a user namespace of its own: root there is not the node's, and
# the volume reaches it ID-mapped: it reads the node's files as their
# owners' and what it writes as root is root's on disk.
pod userns "cat /proc/self/uid_map; cat /data/stamp; echo userns > /data/userns && /bin/busybox stat -c owner=%u /data/stamp" "" "  hostUsers: false"
out=$(finished userns)
printf '%s\n' "$out" | sed 's/^/     /' >&2
map=$(printf '%s\n' "$out" | head -1 | tr -s ' ' | sed 's/^ //')
case "$map" in
"0 0 "* | "") fail "the pod with hostUsers: false has the node's uid map ($map)" ;;
"0 "*) ;;
*) fail "unexpected uid map in the pod with hostUsers: false: $map" ;;
esac
printf '%s\n' "$out" | grep -qx "$stamp" || fail "the pod in a user namespace did not read the volume"
printf '%s\n' "$out" | grep -qx "owner=0" || fail "the pod in a user namespace does not see the volume's root-owned file as root's"
[ "$(stat -c %u "$path/userns")" = 0 ] || fail "the file the pod's root wrote belongs to uid $(stat -c %u "$path/userns") on disk, not 0 (no ID-mapped mount?)"
ok "hostUsers: false: uid map '$map', the volume read and written through an ID-mapped mount"
kc delete pod -n "$ns" userns --wait=true >/dev/null

# The memory limit reaches the container's cgroup; the pod's cgroup has
# the pids limit.
pod limits "cat /proc/self/cgroup; echo limit=\$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes)" \
	"    resources:
      limits:
        memory: 64Mi"
out=$(finished limits)
printf '%s\n' "$out" | sed 's/^/     /' >&2
printf '%s\n' "$out" | grep -qx "limit=67108864" || fail "memory limit 64Mi not applied"
printf '%s\n' "$out" | grep -q ":/$cgroup_root/kubepods/" || fail "the pod is not under /$cgroup_root/kubepods"
ok "memory limit 64Mi applied (memory.limit_in_bytes 67108864), cgroup under /$cgroup_root/kubepods"
kc delete pod -n "$ns" limits --wait=true >/dev/null

# A fork bomb stops at the pod's pids limit (the host sees it in the pod
# cgroup's pids.events), and the pod keeps running.
pod bomb "(while :; do /bin/busybox sleep 600 & done) 2>/dev/null; exec /bin/busybox sleep 3600"
kc wait -n "$ns" --for=condition=Ready pod/bomb --timeout=60s >/dev/null || fail "pod bomb did not start"
uid=$(kc get pod -n "$ns" bomb -o 'jsonpath={.metadata.uid}')
cg=$(find /sys/fs/cgroup/pids/"$cgroup_root"/kubepods -maxdepth 2 -type d -name "pod$uid" | head -1)
[ -n "$cg" ] || fail "no pids cgroup for pod $uid"
[ "$(cat "$cg/pids.max")" = 1024 ] || fail "pod pids.max is $(cat "$cg/pids.max"), not 1024"
# Refused forks count in pids.events of the cgroup that forked (the
# container's, under the pod's).
refused() { cat "$cg"/pids.events "$cg"/*/pids.events | awk '$1 == "max" { n += $2 } END { print n + 0 }'; }
for _ in $(seq 1 100); do
	[ "$(refused)" -gt 0 ] && break
	sleep 0.2
done
hits=$(refused)
[ "$hits" -gt 0 ] || fail "the fork bomb never reached the pids limit"
ok "fork bomb contained: pod pids.max 1024, pids.current $(cat "$cg/pids.current"), $hits forks refused"
kc delete pod -n "$ns" bomb --wait=true >/dev/null

# kubectl logs and exec go through the kubelet; the host reaches the pod
# on TCP 7070, as the engine reaches its sandboxes' agents.
pod web "echo started; exec /bin/busybox httpd -f -p 7070 -h /"
kc wait -n "$ns" --for=condition=Ready pod/web --timeout=60s >/dev/null || fail "pod web did not start"
[ "$(kc logs -n "$ns" web)" = started ] || fail "kubectl logs: $(kc logs -n "$ns" web 2>&1)"
[ "$(kc exec -n "$ns" web -- /bin/busybox echo exec-ok)" = exec-ok ] || fail "kubectl exec failed"
ok "kubectl logs and exec work"
ip=$(kc get pod -n "$ns" web -o 'jsonpath={.status.podIP}')
# shellcheck disable=SC2016 # $1 is the inner bash's argument
timeout 5 bash -c 'exec 3<>"/dev/tcp/$1/7070" && printf "GET / HTTP/1.0\r\n\r\n" >&3 && head -1 <&3' _ "$ip" | grep -q '^HTTP/' ||
	fail "the host cannot reach $ip:7070"
ok "the host reached the pod at $ip:7070"

# Deleting the namespace deletes the claim, the volume and its directory.
kc delete namespace "$ns" --wait=true --timeout=120s >/dev/null
for _ in $(seq 1 50); do
	[ -e "$path" ] || break
	sleep 0.2
done
[ ! -e "$path" ] || fail "$path is still there after the claim was deleted"
ok "namespace deleted; the volume and $path are gone"
