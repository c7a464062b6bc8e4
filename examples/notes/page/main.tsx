/**
 * The notes page: sign up or sign in with a password, add notes with a body, a live list of the
 * tenant's notes, a search box with highlighted matches and tag facets, a delete button behind the
 * `delete-notes` flag, and the tenant's word count (an aggregate) beside an expectation's status.
 * Same origin as the app, so the `fw:session` cookie rides on the WebSocket upgrade: no
 * `authHeaders` needed (a page on another origin would pass them, see docs/client.md).
 *
 * Nothing here sets HTML: every piece of data (titles, bodies, highlights) becomes text nodes, and
 * the page's policy allows no inline script or style (the stylesheet is `page/style.css`).
 */
import { useEffect, useState } from "react"
import { createRoot } from "react-dom/client"
import { mount } from "@fw/framework/client"
import { useConnection, useFlag, useMutation, useQuery, useSearch } from "@fw/framework/react"
import { searchErrors } from "@fw/framework/search/errors"
import type { Note, Tag } from "../contracts.js"
import { addNote, deleteNote, listNotes, me, noteStats } from "../contracts.js"

// With the search errors, a failed search arrives with its own tag (`SearchQueryInvalid`, ...).
const fw = mount({ apis: { notes: { url: "/rpc" } }, errors: searchErrors })
const api = fw.apis.notes

const tags: ReadonlyArray<Tag> = ["idea", "todo", "reference"]

/** Posts credentials as JSON; on success the page starts again (the socket authenticated before the cookie existed). */
const postCredentials = async (path: string, body: Record<string, string>, fail: (message: string) => void) => {
  const response = await fetch(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
  if (!response.ok) return fail(((await response.json()) as { message: string }).message)
  location.reload()
}

const SignIn = () => {
  const [email, setEmail] = useState("")
  const [password, setPassword] = useState("")
  const [error, setError] = useState<string | undefined>(undefined)
  return (
    <form id="login" className="card" onSubmit={(e) => { e.preventDefault(); void postCredentials("/login", { email, password }, setError) }}>
      <h2>Sign in</h2>
      <label>Email <input id="email" type="email" autoComplete="username" value={email} onChange={(e) => setEmail(e.target.value)} /></label>
      <label>Password <input id="password" type="password" autoComplete="current-password" value={password} onChange={(e) => setPassword(e.target.value)} /></label>
      <button type="submit">Sign in</button>
      {error !== undefined && <p id="login-error" className="error" role="alert">{error}</p>}
    </form>
  )
}

const SignUp = () => {
  const [name, setName] = useState("")
  const [email, setEmail] = useState("")
  const [password, setPassword] = useState("")
  const [error, setError] = useState<string | undefined>(undefined)
  return (
    <form id="signup" className="card" onSubmit={(e) => { e.preventDefault(); void postCredentials("/signup", { name, email, password }, setError) }}>
      <h2>Create an account</h2>
      <label>Name <input id="signup-name" autoComplete="name" value={name} onChange={(e) => setName(e.target.value)} /></label>
      <label>Email <input id="signup-email" type="email" autoComplete="username" value={email} onChange={(e) => setEmail(e.target.value)} /></label>
      <label>Password <input id="signup-password" type="password" autoComplete="new-password" minLength={8} value={password} onChange={(e) => setPassword(e.target.value)} /></label>
      <button type="submit">Create account</button>
      <p className="hint">You get a workspace of your own.</p>
      {error !== undefined && <p id="signup-error" className="error" role="alert">{error}</p>}
    </form>
  )
}

const AddNote = () => {
  const add = useMutation(api, addNote)
  const [title, setTitle] = useState("")
  const [body, setBody] = useState("")
  const [tag, setTag] = useState<Tag>("idea")
  return (
    <form
      id="add-form"
      className="card compose"
      onSubmit={(event) => {
        event.preventDefault()
        add.mutate({ title, body, tag })
        setTitle("")
        setBody("")
      }}
    >
      <input id="title" aria-label="Title" placeholder="Title" value={title} onChange={(e) => setTitle(e.target.value)} />
      <textarea id="body" aria-label="Body" placeholder="Write something…" rows={3} value={body} onChange={(e) => setBody(e.target.value)} />
      <div className="row">
        <select id="tag" aria-label="Tag" value={tag} onChange={(e) => setTag(e.target.value as Tag)}>
          {tags.map((t) => <option key={t}>{t}</option>)}
        </select>
        <button id="add" type="submit" disabled={add.status === "pending" || title.trim() === ""}>Add note</button>
        {add.error !== undefined && <span className="error">{add.error._tag}</span>}
      </div>
    </form>
  )
}

const NoteItem = ({ note, onDelete }: { note: Note; onDelete: (() => void) | undefined }) => (
  <li className="note" data-id={note.id}>
    <div className="note-head">
      <span className="title">{note.title}</span>
      <span className={`chip ${note.tag}`}>{note.tag}</span>
    </div>
    {note.body !== "" && <p className="body">{note.body}</p>}
    <div className="meta">
      <span>{note.author} · {new Date(note.createdAt).toLocaleString()}</span>
      {onDelete !== undefined && <button className="delete" onClick={onDelete}>Delete</button>}
    </div>
  </li>
)

const NoteList = () => {
  const notes = useQuery(api, listNotes, {})
  // Flag-gated: the button shows only while `delete-notes` is on for this user, and a toggle on
  // the dashboard re-renders the page. The server refuses the call itself when it is off.
  const canDelete = useFlag(api, "delete-notes")
  const remove = useMutation(api, deleteNote)
  if (notes.status === "error") return <p id="notes-error" className="error">{notes.error?._tag}</p>
  return (
    <section aria-labelledby="notes-heading">
      <h2 id="notes-heading">Notes {canDelete && <small id="delete-enabled" className="badge">delete enabled</small>}</h2>
      {notes.data?.length === 0 && <p className="hint">No notes yet.</p>}
      <ul id="notes">
        {(notes.data ?? []).map((note) => (
          <NoteItem key={note.id} note={note} onDelete={canDelete ? () => remove.mutate({ id: note.id }) : undefined} />
        ))}
      </ul>
    </section>
  )
}

/** The tenant's word count (the `words-per-tenant` aggregate) and the `notes-have-bodies` expectation. */
const Stats = () => {
  const stats = useQuery(api, noteStats, {})
  if (stats.data === undefined) return null
  const { bodies, notes, words } = stats.data
  const percent = (share: number) => `${Math.round(share * 100)}%`
  return (
    <section id="stats" className="stats" aria-label="Figures">
      <div className="figure"><span id="words" className="value">{words}</span> words in {notes} notes</div>
      <div id="bodies" className="check" data-status={bodies.status}>
        <span className="dot" aria-hidden="true" />
        Notes have bodies: <strong>{bodies.status}</strong>
        {bodies.rate !== null && <span className="hint"> {percent(bodies.rate)} empty across the app, at most {percent(bodies.maxRate)}</span>}
      </div>
    </section>
  )
}

// Private-use characters as the highlight tags: they cannot be confused with markup, and the page
// splits on them instead of parsing HTML.
const pre = "\uE000"
const post = "\uE001"
const searchOptions = { facets: ["tag"], highlight: { fields: ["title", "body"], preTag: pre, postTag: post } }

const entities: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: "\"", apos: "'" }
/** Undoes the HTML escaping the server applied to a highlighted field (the result becomes a text node). */
const unescape = (text: string) =>
  text.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/giu, (whole, name: string) => {
    if (!name.startsWith("#")) return entities[name] ?? whole
    const code = name[1] === "x" || name[1] === "X" ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10)
    return code <= 0x10ffff ? String.fromCodePoint(code) : whole
  })

