#!/usr/bin/env bash
# Simulated hosts on one machine, for GradeML's multi-host tests ("Beyond one machine").
#
# A harness instance NAME is a private Linux bridge in the root network namespace plus N network
# namespaces ("hosts"), each joined to the bridge by a veth pair. Nothing is routed outside the
# machine: the hosts have no default route and the root namespace does not forward
# (net.ipv4.ip_forward is left untouched; see "Findings" below). See tests/hosts/README.md.
#
#   sim_hosts.sh up NAME N            create N hosts (cleans an older NAME first), print the plan
#   sim_hosts.sh info NAME            print the plan of an existing instance again
#   sim_hosts.sh exec NAME I -- CMD   run CMD on host I
#   sim_hosts.sh down NAME            remove everything of NAME (idempotent)
#
# Names (NAME: 1-8 characters of [A-Za-z0-9_-], all names stay within IFNAMSIZ = 15):
#   bridge               gmb-NAME           (root namespace, address 10.X.Y.1/24)
#   root end of host I   gmvNAME-I          (enslaved to the bridge)
#   network namespace    gm-NAME-hI         (/run/netns/gm-NAME-hI)
#   host end of host I   eth0               (inside the namespace, address 10.X.Y.(10+I)/24), plus lo
#   hostname             NAME-hI            (UTS namespace of `exec`; in the instance's /etc/hosts)
#   state                /run/grademl-sim-hosts/NAME/{plan,hosts,mnt/}
#
# Address plan: one /24 per instance, 10.X.Y.0/24 with X in 200..249 and Y in 0..255 taken from
# the cksum of NAME (deterministic); if that /24 overlaps any route or address already on the
# machine (another instance, a VPN, Docker, ...), the next one is tried (under a lock, so
# concurrent `up`s cannot take the same /24). The bridge is .1 (the root namespace: services
# there listen on it), host I is .(10+I), so at most 200 hosts per instance.
#
# `exec` runs CMD inside the host's network namespace, in a new UTS namespace (hostname NAME-hI),
# a new PID namespace (CMD's init is a small forwarding shell, /proc remounted) and a new mount
# namespace that is a slave of the root one: the same file system (files in /tmp are seen by
# every host), but in it /proc is the new PID namespace's, /sys is a sysfs of the host's network
# namespace (like `ip netns exec`; /sys/class/net shows lo and eth0, /sys/fs/cgroup is kept) and
# /etc/hosts is the instance's hosts file (the machine's /etc/hosts plus every NAME-hI and
# NAME-gw), so the hosts resolve each other by name, as torchrun's and gloo's defaults expect.
#
# Findings (checked on the development machine, kernel 6.18, iproute2 6.1, util-linux 2.38):
#   - ip_forward: not needed. Host<->host frames are switched by the bridge (layer 2) and
#     root<->host packets are local delivery on the bridge's address; ip_forward=0 there.
#   - br_netfilter: its sysctls exist and bridge-nf-call-iptables=1, so bridged IPv4 traffic
#     does go through the iptables FORWARD chain. There were no iptables tables and no iptables
#     binary, so nothing blocked. Where iptables exists (e.g. CI runners with Docker, whose
#     FORWARD policy is DROP), `up` inserts "FORWARD -i BR -o BR -j ACCEPT" and
#     "INPUT -i BR -j ACCEPT" and `down` removes them (this path was not exercised here). The
#     per-bridge nf_call_iptables option cannot turn it off: the global sysctl wins.
#   - util-linux `unshare --fork` blocks SIGINT/SIGTERM in its waiting parent and does not
#     forward them, and a PID namespace's init ignores SIGTERM without a handler. Hence `exec`
#     does its own fork: the script's process (same PID, after nsenter/unshare exec) forwards
#     signals to the namespace's init, which forwards them to CMD (PID 2 there).
#   - bash starts background commands with SIGINT/SIGQUIT ignored (no job control), which the
#     child could not undo; `env --default-signal` restores them before each hop.
set -euo pipefail

# The internal stages get an absolute path already, and stage 2b must not fork (see there).
if [[ "${1:-}" == __stage* ]]; then
  readonly SELF="${BASH_SOURCE[0]}"
else
  # shellcheck disable=SC2155
  readonly SELF="$(readlink -f "${BASH_SOURCE[0]}")"
