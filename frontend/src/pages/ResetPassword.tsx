import { useState } from 'react'
import { Link, useNavigate, useSearchParams } from 'react-router'
import { endpoints } from '../lib/endpoints'
import { Field, FormError, useSubmit } from '../components/ui'

export default function ResetPassword() {
  const [params] = useSearchParams()
  const navigate = useNavigate()
  const token = params.get('token') ?? ''
  const [password, setPassword] = useState('')
  const [confirm, setConfirm] = useState('')
  const { submit, busy, error } = useSubmit(async () => {
    if (password !== confirm) throw new Error('The two passwords differ.')
    await endpoints.auth.confirmPasswordReset({ token, password })
    navigate('/login?reset=done', { replace: true })
  })
  if (!token)
    return (
      <section className="card narrow">
        <h1>Choose a new password</h1>
        <p className="error" role="alert">
          This link has no reset token. <Link to="/forgot-password">Ask for a new link</Link>.
        </p>
      </section>
    )
  return (
    <section className="card narrow">
      <h1>Choose a new password</h1>
      <form onSubmit={submit}>
        <Field label="New password" hint="At least 10 characters.">
          {(id, d) => (
            <input id={id} type="password" autoComplete="new-password" required minLength={10} maxLength={256} value={password} onChange={(e) => setPassword(e.target.value)} aria-describedby={d} />
          )}
        </Field>
        <Field label="Repeat the new password">
          {(id) => <input id={id} type="password" autoComplete="new-password" required value={confirm} onChange={(e) => setConfirm(e.target.value)} />}
        </Field>
        <FormError error={error} />
        <button type="submit" disabled={busy}>
          {busy ? 'Saving…' : 'Set the password'}
        </button>
      </form>
      <p>
        <Link to="/forgot-password">Ask for a new link</Link>
      </p>
    </section>
  )
}
