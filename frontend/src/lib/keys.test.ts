import { keys } from './keys'

// Every factory called with sample arguments: [path in `keys`, the key].
function all(): [string, readonly unknown[]][] {
  const out: [string, readonly unknown[]][] = []
  const walk = (o: Record<string, unknown>, path: string) => {
    for (const [k, v] of Object.entries(o)) {
      const p = path ? `${path}.${k}` : k
      if (typeof v === 'function') out.push([p, (v as (...a: unknown[]) => readonly unknown[])('a', 'b', 'c', 'd')])
      else walk(v as Record<string, unknown>, p)
    }
  }
  walk(keys as unknown as Record<string, unknown>, '')
  return out
}
const isPrefix = (a: readonly unknown[], b: readonly unknown[]) => a.length <= b.length && a.every((x, i) => x === b[i])

describe('keys', () => {
  it('reads and invalidates the same key whether an id came as a route string or an API number', () => {
    expect(keys.repos.build('ml', 'trainer', '7')).toEqual(keys.repos.build('ml', 'trainer', 7))
    expect(keys.workspaces.get('42')).toEqual(keys.workspaces.get(42))
    expect(keys.repos.record('ml', 'trainer', 3)).toEqual(keys.repos.record('ml', 'trainer', '3'))
    expect(keys.repos.recordDiff('ml', 'trainer', 3, 4)).toEqual(keys.repos.recordDiff('ml', 'trainer', '3', '4'))
  })

  it('lets the broad invalidations reach what they mean to refresh', () => {
    expect(isPrefix(keys.workspaces.all(), keys.workspaces.list('ml', true))).toBe(true)
    expect(isPrefix(keys.repos.publishWebhook('ml', 'trainer'), keys.repos.webhookDeliveries('ml', 'trainer'))).toBe(true)
  })

  it('gives no two answers the same key: no factory is a prefix of another unless it is meant to be', () => {
    const meant = new Set([
      'workspaces.all workspaces.list',
      'repos.publishWebhook repos.webhookDeliveries',
      // A request's page refreshes all of itself; a commit its checks.
      'code.commit code.checks',
      ...['files', 'commits', 'comments', 'reviews', 'checkBuilds', 'metrics'].map((k) => `pulls.one pulls.${k}`),
    ])
    const list = all()
    expect(list.length).toBeGreaterThan(40)
    const clashes: string[] = []
    for (const [a, ka] of list)
      for (const [b, kb] of list) if (a !== b && isPrefix(ka, kb) && !meant.has(`${a} ${b}`)) clashes.push(`${a} ⊑ ${b}`)
    expect(clashes).toEqual([])
  })
})
