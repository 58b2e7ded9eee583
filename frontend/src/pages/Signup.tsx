import { useState } from 'react'
import { Link, useNavigate, useSearchParams } from 'react-router'
import { ApiError } from '../lib/api'
import { endpoints } from '../lib/endpoints'
import { useSignedIn } from '../session'
import { Field, FormError, useSubmit } from '../components/ui'
import { safeNext } from './Login'

export default function Signup() {
  const [params] = useSearchParams()
  const navigate = useNavigate()
  const signedIn = useSignedIn()
  const [form, setForm] = useState({ email: '', username: '', password: '' })
  const { submit, busy, error } = useSubmit(async () => {
    const s = await endpoints.auth.signup(form)
    signedIn(s.user, s.csrf_token)
    navigate(params.get('next') ? safeNext(params.get('next')) : '/new', { replace: true })
  })
  const fieldError = (f: string) => (error instanceof ApiError && error.field === f ? error.message : undefined)
  const set = (k: keyof typeof form) => (e: { target: { value: string } }) => setForm({ ...form, [k]: e.target.value })
  return (
    <section className="card narrow">
      <h1>Create your account</h1>
      <form onSubmit={submit}>
        <Field label="Email" error={fieldError('email')}>
          {(id, d) => <input id={id} name="email" type="email" autoComplete="email" required value={form.email} onChange={set('email')} aria-describedby={d} />}
        </Field>
        <Field label="Username" hint="1–39 letters, digits, - or _." error={fieldError('username')}>
          {(id, d) => (
            <input id={id} name="username" autoComplete="username" required pattern="[A-Za-z0-9]([A-Za-z0-9_\-]{0,37}[A-Za-z0-9])?" value={form.username} onChange={set('username')} aria-describedby={d} />
          )}
        </Field>
        <Field label="Password" hint="At least 10 characters; not a common password, nor your username." error={fieldError('password')}>
          {(id, d) => (
            <input id={id} name="password" type="password" autoComplete="new-password" required minLength={10} maxLength={256} value={form.password} onChange={set('password')} aria-describedby={d} />
          )}
        </Field>
        {!(error instanceof ApiError && error.field) && <FormError error={error} />}
        <button type="submit" disabled={busy}>
          {busy ? 'Creating…' : 'Sign up'}
        </button>
      </form>
      <p>
        Already have an account? <Link to="/login">Sign in</Link>
      </p>
    </section>
  )
}
