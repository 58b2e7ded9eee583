import { useEffect, useId, useState, type ReactNode } from 'react'
import type { UseQueryResult } from '@tanstack/react-query'
import { Link } from 'react-router'
import { ApiError, errorMessage } from '../lib/api'
import type { Status } from '../lib/types'

export function Loading({ what = 'Loading' }: { what?: string }) {
  return (
    <p className="muted loading" role="status" aria-live="polite">
      <span className="spinner" aria-hidden="true" /> {what}…
    </p>
  )
}

export function ErrorBox({ error, retry }: { error: unknown; retry?: () => void }) {
  if (error instanceof ApiError && error.status === 404)
    // Not a failure to retry: there is nothing there (or nothing this user may see).
    return (
      <div className="notfound" role="alert" data-testid="not-found">
        <h2>Not found</h2>
        <p>{errorMessage(error)}: there is nothing here, or it is not yours to see.</p>
        <Link to="/">Go to your teams</Link>
      </div>
    )
  return (
    <div className="error" role="alert">
      <strong>Something went wrong.</strong> {errorMessage(error)}
      {retry && (
        <button type="button" className="link" onClick={retry}>
          Try again
        </button>
      )}
    </div>
  )
}

export function Empty({ children }: { children: ReactNode }) {
  return <div className="empty">{children}</div>
}

/** Renders a query's loading and error states, else its data. */
export function QueryView<T>({ q, what, children }: { q: UseQueryResult<T>; what?: string; children: (data: T) => ReactNode }) {
  if (q.isPending) return <Loading what={what} />
  if (q.isError) return <ErrorBox error={q.error} retry={() => q.refetch()} />
  return <>{children(q.data)}</>
}

export function StatusBadge({ status, label }: { status: Status | string; label?: string }) {
  const icon: Record<string, string> = {
    queued: '◷',
    waiting: '⏸',
    running: '◌',
    success: '✓',
    failed: '✕',
    cancelled: '⊘',
    terminated: '■',
    skipped: '↷',
  }
  return (
    <span className={`badge s-${status}`} data-status={status}>
      <span aria-hidden="true">{icon[status] ?? '•'}</span> {label ?? status}
    </span>
  )
}

export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [done, setDone] = useState(false)
  useEffect(() => {
    if (!done) return
    const t = setTimeout(() => setDone(false), 1500)
    return () => clearTimeout(t)
  }, [done])
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text)
    } catch {
      // Without clipboard access (an insecure origin), select the text for the user instead.
      const ta = document.createElement('textarea')
      ta.value = text
      document.body.appendChild(ta)
      ta.select()
      try {
        document.execCommand('copy')
      } catch {
        /* nothing more to try */
      }
      ta.remove()
    }
    setDone(true)
  }
  return (
    <button type="button" className="secondary small" onClick={copy} aria-label={`${label}: ${text.length > 40 ? text.slice(0, 40) + '…' : text}`}>
      {done ? 'Copied ✓' : label}
    </button>
  )
}

/** A command or secret with a copy button. */
export function CopyField({ value, label }: { value: string; label: string }) {
  const id = useId()
  return (
    <div className="copyfield">
      <label htmlFor={id} className="visually-hidden">
        {label}
      </label>
      <input id={id} readOnly value={value} onFocus={(e) => e.currentTarget.select()} spellCheck={false} />
      <CopyButton text={value} label={`Copy ${label.toLowerCase()}`} />
    </div>
  )
}

export function Field({ label, hint, error, children }: { label: string; hint?: string; error?: string; children: (id: string, describedBy?: string) => ReactNode }) {
  const id = useId()
  const hintId = hint || error ? id + '-hint' : undefined
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      {children(id, hintId)}
      {(hint || error) && (
        <small id={hintId} className={error ? 'field-error' : 'muted'}>
          {error ?? hint}
        </small>
      )}
    </div>
  )
}

export function FormError({ error }: { error: unknown }) {
  if (!error) return null
  return (
    <p className="error" role="alert">
      {errorMessage(error)}
    </p>
  )
}

export function Notice({ kind = 'info', children }: { kind?: 'info' | 'success' | 'warn'; children: ReactNode }) {
  return (
    <div className={`notice ${kind}`} role="status">
      {children}
    </div>
  )
}

/** A form's submit handler with its busy and error states: the action runs once per submit. */
export function useSubmit(action: () => Promise<unknown>) {
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(null)
  const submit = async (e?: { preventDefault(): void }) => {
    e?.preventDefault()
    setBusy(true)
    setError(null)
    try {
      await action()
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }
  return { submit, busy, error, setError }
}

/** The header cell of a table's actions column. */
export function ActionsHeader() {
  return (
    <th scope="col">
      <span className="visually-hidden">Actions</span>
    </th>
  )
}

/** A token's revoke button, or "revoked" once it is. */
export function RevokeButton({ token, onRevoke }: { token: { name: string; revoked_at: string | null }; onRevoke: () => void }) {
  if (token.revoked_at) return <span className="muted">revoked</span>
  return (
    <button type="button" className="danger small" onClick={() => confirm(`Revoke “${token.name}”?`) && onRevoke()}>
      Revoke
    </button>
  )
}
