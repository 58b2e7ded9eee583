import { useState } from 'react'
import { Link, useSearchParams } from 'react-router'
import { useQueryClient } from '@tanstack/react-query'
import { endpoints } from '../lib/endpoints'
import { FormError, Notice } from '../components/ui'

export default function AcceptInvitation() {
  const [params] = useSearchParams()
  const token = params.get('token') ?? ''
  const qc = useQueryClient()
  const [state, setState] = useState<'idle' | 'busy' | 'done'>('idle')
  const [error, setError] = useState<unknown>(null)
  const accept = async () => {
    setState('busy')
    setError(null)
    try {
      await endpoints.user.invitations.acceptLink({ token })
      await qc.invalidateQueries({ queryKey: ['orgs'] })
      setState('done')
    } catch (e) {
      setError(e)
      setState('idle')
    }
  }
  return (
    <section className="card narrow">
      <h1>Join a team</h1>
      {!token ? (
        <p className="error" role="alert">
          This invitation link has no token. Ask whoever invited you for a new one.
        </p>
      ) : state === 'done' ? (
        <Notice kind="success">
          You joined the team. <Link to="/">See your teams</Link>.
        </Notice>
      ) : (
        <>
          <p>You were invited to a team by email. Accepting adds you to it with the role the invitation names; the link works once.</p>
          <FormError error={error} />
          <button type="button" onClick={accept} disabled={state === 'busy'}>
            {state === 'busy' ? 'Joining…' : 'Accept the invitation'}
          </button>
        </>
      )}
    </section>
  )
}
