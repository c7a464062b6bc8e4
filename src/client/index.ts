/**
 * `@fw/framework/client`: the browser-safe client of an fw app. `mount()` with its stores for UI
 * bindings, the typed errors a caller can get, and the Effect client (`Client.connect`) for Node
 * and Effect programs.
 */
export { mount } from "./Mount.js"
export type { MountConfig, Mounted } from "./Mount.js"
export { Api } from "./Api.js"
export type { ApiConfig, ApiOptions, HeaderRecord } from "./Api.js"
export type { Contract, Input, Output } from "./Contract.js"
export { socketUrl } from "./Socket.js"
export type { ReconnectOptions, SocketConstructor, SocketLike } from "./Socket.js"
export type { ConnectionState, LiveQuery, LiveState, Mutation, MutationState, Readable } from "./Stores.js"
export { ClientClosed, Disconnected, HeadersFailed, ProtocolError } from "./Errors.js"
export type { ClientError } from "./Errors.js"
export {
  InputInvalid,
  InternalError,
  ProcedureError,
  ProcedureFailure,
  ProcedureNotFound,
  Unauthenticated
} from "../app/Errors.js"
export type { AreaError, AreaErrorClass, WireError } from "../app/Errors.js"
export { GuardRefused } from "../app/Guard.js"
export * as Client from "./Client.js"
export * as Flags from "./Flags.js"
export * as Search from "./Search.js"
export type { CallOptions, InputOf, Options as ClientOptions, OutputOf } from "./Client.js"
export { connect, layerHttp, layerWebSocket, make } from "./Client.js"
