/**
 * A browser's part in a redirect-based login, over real sockets: GETs without following
 * redirects, and a cookie jar that honours `Max-Age=0`.
 */
import { Effect } from "effect"

/** What one GET answered. */
export interface Answer {
  readonly status: number
  readonly location: string | null
  readonly setCookies: ReadonlyArray<string>
  readonly body: string
}

/** GETs `url` with `cookie` (a Cookie header value), not following redirects. */
export const get = (url: string, cookie?: string, headers: Record<string, string> = {}) =>
  Effect.promise(async (): Promise<Answer> => {
    const response = await fetch(url, { redirect: "manual", headers: cookie === undefined ? headers : { ...headers, cookie } })
    return {
      status: response.status,
      location: response.headers.get("location"),
      setCookies: response.headers.getSetCookie(),
      body: await response.text()
    }
  })

/** The Set-Cookie line for `name`, if the answer set it. */
export const setCookie = (answer: Answer, name: string) => answer.setCookies.find((line) => line.startsWith(`${name}=`))

/** A cookie jar for one site. */
export const jar = () => {
  const cookies = new Map<string, string>()
  return {
    /** Stores the cookies an answer set (and drops those it expired). */
    take: (answer: Answer) => {
      for (const line of answer.setCookies) {
        const [pair = ""] = line.split(";")
        const eq = pair.indexOf("=")
        const name = pair.slice(0, eq)
        if (/;\s*Max-Age=0(;|$)/i.test(line)) cookies.delete(name)
        else cookies.set(name, pair.slice(eq + 1))
      }
    },
    header: () => [...cookies].map(([name, value]) => `${name}=${value}`).join("; "),
    get: (name: string) => cookies.get(name),
    clear: () => cookies.clear()
  }
}
