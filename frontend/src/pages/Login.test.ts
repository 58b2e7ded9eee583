import { describe, expect, it } from 'vitest'
import { safeNext } from './Login'

// After sign-in the dashboard follows ?next=. It refused "//evil.example" but followed
// "/\evil.example", which a browser reads as "//evil.example", and paths with tabs or newlines,
// which browsers drop.
describe('safeNext', () => {
  it.each([
    ['/ml/trainer', '/ml/trainer'],
    ['/ml/trainer/builds/1?tab=log#L3', '/ml/trainer/builds/1?tab=log#L3'],
    [null, '/'],
    ['', '/'],
    ['ml', '/'],
    ['https://evil.example', '/'],
    ['//evil.example', '/'],
    ['/\\evil.example', '/'],
    ['/a\\b', '/'],
    ['/\t/evil.example', '/'],
    ['/\n/evil.example', '/'],
    ['/\u007f', '/'],
  ])('%j → %j', (next, want) => {
    expect(safeNext(next)).toBe(want)
  })
})
