#!/usr/bin/env bash
# Proves the package as a user gets it: `npm pack`, install the tarball with only the peers the
# README's install line names into a fresh project outside the repository, type-check the README's
# tour (extracted from the README, so the two cannot drift) and run it compiled by tsc with plain
# node (no tsx), calling it over HTTP; then `fw init` an app there and run its own `npm test`.
# Slow (the consumer install builds better-sqlite3): run by .ci/run, not by vitest.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d /tmp/fw-pack-check.XXXXXX)"
server_pid=""
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true; [ "${KEEP:-}" = 1 ] || rm -rf "$work"; }
trap cleanup EXIT
step() { echo "pack-check: $*"; }

step "npm pack (prepack builds dist/)"
tarball="$(cd "$repo" && npm pack --silent --pack-destination "$work" | tail -n 1)"
tarball="$work/$tarball"
listing="$(tar tzf "$tarball")"
grep -qx 'package/dist/index.d.ts' <<< "$listing" || { echo "pack-check: the tarball has no dist/index.d.ts"; exit 1; }
if grep -q '^package/src/' <<< "$listing"; then echo "pack-check: the tarball ships src/"; exit 1; fi

# The README's install lines, with the tarball in place of the package name.
install_lines="$(awk '/^## Install/{f=1} f&&/^npm install/{print} f&&/^## /&&!/^## Install/{exit}' "$repo/README.md")"
[ -n "$install_lines" ] || { echo "pack-check: no install line under '## Install' in README.md"; exit 1; }

app="$work/app"
mkdir -p "$app"
cd "$app"
cat > package.json <<'JSON'
{ "name": "pack-check-app", "private": true, "type": "module" }
JSON
cat > tsconfig.json <<'JSON'
{
  "compilerOptions": {
    "target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext", "strict": true,
    "skipLibCheck": true, "types": ["node"], "outDir": "build", "rootDir": "."
  },
  "include": ["main.ts"]
}
JSON
while IFS= read -r line; do
  line="${line/@fw\/framework/$tarball}"
  step "$line"
  eval "$line --no-audit --no-fund --loglevel=error"
done <<< "$install_lines"
copies="$(npm ls effect --all --parseable 2>/dev/null | sort -u)"
[ "$(wc -l <<< "$copies")" = 1 ] || { echo "pack-check: more than one copy of effect installed:"; echo "$copies"; exit 1; }

step "extract the tour from README.md"
awk '/^## A tour/{f=1} f&&/^```ts/{c=1;next} c&&/^```/{exit} c{print}' "$repo/README.md" > main.ts
[ -s main.ts ] || { echo "pack-check: no tour found in README.md"; exit 1; }
step "tsc --noEmit on the tour"
npx tsc --noEmit -p tsconfig.json

step "run the tour (compiled by tsc, plain node) and call it over HTTP"
port="$(node -e 'const s=require("net").createServer().listen(0,()=>{console.log(s.address().port);s.close()})')"
sed -i "s/port: 3000/port: $port/" main.ts
npx tsc -p tsconfig.json
SESSION_SECRET="pack-check-secret-at-least-32-characters" node build/main.js > server.log 2>&1 &
server_pid=$!
for _ in $(seq 1 60); do curl -fsS "http://127.0.0.1:$port/openapi.json" > /dev/null 2>&1 && break; sleep 0.5; done
curl -fsS "http://127.0.0.1:$port/openapi.json" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const d=JSON.parse(s);if(!d.openapi)process.exit(1);console.log("pack-check: /openapi.json",d.openapi)})' \
  || { echo "pack-check: the tour did not serve /openapi.json"; cat server.log; exit 1; }
answer="$(curl -sS -X POST -H 'content-type: application/json' --data '{"_tag":"Request","id":"1","tag":"notes.list","payload":{}}' "http://127.0.0.1:$port/rpc")"
echo "pack-check: POST /rpc notes.list -> $answer"
echo "$answer" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const [m]=JSON.parse(s);if(m?._tag!=="Exit"||m.requestId!=="1")process.exit(1)})' \
  || { echo "pack-check: POST /rpc did not answer an rpc Exit"; cat server.log; exit 1; }
kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""

if [ -f "$repo/src/server/Init.ts" ]; then
  step "fw init my-app, then its own npm test (on the packages installed above)"
  npx fw init my-app
  (cd my-app && npm test)
fi
step "ok"
