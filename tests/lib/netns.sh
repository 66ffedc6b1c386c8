# Two network namespaces joined by a veth pair, as two hosts on one
# Ethernet segment: the tests and benchmarks that need a real MTU (loopback's
# is 65,536) run a program in each. Sourced; needs root (or CAP_NET_ADMIN)
# and iproute2.
#
#   netns_up MTU [DELAY_MS] [LOSS_PCT]   creates them; sets NS_A, NS_B (names),
#                                        ADDR_A, ADDR_B (IPv4), NETEM (what
#                                        delay/loss was applied, or why not)
#   in_a CMD..., in_b CMD...             runs CMD in one of them
#   netns_down                           deletes both (idempotent; call it
#                                        from an EXIT trap)
#   netns_why                            after a failed netns_up: why
#   netns_cc NAME                        makes NAME both namespaces' default
#                                        TCP congestion control (every socket
#                                        in them, SDP's too); a namespace may
#                                        only default to one the host allows
#                                        (net.ipv4.tcp_allowed_congestion_control),
#                                        so NAME is allowed until netns_down
#
# Names carry the shell's PID, so parallel tests do not collide; each pair
# has its own network stack, so the addresses may repeat.

NETNS_ALLOWED="" NS_A="" NS_B="" ADDR_A=10.77.0.1 ADDR_B=10.77.0.2 NETEM="" NETNS_ERR=""

netns_why() {
    echo "$NETNS_ERR"
}

netns_up() {
    local mtu=$1 delay=${2:-0} loss=${3:-0}
    local a=uwa$$ b=uwb$$
    if ! command -v ip >/dev/null 2>&1; then
        NETNS_ERR="ip (iproute2) is not installed"
        return 1
    fi
    if ! ip netns add "$a" 2>/tmp/netns.$$.err; then
        NETNS_ERR="cannot create a network namespace: $(cat /tmp/netns.$$.err) (needs root)"
        rm -f /tmp/netns.$$.err
        return 1
    fi
    rm -f /tmp/netns.$$.err
    NS_A=$a
    ip netns add "$b" || { NETNS_ERR="ip netns add $b failed"; return 1; }
    NS_B=$b
    ip link add "v$a" type veth peer name "v$b" || { NETNS_ERR="veth: not supported"; return 1; }
    ip link set "v$a" netns "$a" && ip link set "v$b" netns "$b" || {
        NETNS_ERR="cannot move the veth ends"
        return 1
    }
    local ns dev addr
    for ns in a b; do
        if [ $ns = a ]; then
            dev=v$a addr=$ADDR_A ns=$a
        else
            dev=v$b addr=$ADDR_B ns=$b
        fi
        ip -n "$ns" link set lo up &&
            ip -n "$ns" link set "$dev" mtu "$mtu" &&
            ip -n "$ns" addr add "$addr/24" dev "$dev" &&
            ip -n "$ns" link set "$dev" up || {
            NETNS_ERR="cannot configure $dev (MTU $mtu)"
            return 1
        }
    done
    # Delay and loss need the kernel's sch_netem, which not every kernel
    # has: say so rather than fail.
    NETEM="none"
    if [ "$delay" != 0 ] || [ "$loss" != 0 ]; then
        local args=()
        [ "$delay" != 0 ] && args+=(delay "${delay}ms")
        [ "$loss" != 0 ] && args+=(loss "${loss}%")
        if tc -n "$a" qdisc add dev "v$a" root netem "${args[@]}" 2>/dev/null &&
            tc -n "$b" qdisc add dev "v$b" root netem "${args[@]}" 2>/dev/null; then
            NETEM="${args[*]} each way"
        else
            NETEM="not applied: this kernel has no sch_netem (tc netem)"
        fi
    fi
    # Usable once both ends have carrier (ping is not always installed).
    local i
    for ((i = 0; i < 50; i++)); do
        if ip -n "$a" link show "v$a" | grep -q LOWER_UP &&
            ip -n "$b" link show "v$b" | grep -q LOWER_UP; then
            return 0
        fi
        sleep 0.1
    done
    NETNS_ERR="the veth pair never came up"
    return 1
}

netns_cc() {
    local allowed ns
    allowed=$(sysctl -n net.ipv4.tcp_allowed_congestion_control) || return 1
    case " $allowed " in
    *" $1 "*) ;;
    *)
        [ -z "$NETNS_ALLOWED" ] && NETNS_ALLOWED=$allowed
        sysctl -qw net.ipv4.tcp_allowed_congestion_control="$allowed $1" 2>/dev/null
        ;;
    esac
    for ns in "$NS_A" "$NS_B"; do
        ip netns exec "$ns" sysctl -qw net.ipv4.tcp_congestion_control="$1" 2>/dev/null || {
            NETNS_ERR="congestion control $1 is not available here ($(sysctl -n net.ipv4.tcp_available_congestion_control))"
            return 1
        }
    done
}

in_a() {
    ip netns exec "$NS_A" "$@"
}

in_b() {
    ip netns exec "$NS_B" "$@"
}

netns_down() {
    # Deleting a namespace kills nothing: its processes must be gone first.
    local ns pid
    for ns in $NS_A $NS_B; do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do
            kill -9 "$pid" 2>/dev/null
        done
        ip netns del "$ns" 2>/dev/null
    done
    NS_A="" NS_B=""
    if [ -n "$NETNS_ALLOWED" ]; then
        sysctl -qw net.ipv4.tcp_allowed_congestion_control="$NETNS_ALLOWED"
        NETNS_ALLOWED=""
    fi
}
