import { countdown, idleText, lifetimeText, terminalUrl, type Workspace } from './workspaces'

const w = {
  id: 42, org: 'ml', repo: 'trainer', branch: 'main', state: 'ready', connections: 0, idle_deadline: null, lifetime_deadline: null,
} as unknown as Workspace

describe('workspaces', () => {
  it('builds the terminal URL on the page origin, ws: or wss:', () => {
    expect(terminalUrl(42, {}, { protocol: 'http:', host: 'localhost:8080' })).toBe('ws://localhost:8080/api/v1/workspaces/42/terminal')
    expect(terminalUrl(42, { session: 'a/b', cols: 80, rows: 24 }, { protocol: 'https:', host: 'ci.example.com' })).toBe(
      'wss://ci.example.com/api/v1/workspaces/42/terminal?session=a%2Fb&cols=80&rows=24',
    )
  })

  it('formats the countdowns', () => {
    expect([countdown(125_000), countdown(42_100), countdown(3_725_000), countdown(-5)]).toEqual(['2m 05s', '43s', '1h 02m', '0s'])
    const now = Date.parse('2026-01-01T00:00:00Z')
    expect(idleText({ ...w, idle_deadline: '2026-01-01T00:09:30Z' }, now)).toEqual({ text: 'stops in 9m 30s if idle', kind: 'countdown' })
    expect(idleText({ ...w, idle_deadline: '2025-12-31T23:59:59Z' }, now).kind).toBe('expired')
    expect(idleText({ ...w, connections: 2 }, now).text).toBe('connected (2)')
    expect(idleText({ ...w, connections: 1 }, now).text).toBe('connected')
    expect(idleText({ ...w, connections: null }, now).text).toBe('agent unreachable')
    expect(idleText({ ...w, state: 'stopped', connections: 1 }, now).text).toBe('—')
    expect(lifetimeText({ ...w, lifetime_deadline: '2026-01-01T04:00:00Z' }, now)).toMatch(/\(in 4h 00m\)$/)
    // With its zone, never a bare local time.
    expect(lifetimeText({ ...w, lifetime_deadline: '2026-01-01T04:00:00Z' }, now, { locale: 'en-US', timeZone: 'UTC' })).toBe('Jan 1, 2026, 4:00 AM UTC (in 4h 00m)')
  })
})
