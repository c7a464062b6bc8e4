/**
 * What the browser client loads at run time (`depcruise src/client`, type-only imports dropped as
 * the compiler drops them): never the server, SQL drivers, the Node platform or `node:` modules,
 * so `@fw/framework/client` can be bundled for a browser.
 */
const base = require("./.dependency-cruiser.cjs")

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "client-stays-browser-safe",
      severity: "error",
      comment: "Nothing the client loads may be server code, a SQL driver or the Node platform.",
      from: { path: "^src/" },
      to: { path: "^src/server/|@effect/sql|@effect/platform-node|better-sqlite3|node_modules/pg/" }
    },
    {
      name: "client-no-node-builtins",
      severity: "error",
      comment: "Nothing the client loads may import a node: module.",
      from: { path: "^src/" },
      to: { dependencyTypes: ["core"] }
    }
  ],
  options: { ...base.options, tsPreCompilationDeps: false }
}
