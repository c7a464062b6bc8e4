/**
 * Where the IdP's settings come from: its metadata document (`idp.metadataUrl`, fetched on first
 * use and every `metadataRefreshMs`), else the explicit `entryPoint` / `idpCert`. The last good
 * metadata stays in use when a refresh fails; the explicit settings are the fallback when no
 * metadata was ever read.
 */
import { HttpClient, HttpClientResponse } from "@effect/platform"
import { Effect, Option, Ref } from "effect"
import { SamlConfigInvalid, SamlIdpUnavailable } from "./Errors.js"
import * as Keys from "./Keys.js"
import * as Libraries from "./Libraries.js"
import * as Metadata from "./Metadata.js"

/** The IdP settings in force. */
export interface Idp {
  readonly entityId: string
  readonly entryPoint: string
  readonly keys: ReadonlyArray<Keys.TrustedKey>
  readonly sloUrl: string | undefined
  readonly sloResponseUrl: string | undefined
}

/** The `idp` options of the plugin (spec 2.7), plus the IdP entity id the Issuer must equal. */
export interface Options {
  readonly entryPoint?: string
  /** One certificate, or several during a rotation (PEM or base64 body). */
  readonly idpCert?: string | ReadonlyArray<string>
  /**
   * The IdP entity id, which the `Issuer` of every response must equal. With `metadataUrl` it is
   * read from the metadata (here it only picks the IdP out of an aggregate describing several);
   * required only for an explicit configuration without metadata.
   */
  readonly entityId?: string
  /** The IdP's single-logout service (redirect binding); read from the metadata when `metadataUrl` is set. */
  readonly sloUrl?: string
  readonly metadataUrl?: string
  /** Re-fetch interval of the metadata; 0 or absent disables. */
  readonly metadataRefreshMs?: number
}

/** The IdP settings, with their refresh. */
export interface IdpSource {
  readonly current: Effect.Effect<Idp, SamlIdpUnavailable, HttpClient.HttpClient>
  /** Re-reads the metadata; a failure keeps what is in force (and is logged). */
  readonly refresh: Effect.Effect<void, never, HttpClient.HttpClient>
}

const maxMetadataBytes = 1024 * 1024

const certificatesOf = (options: Options): ReadonlyArray<string> =>
  options.idpCert === undefined ? [] : typeof options.idpCert === "string" ? [options.idpCert] : options.idpCert

/**
 * Refuses (throws `SamlConfigInvalid`) an IdP configuration that cannot log anyone in: neither
 * metadata nor an explicit entry point and certificate, or an explicit configuration without
 * metadata that does not name the IdP's entity id (nothing else could tell it).
 */
export const check = (options: Options): void => {
  if (options.metadataUrl !== undefined) {
    if (!URL.canParse(options.metadataUrl)) throw new SamlConfigInvalid({ reason: `idp.metadataUrl "${options.metadataUrl}" is not an absolute URL` })
    return
  }
  if (options.entryPoint === undefined || certificatesOf(options).length === 0) {
    throw new SamlConfigInvalid({ reason: "set idp.metadataUrl, or idp.entryPoint and idp.idpCert (with idp.entityId)" })
  }
  if (options.entityId === undefined) {
    throw new SamlConfigInvalid({
      reason: "idp.entityId is required only for an explicit configuration without metadata, and this is one: " +
        "set idp.entityId to the IdP's entity id (every response's Issuer must equal it), or set idp.metadataUrl to read it from the metadata"
    })
  }
}

/**
 * Why the explicit fallback of a metadata configuration cannot be used, if it cannot: without
 * `idp.entityId` nothing says which Issuer to accept before the metadata has been read once.
 */
export const unusableFallback = (options: Options): string | undefined =>
  options.metadataUrl !== undefined && options.entryPoint !== undefined && certificatesOf(options).length > 0 && options.entityId === undefined
    ? "the explicit fallback (idp.entryPoint, idp.idpCert) cannot be used without idp.entityId, the Issuer to accept: " +
      "until the IdP metadata is first read, logins answer 503"
    : undefined

/** The explicit settings, when they are complete enough to log in with. */
const explicit = (options: Options): Idp | undefined => {
  const certificates = certificatesOf(options)
  if (options.entryPoint === undefined || options.entityId === undefined || certificates.length === 0) return undefined
  return {
    entityId: options.entityId,
    entryPoint: options.entryPoint,
    keys: certificates.map(Keys.trust),
    sloUrl: options.sloUrl,
    sloResponseUrl: undefined
  }
}

/** Builds the source; throws `SamlConfigInvalid` for an explicit certificate that does not parse. */
export const make = (options: Options): IdpSource => {
  const fallback = explicit(options)
  const metadataUrl = options.metadataUrl
  if (metadataUrl === undefined) {
    const current = fallback === undefined
      ? Effect.fail(new SamlIdpUnavailable({ detail: "set idp.metadataUrl, or idp.entryPoint, idp.entityId and idp.idpCert" }))
      : Effect.succeed(fallback)
    return { current, refresh: Effect.void }
  }
  const fromMetadata = Ref.unsafeMake(Option.none<Idp>())
  const fetchLock = Effect.unsafeMakeSemaphore(1)

  const fetch = Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const xml = yield* client.get(metadataUrl).pipe(
      Effect.flatMap(HttpClientResponse.filterStatusOk),
      Effect.flatMap((response) => response.text),
      Effect.timeout("10 seconds"),
      Effect.scoped
    )
    if (Buffer.byteLength(xml) > maxMetadataBytes) return yield* Effect.fail("the metadata document is too large")
    const metadata = yield* Libraries.load.pipe(Effect.flatMap((libraries) => Metadata.readIdp(libraries, xml, options.entityId)))
    const idp: Idp = {
      entityId: metadata.entityId,
      entryPoint: metadata.entryPoint,
      keys: yield* Effect.try(() => metadata.certificates.map(Keys.trust)),
      sloUrl: metadata.sloUrl ?? options.sloUrl,
      sloResponseUrl: metadata.sloResponseUrl
    }
    yield* Ref.set(fromMetadata, Option.some(idp))
    return idp
  })

  const refresh = fetchLock.withPermits(1)(fetch).pipe(
    Effect.tapError((error) => Effect.logWarning("SAML IdP metadata could not be read; keeping the settings in force", error)),
    Effect.ignore
  )

  const current = Effect.flatMap(Ref.get(fromMetadata), Option.match({
    onSome: Effect.succeed,
    onNone: () =>
      fetchLock.withPermits(1)(Effect.flatMap(Ref.get(fromMetadata), Option.match({ onSome: Effect.succeed, onNone: () => fetch }))).pipe(
        Effect.catchAll((error) =>
          fallback === undefined
            ? Effect.fail(new SamlIdpUnavailable({
              detail: `the IdP metadata could not be read, and ${unusableFallback(options) ?? "no explicit IdP is configured"}`
            }))
            : Effect.logWarning("SAML IdP metadata could not be read; using the explicit IdP settings", error).pipe(Effect.as(fallback))
        )
      )
  }))

  return { current, refresh }
}
