/**
 * Where the IdP's settings come from: its metadata document (`idp.metadataUrl`, fetched on first
 * use and every `metadataRefreshMs`), else the explicit `entryPoint` / `idpCert`. The last good
 * metadata stays in use when a refresh fails; the explicit settings are the fallback when no
 * metadata was ever read.
 */
import { HttpClient, HttpClientResponse } from "@effect/platform"
import { Effect, Option, Ref } from "effect"
import { SamlIdpUnavailable } from "./Errors.js"
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
  /** The IdP entity id; with `metadataUrl`, it picks the IdP out of an aggregate (required when the document describes several). */
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

/** The explicit settings, when they are complete enough to log in with. */
const explicit = (options: Options): Idp | undefined => {
  const certificates = options.idpCert === undefined ? [] : typeof options.idpCert === "string" ? [options.idpCert] : options.idpCert
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
            ? Effect.fail(new SamlIdpUnavailable({ detail: "the IdP metadata could not be read and no explicit IdP is configured" }))
            : Effect.logWarning("SAML IdP metadata could not be read; using the explicit IdP settings", error).pipe(Effect.as(fallback))
        )
      )
  }))

  return { current, refresh }
}
