# shellcheck shell=bash disable=SC2034 # (the settings are used by the scripts that source this)
# Shared by scripts/kube-up and scripts/kube-down (sourced, not run): the
# settings of the test cluster and small helpers. See scripts/kube-up for
# the environment variables.

kube_dir="${FLOWBOX_KUBE_DIR:-/tmp/flowbox-kube}"
kube_cache="${FLOWBOX_KUBE_CACHE:-/var/cache/flowbox/kube}"
api_port="${FLOWBOX_KUBE_API_PORT:-6443}"
pod_cidr="${FLOWBOX_KUBE_POD_CIDR:-10.244.0.0/24}"
service_cidr="${FLOWBOX_KUBE_SERVICE_CIDR:-10.96.0.0/24}"
node_name="${FLOWBOX_KUBE_NODE_NAME:-flowbox-node}"
# kubectl keeps its discovery cache here, not in ~/.kube/cache.
export KUBECACHEDIR="$kube_dir/kubectl-cache"
etcd_port=2379
etcd_peer_port=2380
# The pods' bridge, CNI network and the cgroup (in every hierarchy) under
# which the kubelet puts the pods' cgroups: <cgroup>/kubepods/...
bridge=flowbox-kube0
cni_network=flowbox-kube
cgroup_root=flowbox-kube
pause_image=flowbox.local/pause:3.10
# A RuntimeClass, and its containerd runtime, on Debian's runc 1.1: pods
# there cannot have user namespaces.
nouserns_class=flowbox-nouserns
# What the kubelet writes outside its root directory whatever its flags.
# kube-up notes which of these existed before it started; kube-down
# removes the ones that did not and only its own entries in the others.
global_paths=(/var/lib/kubelet /var/lib/kubelet/device-plugins /var/lib/kubelet/pki
	/var/log/containers /var/log/pods /var/lib/cni /var/lib/cni/results /run/netns
	/tmp/hostpath_pv)
# Kernel settings the kubelet changes at start (vm.overcommit_memory=1,
# kernel.panic=10, ...); kube-down puts back the values kube-up saw.
sysctls=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
	kernel.keys.root_maxkeys kernel.keys.root_maxbytes)
# The processes kube-up starts, in start order; kube-down stops them in the
# reverse order.
components=(etcd kube-apiserver containerd kube-controller-manager kube-scheduler kubelet)

log() { printf '== %s\n' "$*" >&2; }
die() {
	printf '%s: %s\n' "${0##*/}" "$*" >&2
	exit 1
}

# check_kube_dir refuses run directories that rm -rf must never see.
check_kube_dir() {
	case "$kube_dir" in
	*' '* | *..* | *//* | */) die "FLOWBOX_KUBE_DIR=$kube_dir: no spaces, '..', '//' or trailing '/', please" ;;
	/tmp/?* | /var/tmp/?* | /run/?* | /srv/?* | /opt/?* | /mnt/?* | /root/?* | /home/?*) ;;
	*) die "FLOWBOX_KUBE_DIR=$kube_dir: choose a directory of its own under /tmp, /var/tmp, /run, /srv, /opt, /mnt or a home directory" ;;
	esac
	# Unix sockets live in it: the path of containerd's must stay short.
	[ ${#kube_dir} -le 60 ] || die "FLOWBOX_KUBE_DIR=$kube_dir is too long (60 characters at most)"
}

# ours says whether $kube_dir was made by kube-up (it holds its marker).
ours() { [ -f "$kube_dir/.flowbox-kube" ]; }

# pid_of prints the recorded pid of a component if that process still runs
# and is the one kube-up started (its command line names the run dir).
pid_of() {
	local f="$kube_dir/pids/$1.pid" pid
	[ -f "$f" ] || return 1
	pid=$(cat "$f")
	[ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$kube_dir/" || return 1
	echo "$pid"
}

# ctr_k8s runs the built ctr (kube-up links its directory) against the
# cluster's private containerd, in the namespace the CRI plugin uses.
ctr_k8s() { "$kube_dir/containerd/bin/ctr" --address "$kube_dir/containerd/containerd.sock" --namespace k8s.io "$@"; }

# cgroup_mounts prints the mount points of every cgroup hierarchy (v1
# controllers, named ones like name=systemd, and a cgroup2 one).
cgroup_mounts() { awk '$3 == "cgroup" || $3 == "cgroup2" { print $2 }' /proc/self/mounts; }
