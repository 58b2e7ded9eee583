import { useEffect, useState } from 'react'

// Placeholder home page until the dashboard lands: it proves the embedded build is served and
// can reach the API.
export type VersionState = { kind: 'loading' } | { kind: 'ok'; version: string } | { kind: 'error'; message: string }

export async function fetchVersion(fetcher: typeof fetch = fetch): Promise<VersionState> {
  try {
    const res = await fetcher('/api/v1/version')
    if (!res.ok) return { kind: 'error', message: `server answered ${res.status}` }
    const body = (await res.json()) as { version?: string }
    return { kind: 'ok', version: body.version ?? 'unknown' }
  } catch (e) {
    return { kind: 'error', message: e instanceof Error ? e.message : String(e) }
  }
}

export function App({ fetcher }: { fetcher?: typeof fetch }) {
  const [state, setState] = useState<VersionState>({ kind: 'loading' })
  useEffect(() => {
    let live = true
    fetchVersion(fetcher).then((s) => live && setState(s))
    return () => {
      live = false
    }
  }, [fetcher])
  return (
    <main>
      <h1>Nimbus</h1>
      <p>Cloud-native builds for AI teams: pipelines on CPU and GPU nodes, billed per core-hour.</p>
      <p data-testid="server-status">
        {state.kind === 'loading' && 'Connecting to the server…'}
        {state.kind === 'ok' && `Server version ${state.version}`}
        {state.kind === 'error' && `Server unreachable: ${state.message}`}
      </p>
    </main>
  )
}
