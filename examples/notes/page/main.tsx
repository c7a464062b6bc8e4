/**
 * The notes page: sign in with a password, a live list of the tenant's notes, a search box with
 * tag facets, and a delete button behind the `delete-notes` flag. Same origin as the app, so the
 * `fw:session` cookie rides on the WebSocket upgrade: no `authHeaders` needed (a page on another
 * origin would pass them, see docs/client.md).
 */
import { useEffect, useState } from "react"
import { createRoot } from "react-dom/client"
import { mount } from "@fw/framework/client"
import { useConnection, useFlag, useMutation, useQuery, useSearch } from "@fw/framework/react"
import { searchErrors } from "@fw/framework/search/errors"
import type { Tag } from "../contracts.js"
import { addNote, deleteNote, listNotes, me } from "../contracts.js"

// With the search errors, a failed search arrives with its own tag (`SearchQueryInvalid`, ...).
const fw = mount({ apis: { notes: { url: "/rpc" } }, errors: searchErrors })
const api = fw.apis.notes

const tags: ReadonlyArray<Tag> = ["idea", "todo", "reference"]

const Login = () => {
  const [email, setEmail] = useState("")
  const [password, setPassword] = useState("")
  const [error, setError] = useState<string | undefined>(undefined)
  const submit = async (event: { preventDefault: () => void }) => {
    event.preventDefault()
    const response = await fetch("/login", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email, password })
    })
    if (!response.ok) return setError(((await response.json()) as { message: string }).message)
    // The socket authenticated at its upgrade, before the cookie existed: start again with it.
    location.reload()
  }
  return (
    <form id="login" onSubmit={submit}>
      <input id="email" placeholder="email" value={email} onChange={(e) => setEmail(e.target.value)} />
      <input id="password" type="password" placeholder="password" value={password} onChange={(e) => setPassword(e.target.value)} />
      <button type="submit">Sign in</button>
      {error !== undefined && <p id="login-error" className="error">{error}</p>}
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
      onSubmit={(event) => {
        event.preventDefault()
        add.mutate({ title, body, tag })
        setTitle("")
        setBody("")
      }}
    >
      <input id="title" placeholder="title" value={title} onChange={(e) => setTitle(e.target.value)} />
      <input id="body" placeholder="text" value={body} onChange={(e) => setBody(e.target.value)} />
      <select id="tag" value={tag} onChange={(e) => setTag(e.target.value as Tag)}>
        {tags.map((t) => <option key={t}>{t}</option>)}
      </select>
      <button id="add" type="submit" disabled={add.status === "pending"}>Add</button>
      {add.error !== undefined && <span className="error">{add.error._tag}</span>}
    </form>
  )
}

const NoteList = () => {
  const notes = useQuery(api, listNotes, {})
  // Flag-gated: the button shows only while `delete-notes` is on for this user, and a toggle on
  // the dashboard re-renders the page. The server refuses the call itself when it is off.
  const canDelete = useFlag(api, "delete-notes")
  const remove = useMutation(api, deleteNote)
  if (notes.status === "error") return <p id="notes-error" className="error">{notes.error?._tag}</p>
  return (
    <section>
      <h2>Notes {canDelete && <small id="delete-enabled">(delete enabled)</small>}</h2>
      <ul id="notes">
        {(notes.data ?? []).map((note) => (
          <li key={note.id} data-id={note.id}>
            <span className="title">{note.title}</span>
            <span className="tag">{note.tag} · {note.author}</span>
            {canDelete && <button className="delete" onClick={() => remove.mutate({ id: note.id })}>Delete</button>}
          </li>
        ))}
      </ul>
    </section>
  )
}

/** Facets on the tag, matches in the title highlighted (the server HTML-escapes the title around our tags). */
const searchOptions = { facets: ["tag"], highlight: { fields: ["title"], preTag: "<mark>", postTag: "</mark>" } }

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
  const titles = search.hits.map((hit) => hit.highlights?.title ?? escape(String(hit.doc.title)))
  const ran = search.q !== undefined
  return (
    <section>
      <h2>Search</h2>
      <input id="search" placeholder="search notes" value={q} onChange={(e) => setQ(e.target.value)} />
      <div className="facets" id="facets">
        {Object.entries(search.facets.tag ?? {}).map(([value, count]) => (
          <button
            key={value}
            data-tag={value}
            aria-pressed={tag === value}
            onClick={() => setTag(tag === value ? undefined : value)}
          >
            {value} ({count})
          </button>
        ))}
      </div>
      {search.error !== undefined && <p className="error">{search.error._tag}</p>}
      <p id="found">{ran ? `${search.found} found` : ""}</p>
      <ul id="results">
        {titles.map((title, i) => <li key={i} dangerouslySetInnerHTML={{ __html: title }} />)}
      </ul>
    </section>
  )
}

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

const App = () => {
  const who = useQuery(api, me, {})
  const connection = useConnection(api)
  // While reconnecting `data` keeps the last answer: the page stays as it was.
  if (who.data === undefined) return <p id="status">{who.status === "error" ? who.error?._tag : connection.status}</p>
  if (who.data === null) return <Login />
  const logout = () => fetch("/logout", { method: "POST" }).then(() => location.reload())
  return (
    <main>
      <p id="who">
        Signed in as {who.data.name} ({who.data.tenantId}) <button id="logout" onClick={logout}>Sign out</button>
        <span id="connection"> {connection.status}</span>
      </p>
      <AddNote />
      <NoteList />
      <Search />
    </main>
  )
}

createRoot(document.getElementById("root")!).render(<App />)
