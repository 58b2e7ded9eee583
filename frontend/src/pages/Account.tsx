import { useState } from 'react'
import { Link, useNavigate } from 'react-router'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { ApiError } from '../lib/api'
import { endpoints } from '../lib/endpoints'
import type { BrowserSession } from '../lib/types'
import { ago, dateTime } from '../lib/format'
import { USER_KEY, useUser } from '../session'
import { ActionsHeader, Empty, Field, FormError, Notice, QueryView, useSubmit } from '../components/ui'
import { keys } from '../lib/keys'

const SESSIONS_KEY = keys.sessions()

export default function Account() {
  const user = useUser()
  return (
    <section>
      <h1>Your account</h1>
      {user.data && (
        <dl className="summary">
          <div>
            <dt>Username</dt>
            <dd data-testid="account-username">{user.data.username}</dd>
          </div>
          <div>
            <dt>Email</dt>
            <dd data-testid="account-email">{user.data.email}</dd>
          </div>
          {user.data.is_admin && (
            <div>
              <dt>Role</dt>
              <dd>platform admin</dd>
            </div>
          )}
        </dl>
      )}
      <ChangePassword />
      <Sessions />
      <h2>Personal access tokens</h2>
      <p>
        Git, the CLI and scripts sign in with tokens. <Link to="/settings/tokens">Manage your tokens</Link>.
      </p>
    </section>
  )
}

function ChangePassword() {
  const qc = useQueryClient()
  const [form, setForm] = useState({ current_password: '', new_password: '' })
  const [done, setDone] = useState(false)
  const { submit, busy, error } = useSubmit(async () => {
    setDone(false)
    await endpoints.user.password(form)
    setForm({ current_password: '', new_password: '' })
    setDone(true)
    qc.invalidateQueries({ queryKey: SESSIONS_KEY })
  })
  const fieldError = (f: string) => (error instanceof ApiError && error.field === f ? error.message : undefined)
  const set = (k: keyof typeof form) => (e: { target: { value: string } }) => setForm({ ...form, [k]: e.target.value })
  return (
    <form onSubmit={submit} className="card">
      <h2>Change password</h2>
      {done && <Notice kind="success">Password changed. Your other sessions were signed out.</Notice>}
      <div className="grid2">
        <Field label="Current password" error={fieldError('current_password')}>
          {(id, d) => (
            <input id={id} type="password" autoComplete="current-password" required value={form.current_password} onChange={set('current_password')} aria-describedby={d} />
          )}
        </Field>
        <Field label="New password" hint="At least 10 characters; not a common password, nor your username." error={fieldError('new_password')}>
          {(id, d) => (
            <input id={id} type="password" autoComplete="new-password" required minLength={10} maxLength={256} value={form.new_password} onChange={set('new_password')} aria-describedby={d} />
          )}
        </Field>
      </div>
      {!(error instanceof ApiError && error.field) && <FormError error={error} />}
      <button type="submit" disabled={busy}>
        {busy ? 'Changing…' : 'Change password'}
      </button>
    </form>
  )
}

function Sessions() {
  const qc = useQueryClient()
  const navigate = useNavigate()
  const sessions = useQuery({ queryKey: SESSIONS_KEY, queryFn: async () => (await endpoints.user.sessions.list()).items })
  const revoke = useMutation({
    mutationFn: (s: BrowserSession) => endpoints.user.sessions.revoke(s.id),
    onSuccess: (_, s) => {
      if (s.current) {
        // This browser signed itself out: leave as the header's "Sign out" does.
        qc.clear()
        qc.setQueryData(USER_KEY, null)
        navigate('/login')
      } else qc.invalidateQueries({ queryKey: SESSIONS_KEY })
    },
  })
  return (
    <>
      <h2>Sessions</h2>
      <p className="muted">The browsers signed in to your account. Sign out any you do not recognise, then change your password.</p>
      <FormError error={revoke.error} />
      <QueryView q={sessions} what="Loading sessions">
        {(list) =>
          list.length === 0 ? (
            <Empty>No sessions.</Empty>
          ) : (
            <div className="tablewrap">
              <table>
                <thead>
                  <tr>
                    <th scope="col">Signed in</th>
                    <th scope="col">Last active</th>
                    <th scope="col">Expires</th>
                    <ActionsHeader />
                  </tr>
                </thead>
                <tbody>
                  {list.map((s) => (
                    <tr key={s.id} data-testid="session">
                      <td>
                        {dateTime(s.created_at)} {s.current && <strong className="badge">this browser</strong>}
                      </td>
                      <td>{ago(s.last_seen_at)}</td>
                      <td>{dateTime(s.expires_at)}</td>
                      <td>
                        <button
                          type="button"
                          className="danger small"
                          disabled={revoke.isPending}
                          onClick={() => (!s.current || confirm('Sign this browser out?')) && revoke.mutate(s)}
                        >
                          Sign out
                        </button>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )
        }
      </QueryView>
    </>
  )
}
