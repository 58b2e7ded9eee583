import { render, screen } from '@testing-library/react'
import { App, fetchVersion } from './App'

const respond = (status: number, body: unknown) =>
  (async () => new Response(JSON.stringify(body), { status })) as unknown as typeof fetch

describe('fetchVersion', () => {
  it('reads the version', async () => {
    expect(await fetchVersion(respond(200, { version: '1.2.3' }))).toEqual({ kind: 'ok', version: '1.2.3' })
  })
  it('reports an HTTP error', async () => {
    expect(await fetchVersion(respond(503, {}))).toEqual({ kind: 'error', message: 'server answered 503' })
  })
  it('reports a network error', async () => {
    const failing = (async () => {
      throw new Error('offline')
    }) as unknown as typeof fetch
    expect(await fetchVersion(failing)).toEqual({ kind: 'error', message: 'offline' })
  })
})

describe('App', () => {
  it('shows the server version once loaded', async () => {
    render(<App fetcher={respond(200, { version: 'v9' })} />)
    expect(await screen.findByText('Server version v9')).toBeTruthy()
  })
})