fi
readonly STATE_ROOT=/run/grademl-sim-hosts
readonly MAX_HOSTS=200

usage() {
  cat <<'EOF'
Usage:
  sim_hosts.sh up NAME N            create N simulated hosts (1..200) for harness instance NAME
  sim_hosts.sh info NAME            print the plan of instance NAME again
  sim_hosts.sh exec NAME I -- CMD [ARGS...]
                                    run CMD on host I (0-based) of instance NAME
  sim_hosts.sh down NAME            remove instance NAME (idempotent)
  sim_hosts.sh --help

NAME: 1-8 characters of [A-Za-z0-9_-], unique per test (concurrent instances must differ).

`up` prints one line per host, "HOSTNAME ADDRESS NETNS" (e.g. "t1-h0 10.213.7.10 gm-t1-h0"),
then "bridge ADDRESS" (the root namespace's address on the instance's bridge, 10.X.Y.1; a
service listening there is reachable from every host). Host I is 10.X.Y.(10+I), /24.

`exec` runs CMD in host I's network namespace, with hostname NAME-hI (new UTS namespace), in a
new PID namespace with /proc remounted, /sys showing the host's interfaces (lo, eth0) and
/etc/hosts naming every host of the instance; the file system is otherwise the machine's.
stdin/stdout/stderr pass through; SIGTERM/SIGINT/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2 sent to the
script's process are forwarded to CMD (when stdin is a terminal, SIGINT/SIGQUIT are left to
the terminal, which sends them to CMD itself). Exit status: CMD's (128+n when killed by signal
n), 125 when the harness fails before CMD starts, 127 when CMD is not found. When CMD exits,
whatever it left running on that host (its PID namespace) is killed.

`down` kills the processes still in the instance's network namespaces (SIGTERM, then SIGKILL
after 3 s) and removes the namespaces, veths, bridge, firewall rules and state.

Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN), iproute2 and util-linux (nsenter, unshare,
setpriv, setsid, flock).
EOF
}

die() { echo "sim_hosts.sh: $*" >&2; exit 125; }
warn() { echo "sim_hosts.sh: $*" >&2; }

check_name() {
  [[ "$1" =~ ^[A-Za-z0-9_-]{1,8}$ ]] || die "bad NAME '$1' (1-8 characters of [A-Za-z0-9_-])"
}

bridge_of() { echo "gmb-$1"; }
veth_of() { echo "gmv$1-$2"; }
netns_of() { echo "gm-$1-h$2"; }
hostname_of() { echo "$1-h$2"; }

# --- address allocation ----------------------------------------------------------------------

ip2int() {
  local a b c d
  IFS=. read -r a b c d <<<"$1"
  echo $(((a << 24) | (b << 16) | (c << 8) | d))
}

