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
# rpc over POST /rpc: `rpc TAG PAYLOAD [curl args]` prints the answer's Exit (one JSON message).
rpc() {
  local tag="$1" payload="$2"; shift 2
  curl -sS -X POST -H 'content-type: application/json' "$@" \
    --data "{\"_tag\":\"Request\",\"id\":\"1\",\"tag\":\"$tag\",\"payload\":$payload}" "http://127.0.0.1:$port/rpc"
}
# `expect_exit WANT` reads an answer on stdin: WANT is Success, or the failure's _tag.
expect_exit() {
  node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const [m]=JSON.parse(s);const want=process.argv[1]
    if(m?._tag!=="Exit"||m.requestId!=="1")process.exit(1)
    const got=m.exit._tag==="Success"?"Success":JSON.stringify(m.exit.cause).match(/"_tag":"([A-Za-z]+)"/g)?.map(t=>t.slice(8,-1)).find(t=>!["Fail","Die","Sequential","Parallel"].includes(t))
    if(got!==want){console.error("expected",want,"got",got);process.exit(1)}
    if(want==="Success")console.log(JSON.stringify(m.exit.value))})' "$1"
}
answer="$(rpc notes.list '{}')"
echo "pack-check: anonymous notes.list -> $answer"
echo "$answer" | expect_exit GuardRefused > /dev/null \
  || { echo "pack-check: an anonymous notes.list was not refused with GuardRefused"; cat server.log; exit 1; }
credentials='{"email":"ada@example.com","password":"correct horse"}'
rpc users.signup "$credentials" | expect_exit Success > /dev/null || { echo "pack-check: users.signup failed"; cat server.log; exit 1; }
rpc users.login '{"email":"ada@example.com","password":"wrong password"}' | expect_exit ProcedureFailure > /dev/null \
  || { echo "pack-check: users.login accepted a wrong password"; cat server.log; exit 1; }
session="$(rpc users.login "$credentials" | expect_exit Success | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).session))')" \
  || { echo "pack-check: users.login failed"; cat server.log; exit 1; }
rpc notes.add '{"text":"hello"}' -H "cookie: fw:session=$session" | expect_exit Success > /dev/null \
  || { echo "pack-check: notes.add after login failed"; cat server.log; exit 1; }
listed="$(rpc notes.list '{}' -H "cookie: fw:session=$session" | expect_exit Success)" \
  || { echo "pack-check: notes.list after login failed"; cat server.log; exit 1; }
echo "pack-check: after login, notes.list -> $listed"
grep -q '"text":"hello"' <<< "$listed" || { echo "pack-check: the note added after login is not listed"; exit 1; }
kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""

if [ -f "$repo/src/server/Init.ts" ]; then
  step "fw init my-app, then its own npm test (on the packages installed above)"
  npx fw init my-app
  (cd my-app && npm test)
fi
step "ok"
