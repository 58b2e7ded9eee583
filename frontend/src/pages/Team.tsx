import { useState } from 'react'
import { Link, useNavigate, useParams } from 'react-router'
import { useQuery } from '@tanstack/react-query'
import { seg } from '../lib/api'
import { endpoints } from '../lib/endpoints'
import type { Visibility } from '../lib/types'
import { useRole } from '../components/Layout'
import { Empty, Field, FormError, QueryView, useSubmit } from '../components/ui'
import { ago } from '../lib/format'
import { keys } from '../lib/keys'

function NewRepo({ org }: { org: string }) {
  const navigate = useNavigate()
  const [form, setForm] = useState({ name: '', visibility: 'private' as Visibility, default_branch: 'main', description: '' })
  const { submit, busy, error } = useSubmit(async () => {
    const r = await endpoints.orgs.createRepo(org, form)
    navigate(`/${seg(r.org)}/${seg(r.name)}`)
  })
  return (
    <form onSubmit={submit} className="card" aria-labelledby="newrepo-h">
      <h2 id="newrepo-h">New repo</h2>
      <div className="grid2">
        <Field label="Repo name">
          {(id) => <input id={id} name="repo" required maxLength={100} pattern="[A-Za-z0-9][A-Za-z0-9._\-]*" value={form.name} onChange={(e) => setForm({ ...form, name: e.target.value })} />}
        </Field>
        <Field label="Default branch">
          {(id) => <input id={id} required value={form.default_branch} onChange={(e) => setForm({ ...form, default_branch: e.target.value })} />}
        </Field>
        <Field label="Visibility">
          {(id) => (
            <select id={id} value={form.visibility} onChange={(e) => setForm({ ...form, visibility: e.target.value as Visibility })}>
              <option value="private">Private: team members only</option>
              <option value="public">Public: anyone may read and clone</option>
            </select>
          )}
        </Field>
        <Field label="Description">
          {(id) => <input id={id} maxLength={1000} value={form.description} onChange={(e) => setForm({ ...form, description: e.target.value })} />}
        </Field>
      </div>
      <FormError error={error} />
      <button type="submit" disabled={busy}>
        {busy ? 'Creating…' : 'Create repo'}
      </button>
    </form>
  )
}

export default function Team() {
  const { org = '' } = useParams()
  const role = useRole(org)
  const repos = useQuery({ queryKey: keys.org.repos(org), queryFn: () => endpoints.orgs.repos(org) })
  const canCreate = role === 'developer' || role === 'admin' || role === 'owner'
  return (
    <section>
      <div className="pagehead">
        <h1>{org}</h1>
        {role && <span className="muted">you are {role}</span>}
      </div>
      <h2>Repos</h2>
      <QueryView q={repos} what="Loading repos">
        {(list) =>
          list.length === 0 ? (
            <Empty>No repos yet{canCreate ? ': create the first one below.' : '.'}</Empty>
          ) : (
            <ul className="list">
              {list.map((r) => (
                <li key={r.id} className="row">
                  <span>
                    <Link to={`/${seg(r.org)}/${seg(r.name)}`}>
                      <strong>{r.name}</strong>
                    </Link>{' '}
                    <span className="tag">{r.visibility}</span> {r.archived && <span className="tag">archived</span>}
                    {r.description && <span className="muted"> — {r.description}</span>}
                  </span>
                  <span className="muted">updated {ago(r.updated_at)}</span>
                </li>
              ))}
            </ul>
          )
        }
      </QueryView>
      {canCreate && <NewRepo org={org} />}
    </section>
  )
}
