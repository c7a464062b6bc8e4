/**
 * The page of the OpenFeature web provider test: the web SDK over `FwWebProvider`, signed in as
 * the test's token. `fwRead()` returns the details of a few reads; `fwChanges` collects the keys
 * of every `PROVIDER_CONFIGURATION_CHANGED`.
 */
import { OpenFeature, ProviderEvents } from "@openfeature/web-sdk"
import { mount } from "../../../src/client/index.js"
import { FwWebProvider } from "../../../src/openfeature/web.js"

interface PageGlobals {
  fwPage: { url: string; token: string }
  fwReady?: boolean
  fwChanges: Array<ReadonlyArray<string>>
  fwRead?: () => unknown
  fwFailure?: string
}
const page = globalThis as unknown as PageGlobals
page.fwChanges = []

const fw = mount({ apis: { main: { url: page.fwPage.url, authHeaders: async () => ({ authorization: `Bearer ${page.fwPage.token}` }) } } })
const client = OpenFeature.getClient()
client.addHandler(ProviderEvents.ConfigurationChanged, (details) => {
  page.fwChanges.push(details?.flagsChanged ?? [])
})
/** What the test compares: details without the SDK's frozen metadata objects. */
const plain = (details: { value: unknown; variant?: string | undefined; reason?: string | undefined; errorCode?: string | undefined }) => ({
  value: details.value,
  variant: details.variant ?? null,
  reason: details.reason ?? null,
  errorCode: details.errorCode ?? null
})
page.fwRead = () => ({
  beta: plain(client.getBooleanDetails("beta", true)),
  stable: plain(client.getBooleanDetails("stable", false)),
  theme: plain(client.getObjectDetails("theme", {})),
  unknown: plain(client.getBooleanDetails("unknown", true)),
  mismatch: plain(client.getStringDetails("stable", "fallback"))
})
OpenFeature.setProviderAndWait(new FwWebProvider(fw.apis.main)).then(
  () => { page.fwReady = true },
  (error: unknown) => { page.fwFailure = String(error) }
)
