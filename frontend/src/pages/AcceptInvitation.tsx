import { useState } from 'react'
import { Link, useSearchParams } from 'react-router'
import { useQuery, useQueryClient } from '@tanstack/react-query'
import { endpoints } from '../lib/endpoints'
import { ErrorBox, FormError, Loading, Notice } from '../components/ui'
import { ROLE_HELP } from '../lib/types'
import { dateTime } from '../lib/format'
import { keys } from '../lib/keys'

export default function AcceptInvitation() {
  const [params] = useSearchParams()
  const token = params.get('token') ?? ''
  const qc = useQueryClient()
  const [state, setState] = useState<'idle' | 'busy' | 'done'>('idle')
  const [error, setError] = useState<unknown>(null)
  const preview = useQuery({ queryKey: keys.invitationPreview(token), queryFn: () => endpoints.user.invitations.previewLink({ token }), enabled: token !== '', retry: false })
  const accept = async () => {
    setState('busy')
    setError(null)
    try {
      await endpoints.user.invitations.acceptLink({ token })
      await qc.invalidateQueries({ queryKey: keys.orgs() })
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
      ) : state === 'done' && preview.data ? (
        <Notice kind="success">
          You joined {preview.data.org} as {preview.data.role}. <Link to={`/orgs/${encodeURIComponent(preview.data.org)}`}>Open {preview.data.org}</Link>.
        </Notice>
      ) : preview.isPending ? (
        <Loading what="Reading the invitation" />
      ) : preview.isError ? (
        <ErrorBox error={preview.error} />
      ) : (
        <>
          <p data-testid="invitation-offer">
            <strong>{preview.data.invited_by}</strong> invited you to join <strong>{preview.data.org}</strong> as <strong>{preview.data.role}</strong>.
          </p>
          <p className="muted">
            {ROLE_HELP[preview.data.role]} The link works once, until {dateTime(preview.data.expires_at)}.
          </p>
          <FormError error={error} />
          <button type="button" onClick={accept} disabled={state === 'busy'}>
            {state === 'busy' ? 'Joining…' : `Join ${preview.data.org}`}
          </button>
        </>
      )}
    </section>
  )
}
