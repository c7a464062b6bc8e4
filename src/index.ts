/**
 * fw: an Effect-native framework for multi-tenant API apps. This entry exports the kernel
 * (tables, subjects, the store and its change tap), the app's definitions (procedures, guards,
 * plugins, the procedure runtime), the server that serves them, and the client. Areas have their
 * own entries: `@fw/framework/auth`, `/http`, `/saml`, `/history`.
 */
export * as ChangeEvent from "./kernel/changes/ChangeEvent.js"
export * as ChangeTap from "./kernel/changes/ChangeTap.js"
export * as KernelErrors from "./kernel/Errors.js"
export * as Provenance from "./kernel/changes/Provenance.js"
export * as SchemaDiffer from "./kernel/schema/SchemaDiffer.js"
export * as Store from "./kernel/store/Store.js"
export * as Subject from "./kernel/Subject.js"
export * as Telemetry from "./kernel/Telemetry.js"
export * as LogText from "./kernel/LogText.js"
export * as Table from "./kernel/schema/Table.js"
export { defineTable } from "./kernel/schema/Table.js"

export * as App from "./app/App.js"
export { defineApp } from "./app/App.js"
export * as Entry from "./server/Entry.js"
export { defineEntry } from "./server/Entry.js"
export * as Errors from "./app/Errors.js"
export * as Guard from "./app/Guard.js"
export { requireAuthenticated, requireScope } from "./app/Guard.js"
export * as Capabilities from "./app/Capabilities.js"
export * as Plugin from "./app/Plugin.js"
export { definePlugin, PluginHttpRouteResult } from "./app/Plugin.js"
export * as Procedure from "./app/Procedure.js"
export { action, mutation, query } from "./app/Procedure.js"
export * as RateLimit from "./app/RateLimit.js"
export * as Runtime from "./app/Runtime.js"
export * as Settings from "./app/Settings.js"
export * as BootServer from "./server/BootServer.js"
export * as NodeServer from "./server/NodeServer.js"
export * as Server from "./server/Server.js"
export * as Client from "./client/Client.js"
export { Inspect } from "./inspect/index.js"
