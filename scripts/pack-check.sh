#!/usr/bin/env bash
# Proves the package as a user gets it: `npm pack`, install the tarball with only the peers the
# README's install line names into a fresh project outside the repository (no EBADENGINE warning),
# type-check the README's tour (extracted from the README, so the two cannot drift) under the
# README's tsconfig, without skipLibCheck (the published declarations must not need an optional
# peer a SQLite app does not install), run it compiled by tsc with plain node (no tsx) and run the
# README's curl lines against it, each answer compared with the `# …` line under it; then
# `fw init` an app there and run its own `npm test`.
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
# What the README asks of the app's tsconfig ("module": "NodeNext"), strict, and no skipLibCheck:
# every declaration the tour reaches is checked.
cat > tsconfig.json <<'JSON'
{
  "compilerOptions": { "module": "NodeNext", "strict": true, "outDir": "build", "rootDir": "." },
  "include": ["main.ts"]
}
JSON
while IFS= read -r line; do
  line="${line/@fw\/framework/$tarball}"
  step "$line"
  eval "$line --no-audit --no-fund --loglevel=warn" 2>&1 | tee -a install.log
done <<< "$install_lines"
if grep -q EBADENGINE install.log; then echo "pack-check: the install warns EBADENGINE on Node $(node --version):"; grep -A3 EBADENGINE install.log; exit 1; fi
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
step "lint the served OpenAPI documents (Redocly's recommended rules: no error, no warning)"
(cd "$repo" && node scripts/lint-openapi.mjs "http://127.0.0.1:$port/openapi.json" "http://127.0.0.1:$port/rpc/openapi.json") \
  || { echo "pack-check: the tour's OpenAPI documents do not pass the lint"; exit 1; }
step "the README's curl lines against the tour, each answer as the README shows it"
# Each printing curl line's answer on a line of its own, compared with the `# …` line under it
# (`…` stands for any text, a trailing `(status N)` is the README's note).
PORT="$port" README="$repo/README.md" node --input-type=module -e '
import { execFileSync } from "node:child_process"
import { readFileSync } from "node:fs"
const readme = readFileSync(process.env.README, "utf8")
const tour = readme.slice(readme.indexOf("## A tour"))
const block = [...tour.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]).find((text) => /curl/.test(text))
if (block === undefined) { console.error("pack-check: no curl block under ## A tour"); process.exit(1) }
const lines = block.split("\n")
const expected = lines.filter((line) => line.startsWith("# ")).map((line) => line.slice(2).replace(/\s+\(status \d+\)$/, ""))
const script = lines.filter((line) => line.trim().length > 0 && !line.startsWith("#"))
  .map((line) => line.replaceAll("localhost:3000", `127.0.0.1:${process.env.PORT}`))
  .map((line) => line.startsWith("curl ") ? `${line}; echo` : line).join("\n")
const answers = execFileSync("bash", ["-euo", "pipefail", "-c", script], { encoding: "utf8" }).split("\n").filter((line) => line.length > 0)
const escape = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
let failed = answers.length !== expected.length
expected.forEach((want, i) => {
  const ok = new RegExp(`^${want.split("…").map(escape).join(".+")}$`).test(answers[i] ?? "")
  console.log(`pack-check: ${ok ? "ok  " : "FAIL"} ${answers[i] ?? "(no answer)"}`)
  if (!ok) { failed = true; console.error(`pack-check:   expected ${want}`) }
})
process.exit(failed ? 1 : 0)
' || { echo "pack-check: the README's curl lines did not answer as the README shows"; cat server.log; exit 1; }
kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""

if [ -f "$repo/src/server/Init.ts" ]; then
  step "fw init my-app, then its own npm test (on the packages installed above)"
  npx fw init my-app
  (cd my-app && npm test)
fi
step "ok"
