# Sourced by the throwaway clusters (scripts/slurm/cluster.sh,
# scripts/postgres/cluster.sh) to pick free TCP ports.

# Is anything listening on TCP port $1 (v4 or v6)? /proc avoids relying on ss.
port_busy() {
  local hex
  hex=$(printf '%04X' "$1")
  awk -v p=":$hex" 'NR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p { f = 1 }
                    END { exit !f }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
