import { useState } from 'react'
import { Link, useNavigate, useSearchParams } from 'react-router'
import { endpoints } from '../lib/endpoints'
import { useSignedIn } from '../session'
import { Field, FormError, useSubmit } from '../components/ui'

/**
 * Only same-site paths are followed after sign-in. Browsers read "//host" as another origin,
 * count a backslash as a slash ("/\host") and drop tabs and newlines ("/\t/host"), so a path
 * holding any of those, or any other control character, goes to "/" instead.
 */
export function safeNext(next: string | null): string {
  return next && next.startsWith('/') && !next.startsWith('//') && !/[\\\u0000-\u001f\u007f]/.test(next) ? next : '/'
}

export default function Login() {
  const [params] = useSearchParams()
  const navigate = useNavigate()
  const signedIn = useSignedIn()
  const [login, setLogin] = useState('')
  const [password, setPassword] = useState('')
  const { submit, busy, error } = useSubmit(async () => {
    const s = await endpoints.auth.login({ login, password })
    signedIn(s.user, s.csrf_token)
    navigate(safeNext(params.get('next')), { replace: true })
  })
  return (
    <section className="card narrow">
      <h1>Sign in</h1>
      {params.get('reset') === 'done' && <p className="notice success">Your password is changed. Sign in with the new one.</p>}
      <form onSubmit={submit}>
        <Field label="Username or email">
          {(id) => <input id={id} name="login" autoComplete="username" required value={login} onChange={(e) => setLogin(e.target.value)} />}
        </Field>
        <Field label="Password">
          {(id) => (
            <input id={id} name="password" type="password" autoComplete="current-password" required value={password} onChange={(e) => setPassword(e.target.value)} />
          )}
        </Field>
        <FormError error={error} />
        <button type="submit" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
      <p>
        <Link to="/forgot-password">Forgot your password?</Link>
      </p>
      <p>
        New here? <Link to={`/signup${params.get('next') ? `?next=${encodeURIComponent(params.get('next')!)}` : ''}`}>Create an account</Link>
      </p>
    </section>
  )
}
