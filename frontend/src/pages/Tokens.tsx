import { useState, type FormEvent } from 'react'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { endpoints } from '../lib/endpoints'
import type { Scope, Token } from '../lib/types'
import { useUser } from '../session'
import { ActionsHeader, CopyField, Empty, Field, FormError, Notice, QueryView, RevokeButton } from '../components/ui'
import { ago, dateTime } from '../lib/format'
import { keys } from '../lib/keys'

const SCOPES: [Scope, string][] = [
  ['repo:read', 'read repos, builds and logs; clone'],
  ['repo:write', 'push, create repos, trigger and cancel builds'],
  ['repo:status', 'set commit statuses'],
  ['repo:notes', 'comment on pull requests'],
  ['org:write', 'manage teams, members and invitations'],
  ['registry:read', 'pull images and artifacts'],
  ['registry:write', 'push images and artifacts'],
  ['billing:read', 'see billing'],
  ['billing:write', 'manage billing'],
  ['admin', 'platform administration'],
]

export default function Tokens() {
  const qc = useQueryClient()
  const user = useUser()
  const tokens = useQuery({ queryKey: keys.tokens(), queryFn: () => endpoints.user.tokens.list() })
  const [name, setName] = useState('')
  const [scopes, setScopes] = useState<Scope[]>(['repo:write'])
  const [days, setDays] = useState('90')
  const [created, setCreated] = useState<Token | null>(null)
  const create = useMutation({
    mutationFn: () => endpoints.user.tokens.create({ name, scopes, expires_in_days: days ? Number(days) : null }),
    onSuccess: (t) => {
      setCreated(t)
      setName('')
      qc.invalidateQueries({ queryKey: keys.tokens() })
    },
  })
  const revoke = useMutation({
    mutationFn: (id: number) => endpoints.user.tokens.revoke(id),
    onSuccess: () => qc.invalidateQueries({ queryKey: keys.tokens() }),
  })
  const submit = (e: FormEvent) => {
    e.preventDefault()
    create.mutate()
  }
  return (
    <section>
      <h1>Personal access tokens</h1>
      <p className="muted">Tokens let git, the CLI and scripts act as you, within their scopes. Use one as the password when git asks.</p>
      {created?.token && (
        <Notice kind="success">
          <p>
            <strong>Token “{created.name}” created.</strong> Copy it now: it is shown only once.
          </p>
          <CopyField value={created.token} label="New token" />
        </Notice>
      )}
      <form onSubmit={submit} className="card">
        <h2>New token</h2>
        <div className="grid2">
          <Field label="Name">{(id) => <input id={id} required maxLength={100} value={name} onChange={(e) => setName(e.target.value)} placeholder="laptop git" />}</Field>
          <Field label="Expires in (days)" hint="Empty: never expires.">
            {(id, d) => <input id={id} type="number" min={1} max={3650} value={days} onChange={(e) => setDays(e.target.value)} aria-describedby={d} />}
          </Field>
        </div>
        <fieldset>
          <legend>Scopes</legend>
          {SCOPES.filter(([s]) => s !== 'admin' || user.data?.is_admin).map(([s, what]) => (
            <label key={s} className="check">
              <input
                type="checkbox"
                checked={scopes.includes(s)}
                onChange={(e) => setScopes(e.target.checked ? [...scopes, s] : scopes.filter((x) => x !== s))}
              />
              <code>{s}</code> <span className="muted">{what}</span>
            </label>
          ))}
        </fieldset>
        <FormError error={create.error} />
        <button type="submit" disabled={create.isPending || scopes.length === 0}>
          {create.isPending ? 'Creating…' : 'Create token'}
        </button>
      </form>
      <h2>Your tokens</h2>
      <FormError error={revoke.error} />
      <QueryView q={tokens} what="Loading tokens">
        {(list) =>
          list.length === 0 ? (
            <Empty>No tokens yet.</Empty>
          ) : (
            <div className="tablewrap">
              <table>
                <thead>
                  <tr>
                    <th scope="col">Name</th>
                    <th scope="col">Token</th>
                    <th scope="col">Scopes</th>
                    <th scope="col">Expires</th>
                    <th scope="col">Last used</th>
                    <ActionsHeader />
                  </tr>
                </thead>
                <tbody>
                  {list.map((t) => (
                    <tr key={t.id} className={t.revoked_at ? 'dim' : ''}>
                      <td>{t.name}</td>
                      <td>
                        <code>{t.prefix}…</code>
                      </td>
                      <td>{t.scopes.join(', ')}</td>
                      <td>{t.expires_at ? dateTime(t.expires_at) : 'never'}</td>
                      <td>{ago(t.last_used_at)}</td>
                      <td>
                        <RevokeButton token={t} onRevoke={() => revoke.mutate(t.id)} />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )
        }
      </QueryView>
    </section>
  )
}
