import { useState } from 'react'
import { Link } from 'react-router'
import { endpoints } from '../lib/endpoints'
import { Field, FormError, Notice, useSubmit } from '../components/ui'

export default function ForgotPassword() {
  const [email, setEmail] = useState('')
  const [sent, setSent] = useState(false)
  const { submit, busy, error } = useSubmit(async () => {
    await endpoints.auth.requestPasswordReset({ email })
    setSent(true)
  })
  return (
    <section className="card narrow">
      <h1>Reset your password</h1>
      {sent ? (
        <Notice kind="success">If an account has the address {email}, a reset link is on its way. It works for one hour.</Notice>
      ) : (
        <form onSubmit={submit}>
          <Field label="Email">{(id) => <input id={id} type="email" autoComplete="email" required value={email} onChange={(e) => setEmail(e.target.value)} />}</Field>
          <FormError error={error} />
          <button type="submit" disabled={busy}>
            {busy ? 'Sending…' : 'Email me a reset link'}
          </button>
        </form>
      )}
      <p>
        <Link to="/login">Back to sign in</Link>
      </p>
    </section>
  )
}
