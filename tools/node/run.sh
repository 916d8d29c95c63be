#!/usr/bin/env bash
# Runs a command (`tools/node/run.sh npm test`) with the Node.js Paddock is
# made for first on PATH. The machine's own node serves when its major
# version is the one wanted; otherwise the official build is taken from the
# npm registry (package node-linux-<arch>, the same binaries as nodejs.org)
# into .node/<version>, so nothing but the registry npm already uses is
# needed. Native addons must match the node that loads them: npm builds
# them against that node's own headers (npm_config_nodedir), and a tree
# installed by another node is rebuilt once.
#
# Sourced (`. tools/node/run.sh`) it only sets PATH and npm_config_nodedir.

PADDOCK_NODE_VERSION=22.23.3
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

paddock_node_dir() {
  local want_major=${PADDOCK_NODE_VERSION%%.*}
  local have
  have=$(node -p 'process.versions.node' 2>/dev/null || true)
  if [ "${have%%.*}" = "$want_major" ]; then
    return 0
  fi
  local arch
  case "$(uname -m)" in
    x86_64) arch=x64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) echo "no Node.js $PADDOCK_NODE_VERSION package for $(uname -m); install Node.js $want_major yourself" >&2; return 1 ;;
  esac
  local dir="$root/.node/$PADDOCK_NODE_VERSION"
  if [ ! -x "$dir/bin/node" ]; then
    echo "[paddock] Node.js ${have:-(none)} found; fetching Node.js $PADDOCK_NODE_VERSION (node-linux-$arch) from the npm registry" >&2
    local tmp
    tmp=$(mktemp -d)
    # Unpacked beside its final place and renamed, so that an interrupted fetch leaves no half a node.
    (cd "$tmp" && npm pack --silent "node-linux-$arch@$PADDOCK_NODE_VERSION" >/dev/null)
    mkdir -p "$tmp/node"
    tar xzf "$tmp"/node-linux-*.tgz --strip-components=1 -C "$tmp/node"
    mkdir -p "$root/.node"
    rm -rf "$dir.partial"
    mv "$tmp/node" "$dir.partial"
    mv "$dir.partial" "$dir"
    rm -rf "$tmp"
  fi
  export PATH="$dir/bin:$PATH"
  export npm_config_nodedir="$dir"
}

paddock_node_dir || { [ "${BASH_SOURCE[0]}" = "$0" ] && exit 1; return 1; }
# turbo keys its cache on this, so that addons built for one node are not replayed for another.
PADDOCK_NODE=$(node -v)
export PADDOCK_NODE

# When run (not sourced): rebuild native addons an older node installed, then run the command.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  # The server's SQLite addon stands for all of them: loading it fails when another node built it.
  if [ -d "$root/node_modules" ] && ! (cd "$root/packages/server" && node -e "new (require('better-sqlite3'))(':memory:').close()" 2>/dev/null); then
    echo "[paddock] native modules were built for another Node.js; rebuilding them for $(node -v)" >&2
    (cd "$root" && npm rebuild --no-audit --no-fund >/dev/null)
  fi
  exec "$@"
fi
