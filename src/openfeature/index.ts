/**
 * `@fw/framework/openfeature`: fw flags through OpenFeature on the server. `FwServerProvider`
 * evaluates in process for `@openfeature/server-sdk` (an optional peer); `Context` maps the
 * evaluation context to fw's Subject (`Context.fromSubject` builds one from a handler's caller).
 * The browser's provider is `@fw/framework/openfeature/web` (it never loads server code).
 */
export * as Context from "./Context.js"
export * as Reason from "./Reason.js"
export { FwServerProvider } from "./ServerProvider.js"
export type { Options, Source } from "./ServerProvider.js"
