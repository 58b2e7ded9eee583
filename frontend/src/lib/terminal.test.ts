import { TerminalConnection, type ConnState, type WSConstructor } from './terminal'
import { MockWebSocket } from './wsmock'
import { terminalUrl } from './workspaces'

function setup(opts: { giveUpAfterMs?: number; now?: () => number } = {}) {
  MockWebSocket.reset()
  const written: string[] = []
  const states: ConnState[] = []
  let resets = 0
  const size = { cols: 100, rows: 30 }
  const conn = new TerminalConnection({
    url: (q) => terminalUrl(42, q, { protocol: 'https:', host: 'nimbus.test' }),
    size: () => size,
    sink: {
      write: (d) => written.push(typeof d === 'string' ? d : new TextDecoder().decode(d)),
      reset: () => resets++,
    },
    onState: (s) => states.push(s),
    WebSocket: MockWebSocket as unknown as WSConstructor,
    backoff: (n) => 100 * n,
    ...opts,
  })
  return { conn, written, states, size, resets: () => resets }
}

afterEach(() => vi.useRealTimers())

describe('TerminalConnection', () => {
  it('opens the terminal WebSocket with the subprotocol, the size and arraybuffer binaries', () => {
    const { conn } = setup()
    conn.connect()
    const ws = MockWebSocket.last()
    expect(ws.url).toBe('wss://nimbus.test/api/v1/workspaces/42/terminal?cols=100&rows=30')
    expect(ws.protocols).toBe('nimbus-terminal.v1')
    expect(ws.binaryType).toBe('arraybuffer')
  })

  it('sends a resize when open and on resize, keystrokes as binary, and writes what arrives', () => {
    const { conn, written, states } = setup()
    conn.connect()
    const ws = MockWebSocket.last()
    conn.send('early') // not open yet: dropped
    ws.serverOpen()
    ws.serverText({ type: 'session', id: 's-1' })
    expect(conn.session).toBe('s-1')
    expect(ws.controls()).toEqual([{ type: 'resize', cols: 100, rows: 30 }])
    conn.resize(120, 40)
    expect(ws.controls()[1]).toEqual({ type: 'resize', cols: 120, rows: 40 })
    conn.send('ls -la ✓\r')
    expect(ws.sent[ws.sent.length - 1]).toBeInstanceOf(Uint8Array)
    expect(ws.binaries()).toEqual(['ls -la ✓\r'])
    ws.serverBinary('\x1b[32mhello\x1b[0m\r\n')
    expect(written).toEqual(['\x1b[32mhello\x1b[0m\r\n'])
    expect(states).toContain('open')
  })

  it('reconnects after a blip with ?session= and backoff, and clears the screen for the replay', () => {
    vi.useFakeTimers()
    const { conn, states, resets } = setup()
    conn.connect()
    const first = MockWebSocket.last()
    first.serverOpen()
    first.serverText({ type: 'session', id: 'abc 1' })
    first.drop()
    expect(conn.state).toBe('reconnecting')
    expect(MockWebSocket.instances).toHaveLength(1)
    vi.advanceTimersByTime(99)
    expect(MockWebSocket.instances).toHaveLength(1)
    vi.advanceTimersByTime(1)
    const second = MockWebSocket.last()
    expect(MockWebSocket.instances).toHaveLength(2)
    expect(new URL(second.url).searchParams.get('session')).toBe('abc 1')
    expect(second.protocols).toBe('nimbus-terminal.v1')
    // This attempt fails too: the next waits longer.
    second.drop()
    vi.advanceTimersByTime(199)
    expect(MockWebSocket.instances).toHaveLength(2)
    vi.advanceTimersByTime(1)
    const third = MockWebSocket.last()
    expect(new URL(third.url).searchParams.get('session')).toBe('abc 1')
    third.serverOpen()
    expect(resets()).toBe(1)
    expect(conn.state).toBe('open')
    expect(third.controls()).toEqual([{ type: 'resize', cols: 100, rows: 30 }])
    expect(states.filter((s) => s === 'reconnecting')).toHaveLength(2)
    // Backoff starts over after a success.
    third.drop()
    vi.advanceTimersByTime(100)
    expect(MockWebSocket.instances).toHaveLength(4)
  })

  it('lets go of the socket while the page is in the back-forward cache, and reattaches to the same shell after', () => {
    vi.useFakeTimers()
    const { conn } = setup()
    conn.connect()
    const first = MockWebSocket.last()
    first.serverOpen()
    first.serverText({ type: 'session', id: 's-9' })
    conn.suspend()
    expect(first.readyState).toBe(3) // closed by us: the server sees the page go
    vi.advanceTimersByTime(60_000)
    expect(MockWebSocket.instances).toHaveLength(1) // no reconnect while hidden
    conn.resume()
    const second = MockWebSocket.last()
    expect(MockWebSocket.instances).toHaveLength(2)
    expect(new URL(second.url).searchParams.get('session')).toBe('s-9')
    second.serverOpen()
    expect(conn.state).toBe('open')
    // resume without a suspend, or after the shell exited, does nothing.
    conn.resume()
    expect(MockWebSocket.instances).toHaveLength(2)
  })

  it('stops at the exit message, and when closed', () => {
    vi.useFakeTimers()
    const { conn, written } = setup()
    conn.connect()
    const ws = MockWebSocket.last()
    ws.serverOpen()
    ws.serverText({ type: 'exit', code: 3 })
    ws.drop(1000)
    vi.advanceTimersByTime(10_000)
    expect(conn.state).toBe('exited')
    expect(MockWebSocket.instances).toHaveLength(1)
    expect(written.join('')).toContain('exited with code 3')

    const b = setup()
    b.conn.connect()
    MockWebSocket.last().serverOpen()
    b.conn.close()
    expect(MockWebSocket.last().closedByClient).toBe(true)
    vi.advanceTimersByTime(10_000)
    expect(MockWebSocket.instances).toHaveLength(1)
    expect(b.conn.state).toBe('closed')
  })

  it('gives up once the server no longer keeps the shell, and reconnects on demand', () => {
    vi.useFakeTimers()
    let t = 0
    const { conn } = setup({ giveUpAfterMs: 1000, now: () => t })
    conn.connect()
    MockWebSocket.last().serverOpen()
    MockWebSocket.last().serverText({ type: 'session', id: 'x' })
    MockWebSocket.last().drop()
    t = 500
    vi.advanceTimersByTime(100)
    MockWebSocket.last().drop()
    t = 1500
    vi.advanceTimersByTime(200)
    MockWebSocket.last().drop()
    expect(conn.state).toBe('failed')
    const n = MockWebSocket.instances.length
    vi.advanceTimersByTime(60_000)
    expect(MockWebSocket.instances).toHaveLength(n)
    conn.reconnectNow()
    expect(MockWebSocket.instances).toHaveLength(n + 1)
    expect(new URL(MockWebSocket.last().url).searchParams.get('session')).toBe('x')
  })
})