/** A highlighted field as text and `<mark>` elements, built from the markers (never as HTML). */
const Highlighted = ({ text, className }: { text: string; className: string }) => {
  const parts = text.split(pre).flatMap((chunk, i) => {
    if (i === 0) return [{ text: chunk, marked: false }]
    const end = chunk.indexOf(post)
    return end < 0 ? [{ text: chunk, marked: true }] : [{ text: chunk.slice(0, end), marked: true }, { text: chunk.slice(end + post.length), marked: false }]
  })
  return (
    <span className={className}>
      {parts.map((part, i) => part.marked ? <mark key={i}>{unescape(part.text)}</mark> : unescape(part.text))}
    </span>
  )
}

/**
 * Search: `useSearch` runs again whenever the text, the chosen tag or the notes change (results
 * are not live; the index follows the table a moment after each commit).
 */
const Search = () => {
  const notes = useQuery(api, listNotes, {})
  const [q, setQ] = useState("")
  const [tag, setTag] = useState<string | undefined>(undefined)
  const search = useSearch(api, "notes", searchOptions)
  const { run } = search
  useEffect(() => {
    run(q, { filters: tag === undefined ? [] : [{ field: "tag", op: "eq", value: tag }] })
  }, [run, q, tag, notes.data])
  const ran = search.q !== undefined
  return (
    <section aria-labelledby="search-heading">
      <h2 id="search-heading">Search</h2>
      <input id="search" type="search" aria-label="Search notes" placeholder="Search titles and bodies" value={q} onChange={(e) => setQ(e.target.value)} />
      <div className="facets" id="facets" role="group" aria-label="Filter by tag">
        {Object.entries(search.facets.tag ?? {}).map(([value, count]) => (
          <button key={value} data-tag={value} aria-pressed={tag === value} onClick={() => setTag(tag === value ? undefined : value)}>
            {value} ({count})
          </button>
        ))}
      </div>
      {search.error !== undefined && <p className="error">{search.error._tag}</p>}
      <p id="found" className="hint" aria-live="polite">{ran ? `${search.found} found` : ""}</p>
      <ul id="results">
        {search.hits.map((hit) => (
          <li key={String(hit.doc.id)}>
            <Highlighted className="title" text={hit.highlights?.title ?? String(hit.doc.title)} />
            <Highlighted className="body" text={hit.highlights?.body ?? String(hit.doc.body ?? "")} />
          </li>
        ))}
      </ul>
    </section>
  )
}

const connectionLabels: Record<string, string> = { open: "live", connecting: "connecting…", reconnecting: "reconnecting…" }

const App = () => {
  const who = useQuery(api, me, {})
  const connection = useConnection(api)
  // While reconnecting `data` keeps the last answer: the page stays as it was.
  if (who.data === undefined) return <p id="status" className="hint">{who.status === "error" ? who.error?._tag : connection.status}</p>
  if (who.data === null) {
    return (
      <main>
        <header><h1>Notes</h1></header>
        <div className="auth"><SignIn /><SignUp /></div>
      </main>
    )
  }
  const logout = () => fetch("/logout", { method: "POST" }).then(() => location.reload())
  return (
    <main>
      <header>
        <h1>Notes</h1>
        <p id="who">
          {who.data.name} <span className="hint">({who.data.tenantId})</span>
          <span id="connection" className="connection" data-status={connection.status} title="connection to the server">
            {connectionLabels[connection.status] ?? connection.status}
          </span>
          <button id="logout" className="quiet" onClick={logout}>Sign out</button>
        </p>
      </header>
      <Stats />
      <AddNote />
      <div className="columns">
        <NoteList />
        <Search />
      </div>
    </main>
  )
}

createRoot(document.getElementById("root")!).render(<App />)