# True when 10.X.Y.0/24 ($1 = "10.X.Y") overlaps a non-default route or an address of the
# root namespace (any table; the local table lists every local address).
prefix_in_use() {
  local net plen line dest rest p q m
  net=$(ip2int "$1.0")
  while read -r line; do
    set -- $line
    case "$1" in
      broadcast | local | unicast | multicast | anycast | blackhole | unreachable | prohibit | throw | nat) shift ;;
    esac
    dest=${1:-}
    [[ -z "$dest" || "$dest" == default ]] && continue
    [[ "$dest" == */* ]] || dest="$dest/32"
    rest=${dest%/*}
    plen=${dest#*/}
    [[ "$rest" =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || continue
    ((plen == 0)) && continue
    p=$(ip2int "$rest")
    ((plen < 24)) && q=$plen || q=24
    m=$(((0xffffffff << (32 - q)) & 0xffffffff))
    (((p & m) == (net & m))) && return 0
  done < <(ip -4 -o route show table all 2>/dev/null)
  return 1
}

pick_prefix() {
  local h k x y i
  h=$(printf '%s' "$1" | cksum | cut -d' ' -f1)
  for ((i = 0; i < 12800; i++)); do
    k=$(((h + i) % 12800))
    x=$((200 + k / 256))
    y=$((k % 256))
    if ! prefix_in_use "10.$x.$y"; then
      echo "10.$x.$y"
      return 0
    fi
  done
  return 1
}

# --- firewall (only where an iptables binary exists) -------------------------------------------

fw_rules() { # $1 = add|del, $2 = bridge
  command -v iptables >/dev/null 2>&1 || return 0
  local br=$2
  if [[ $1 == add ]]; then
    iptables -w -I FORWARD -i "$br" -o "$br" -j ACCEPT 2>/dev/null ||
      warn "could not add iptables FORWARD rule for $br (host-to-host traffic may be blocked)"
    iptables -w -I INPUT -i "$br" -j ACCEPT 2>/dev/null ||
      warn "could not add iptables INPUT rule for $br (host-to-root traffic may be blocked)"
  else
    while iptables -w -D FORWARD -i "$br" -o "$br" -j ACCEPT 2>/dev/null; do :; done
    while iptables -w -D INPUT -i "$br" -j ACCEPT 2>/dev/null; do :; done
  fi
  return 0
}

# --- down --------------------------------------------------------------------------------------

# Every network namespace of instance NAME, whether or not its state survived.
instance_netns() {
  local ns
  for ns in /run/netns/gm-"$1"-h*; do
    [[ -e "$ns" ]] || continue
    ns=${ns##*/}
    [[ "$ns" =~ ^gm-"$1"-h[0-9]+$ ]] && echo "$ns"
  done
  return 0
}

netns_pids() { ip netns pids "$1" 2>/dev/null || true; }

do_down() {
  local name=$1 ns pids br link deadline
  local -a all_ns
  mapfile -t all_ns < <(instance_netns "$name")
  # Processes first (a namespace with processes in it outlives `ip netns del`, and so does its veth).
  if ((${#all_ns[@]})); then
    pids=$(for ns in "${all_ns[@]}"; do netns_pids "$ns"; done)
    if [[ -n "${pids//[[:space:]]/}" ]]; then
      kill -TERM $pids 2>/dev/null || true
      deadline=$((SECONDS + 3))
      while ((SECONDS < deadline)); do
        pids=$(for ns in "${all_ns[@]}"; do netns_pids "$ns"; done)
        [[ -z "${pids//[[:space:]]/}" ]] && break
        sleep 0.1
      done
      pids=$(for ns in "${all_ns[@]}"; do netns_pids "$ns"; done)
      if [[ -n "${pids//[[:space:]]/}" ]]; then
        kill -KILL $pids 2>/dev/null || true
        sleep 0.2
      fi
    fi
    for ns in "${all_ns[@]}"; do
      ip netns del "$ns" 2>/dev/null || true
    done
  fi
  # Root ends of the veths (normally gone with their namespace) and the bridge.
  while read -r link; do
    link=${link%%@*}
    [[ "$link" =~ ^gmv"$name"-[0-9]+$ ]] && ip link del "$link" 2>/dev/null || true
  done < <(ip -o link show 2>/dev/null | awk -F': ' '{print $2}')
  br=$(bridge_of "$name")
  fw_rules del "$br"
  if ip link show "$br" >/dev/null 2>&1; then
    ip link del "$br" 2>/dev/null || true
  fi
  rm -rf "${STATE_ROOT:?}/$name"
  return 0
}

# --- up ----------------------------------------------------------------------------------------

UP_NAME=""
UP_DONE=0
up_cleanup() {
  if [[ -n "$UP_NAME" && $UP_DONE -eq 0 ]]; then
    warn "up $UP_NAME failed; removing what was created"
    do_down "$UP_NAME" || true
  fi
}

do_up() {
  local name=$1 n=$2 prefix br i ns veth host addr state
  [[ "$n" =~ ^[0-9]+$ ]] && ((n >= 1 && n <= MAX_HOSTS)) || die "N must be 1..$MAX_HOSTS, not '$n'"
  if ! ip netns add "gm-probe-$$" 2>/dev/null; then
    die "cannot create network namespaces (need root, or CAP_NET_ADMIN + CAP_SYS_ADMIN)"
  fi
  ip netns del "gm-probe-$$" 2>/dev/null || true

  do_down "$name" # a leftover instance of the same NAME
  UP_NAME=$name
  trap up_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM

  state="$STATE_ROOT/$name"
  mkdir -p "$state/mnt"
  br=$(bridge_of "$name")
  # Choose the /24 and claim it (bridge address = route) under one lock.
  exec 9>"$STATE_ROOT/.lock"
  flock -w 60 9 || die "timed out waiting for $STATE_ROOT/.lock"
  prefix=$(pick_prefix "$name") || die "no free 10.X.Y.0/24 for $name"
  ip link add "$br" type bridge stp_state 0 forward_delay 0
  ip addr add "$prefix.1/24" dev "$br"
  ip link set "$br" up
  flock -u 9
  exec 9>&-
  fw_rules add "$br"

  {
    cat /etc/hosts 2>/dev/null || echo "127.0.0.1 localhost"
    echo "# grademl simulated hosts, instance $name"
    echo "$prefix.1 $name-gw"
    for ((i = 0; i < n; i++)); do
      echo "$prefix.$((10 + i)) $(hostname_of "$name" "$i")"
    done
  } >"$state/hosts.tmp"
  mv "$state/hosts.tmp" "$state/hosts"

  : >"$state/plan.tmp"
  for ((i = 0; i < n; i++)); do
    ns=$(netns_of "$name" "$i")
    veth=$(veth_of "$name" "$i")
    host=$(hostname_of "$name" "$i")
    addr="$prefix.$((10 + i))"
    ip netns add "$ns"
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    ip link set "$veth" master "$br"
    ip link set "$veth" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
    echo "$host $addr $ns" >>"$state/plan.tmp"
  done
  echo "bridge $prefix.1" >>"$state/plan.tmp"
  mv "$state/plan.tmp" "$state/plan"
  UP_DONE=1
  trap - EXIT INT TERM
  cat "$state/plan"
}

# --- exec --------------------------------------------------------------------------------------

# Waits for $1, forwarding the signals named in the rest; returns its exit status.
forward_and_wait() {
  local child=$1 sig rc
  shift
  for sig in "$@"; do
    # shellcheck disable=SC2064 # expand now: the child and the signal are known
    trap "kill -s $sig $child 2>/dev/null || true" "$sig"
  done
  while :; do
    rc=0
    wait "$child" || rc=$?
    kill -0 "$child" 2>/dev/null || break # interrupted by a trapped signal: wait again
  done
  return "$rc"
}

do_exec() {
  local name=$1 i=$2 ns host state
  shift 2
  [[ "$i" =~ ^[0-9]+$ ]] || die "bad host index '$i'"
  [[ "${1:-}" == "--" ]] || die "usage: sim_hosts.sh exec NAME I -- CMD [ARGS...]"
  shift
  (($#)) || die "no command given"
  ns=$(netns_of "$name" "$i")
  host=$(hostname_of "$name" "$i")
  state="$STATE_ROOT/$name"
  [[ -e "/run/netns/$ns" ]] || die "no host $i in instance $name (no /run/netns/$ns; run 'up' first)"
  # nsenter and unshare both exec (no fork): stages 2 and 2b keep this process's PID.
  exec nsenter --net="/run/netns/$ns" -- \
    unshare --uts --mount --propagation slave -- \
    /bin/bash "$SELF" __stage2 "$host" "$state" -- "$@"
}

# /sys as the network namespace sees it (sysfs takes the mounting process's network namespace),
# keeping the machine's cgroup tree under /sys/fs/cgroup (GradeML reads CPU quotas there). $1 is
# an empty directory (the instance's state/mnt) on which a tmpfs private to this mount namespace
# holds the cgroup tree while /sys is replaced. (Binding it from /proc/self/fd/N, a descriptor
# opened before the sysfs mount, does not work: mount(8) canonicalizes the source path to
# /sys/fs/cgroup, which is by then the new sysfs's empty directory.)
remount_sys() {
  local mnt=$1
  [[ -d "$mnt" ]] || return 1
  mount -t tmpfs -o size=4k,mode=700 none "$mnt" || return 1
  mkdir "$mnt/cg" && mount --rbind /sys/fs/cgroup "$mnt/cg" || { umount -l "$mnt"; return 1; }
  if ! mount -t sysfs -o nosuid,nodev,noexec sysfs /sys; then
    umount -l "$mnt"
    return 1
  fi
  mount --rbind "$mnt/cg" /sys/fs/cgroup || warn "could not keep /sys/fs/cgroup"
  umount -l "$mnt" || true
  return 0
}

# Stage 2: this script's PID, in the host's network, UTS and mount namespaces: sets them up,
# then enters stage 2b with a new PID namespace for its children.
stage2() {
  local host=$1 state=$2
  shift 3
  echo "$host" >/proc/sys/kernel/hostname || die "cannot set hostname $host"
  remount_sys "$state/mnt" || warn "could not remount /sys for this network namespace; /sys is the machine's"
  if [[ -f "$state/hosts" ]]; then
    mount --bind "$state/hosts" /etc/hosts || warn "could not bind $state/hosts on /etc/hosts"
  fi
  if [[ "$(declare -p HOSTNAME 2>/dev/null)" == "declare -x"* ]]; then
    export HOSTNAME="$host"
  fi
  # unshare --pid without --fork: the PID namespace is for the children of stage 2b.
  exec unshare --pid -- /bin/bash "$SELF" __stage2b -- "$@"
}

# Stage 2b: still this script's PID, old PID namespace. Its first child becomes PID 1 of the new
# PID namespace (stage 3) and if PID 1 exits, no process can be created there any more: so
# nothing here may fork (no $(...), no external command) before stage 3 is started. Stage 3
# dies with this process (pdeathsig), and with it everything in its PID namespace.
stage2b() {
  local child
  shift
  local -a forwarded=(TERM HUP USR1 USR2)
  # shellcheck disable=SC2054 # the comma is env's syntax
  local -a launch=(env --default-signal=INT,QUIT setpriv --pdeathsig KILL --)
  if [[ -t 0 ]]; then
    # On a terminal CMD stays in the foreground process group and gets ^C/^\ from the
    # terminal directly; forwarding them too would deliver them twice.
    trap ':' INT QUIT
  else
    # Otherwise stage 3 and CMD get their own session, so that a signal to this process group
    # (e.g. from `timeout`) reaches CMD once, through the forwarding.
    forwarded+=(INT QUIT)
    launch+=(setsid)
  fi
  exec 3<&0
  "${launch[@]}" /bin/bash "$SELF" __stage3 "${forwarded[*]}" -- "$@" <&3 3<&- &
  child=$!
  exec 3<&-
  forward_and_wait "$child" "${forwarded[@]}" || exit $?
  exit 0
}

# Stage 3: PID 1 of the new PID namespace. CMD runs as its child (an init without handlers would
# ignore SIGTERM).
stage3() {
  local signals=$1 child
  shift 2
  mount -t proc -o nosuid,nodev,noexec proc /proc || { echo "sim_hosts.sh: cannot mount /proc" >&2; exit 125; }
  [[ " $signals " == *" INT "* ]] || trap ':' INT QUIT
  exec 3<&0
  env --default-signal=INT,QUIT "$@" <&3 3<&- &
  child=$!
  exec 3<&-
  # shellcheck disable=SC2086
  forward_and_wait "$child" $signals || exit $?
  exit 0
}

# --- main --------------------------------------------------------------------------------------

main() {
  local cmd=${1:-}
  case "$cmd" in
    -h | --help | help)
      usage
      ;;
    up)
      (($# == 3)) || die "usage: sim_hosts.sh up NAME N"
      check_name "$2"
      do_up "$2" "$3"
      ;;
    info)
      (($# == 2)) || die "usage: sim_hosts.sh info NAME"
      check_name "$2"
      [[ -f "$STATE_ROOT/$2/plan" ]] || die "no instance $2"
      cat "$STATE_ROOT/$2/plan"
      ;;
    exec)
      (($# >= 4)) || die "usage: sim_hosts.sh exec NAME I -- CMD [ARGS...]"
      check_name "$2"
      shift
      do_exec "$@"
      ;;
    down)
      (($# == 2)) || die "usage: sim_hosts.sh down NAME"
      check_name "$2"
      do_down "$2"
      ;;
    __stage2)
      shift
      stage2 "$@"
      ;;
    __stage2b)
      shift
      stage2b "$@"
      ;;
    __stage3)
      shift
      stage3 "$@"
      ;;
    "")
      usage >&2
      exit 2
      ;;
    *)
      echo "sim_hosts.sh: unknown command '$cmd'" >&2
      usage >&2
      exit 2
      ;;
  esac
}

main "$@"
