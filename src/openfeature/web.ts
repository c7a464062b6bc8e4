/**
 * `@fw/framework/openfeature/web`: fw flags through `@openfeature/web-sdk` (an optional peer)
 * in the browser, over the client's live flag set. Loads the client and the web SDK only.
 */
export { FwWebProvider } from "./WebProvider.js"
