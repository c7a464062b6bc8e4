/**
 * The house rule for imports (checked by `npm run check:deps`, part of `npm test`):
 *   kernel ← app ← areas ← server ← src/index.ts
 * with no import circles, and `client` importing definitions (app, kernel) only. What the client
 * loads at run time is checked separately by `.dependency-cruiser-client.cjs`.
 */
const areas = "(auth|http|history|saml|search|flags|aggregates|standing|inspect)"

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "no-circular",
      severity: "error",
      comment: "No import circles anywhere in src/ (type-only imports included).",
      from: { path: "^src/" },
      to: { circular: true }
    },
    {
      name: "kernel-is-the-ground",
      severity: "error",
      comment: "The kernel imports nothing of the framework above it.",
      from: { path: "^src/kernel/" },
      to: { path: "^src/", pathNot: "^src/kernel/" }
    },
    {
      name: "pg-client-only-in-its-driver",
      severity: "error",
      comment: "Only kernel/drivers/pg/ loads PostgreSQL's client packages (an optional peer); elsewhere they are named in types only.",
      from: { path: "^src/", pathNot: "^src/kernel/drivers/pg/" },
      to: { path: "^node_modules/(pg|@effect/sql-pg)/", dependencyTypesNot: ["type-only"] }
    },
    {
      name: "sqlite-client-only-in-its-driver",
      severity: "error",
      comment: "Only kernel/drivers/sqlite/ loads SQLite's client packages; elsewhere they are named in types only.",
      from: { path: "^src/", pathNot: "^src/kernel/drivers/sqlite/" },
      to: { path: "^node_modules/(better-sqlite3|@effect/sql-sqlite-node)/", dependencyTypesNot: ["type-only"] }
    },
    {
      name: "drivers-below-changes",
      severity: "error",
      comment: "A driver runs statements; change delivery (kernel/changes/) is built on the drivers, never the other way.",
      from: { path: "^src/kernel/drivers/" },
      to: { path: "^src/kernel/changes/" }
    },
    {
      name: "tiers-apart",
      severity: "error",
      comment: "One tier's driver knows nothing of another's; drivers/sql/ is what SQLite's and PostgreSQL's share (and dispatches to them).",
      from: { path: "^src/kernel/drivers/(memory|sqlite|pg)/" },
      to: { path: "^src/kernel/drivers/", pathNot: "^src/kernel/drivers/($1|sql)/" }
    },
    {
      name: "tier-insides-in-the-kernel",
      severity: "error",
      comment: "Outside the kernel, the tiers are reached through the Store (and drivers/sql/ for the SQL failure reading), never a tier's insides.",
      from: { path: "^src/", pathNot: "^src/kernel/" },
      to: { path: "^src/kernel/drivers/(memory|sqlite|pg)/" }
    },
    {
      name: "app-only-on-kernel",
      severity: "error",
      comment: "app (definitions and the procedure runtime) builds on the kernel only.",
      from: { path: "^src/app/" },
      to: { path: "^src/", pathNot: "^src/(app|kernel)/" }
    },
    {
      name: "areas-below-the-server",
      severity: "error",
      comment: "An area never imports the server, the client or the package entry: it contributes, the server collects.",
      from: { path: `^src/${areas}/` },
      to: { path: "^src/(server|client|react)/|^src/index\\.ts$" }
    },
    {
      name: "server-below-the-entry",
      severity: "error",
      comment: "The server is assembled from the floors below it; only src/index.ts sits above it.",
      from: { path: "^src/server/" },
      to: { path: "^src/(client|react)/|^src/index\\.ts$" }
    },
    {
      name: "openfeature-web-only-client",
      severity: "error",
      comment: "The OpenFeature web provider runs in the browser: it loads the client (and definitions), never an area or the server.",
      from: { path: "^src/openfeature/(web|WebProvider)\\.ts$" },
      to: { path: "^src/", pathNot: "^src/(app|kernel|client)/|^src/openfeature/(web|WebProvider)\\.ts$" }
    },
    {
      name: "openfeature-server-below-the-server",
      severity: "error",
      comment: "The OpenFeature server provider reads the flags area; like an area it never imports the server, the client or the entry.",
      from: { path: "^src/openfeature/" },
      to: { path: "^src/(server|react)/|^src/index\\.ts$" }
    },
    {
      name: "client-only-definitions",
      severity: "error",
      comment: "The browser client imports definitions (app, kernel) and itself, nothing else of src/.",
      from: { path: "^src/(client|react)/" },
      to: { path: "^src/", pathNot: "^src/(app|kernel|client|react)/" }
    }
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.src.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "types", "default"] }
  }
}
