import { act, fireEvent, render, screen } from '@testing-library/react'
import WorkspaceTerminal from './Terminal'
import { MockWebSocket } from '../lib/wsmock'
import type { WSConstructor } from '../lib/terminal'

// xterm.js needs a real browser (canvas, matchMedia); the component is tested with a stand-in
// that records what is written and lets the test type and resize. The e2e test
// (e2e/workspace_browser_test.go) runs the real one in Chromium.
const fakes = vi.hoisted(() => {
  type Listener<T> = (v: T) => void
  class FakeTerminal {
    static all: FakeTerminal[] = []
    cols = 80
    rows = 24
    written: (string | Uint8Array)[] = []
    resets = 0
    focused = 0
    disposed = false
    el?: HTMLElement
    data: Listener<string>[] = []
    binary: Listener<string>[] = []
    resize: Listener<{ cols: number; rows: number }>[] = []
    constructor() {
      FakeTerminal.all.push(this)
    }
    open(el: HTMLElement) {
      this.el = el
      const rows = document.createElement('div')
      rows.className = 'xterm-rows'
      el.appendChild(rows)
    }
    loadAddon(a: { activate(t: FakeTerminal): void }) {
      a.activate(this)
    }
    write(d: string | Uint8Array) {
      this.written.push(d)
      this.el!.querySelector('.xterm-rows')!.textContent += typeof d === 'string' ? d : new TextDecoder().decode(d)
    }
    reset() {
      this.resets++
      this.el!.querySelector('.xterm-rows')!.textContent = ''
    }
    focus() {
      this.focused++
    }
    dispose() {
      this.disposed = true
    }
    private on<T>(list: Listener<T>[]) {
      return (f: Listener<T>) => {
        list.push(f)
        return { dispose: () => list.splice(list.indexOf(f), 1) }
      }
    }
    onData = this.on(this.data)
    onBinary = this.on(this.binary)
    onResize = this.on(this.resize)
    // test helpers
    type(s: string) {
      this.data.forEach((f) => f(s))
    }
    setSize(cols: number, rows: number) {
      this.cols = cols
      this.rows = rows
      this.resize.forEach((f) => f({ cols, rows }))
    }
  }
  class FakeFit {
    static size = { cols: 80, rows: 24 }
    t?: FakeTerminal
    activate(t: FakeTerminal) {
      this.t = t
    }
    fit() {
      const { cols, rows } = FakeFit.size
      if (this.t && (this.t.cols !== cols || this.t.rows !== rows)) this.t.setSize(cols, rows)
    }
    dispose() {}
  }
  return { FakeTerminal, FakeFit }
})
vi.mock('@xterm/xterm', () => ({ Terminal: fakes.FakeTerminal }))
vi.mock('@xterm/addon-fit', () => ({ FitAddon: fakes.FakeFit }))

const WS = MockWebSocket as unknown as WSConstructor
const backoff = (n: number) => 100 * n

beforeEach(() => {
  MockWebSocket.reset()
  fakes.FakeTerminal.all = []
  fakes.FakeFit.size = { cols: 80, rows: 24 }
})
afterEach(() => vi.useRealTimers())

describe('WorkspaceTerminal', () => {
  it('connects, sends the size and keystrokes as binary, and writes what the shell sends', () => {
    fakes.FakeFit.size = { cols: 132, rows: 43 }
    const onConnect = vi.fn()
    render(<WorkspaceTerminal workspaceId={42} WebSocket={WS} backoff={backoff} onConnect={onConnect} />)
    const ws = MockWebSocket.last()
    expect(ws.url).toBe(`ws://${location.host}/api/v1/workspaces/42/terminal?cols=132&rows=43`)
    expect(ws.protocols).toBe('nimbus-terminal.v1')
    const host = screen.getByTestId('terminal')
    expect(host.dataset.state).toBe('connecting')
    act(() => {
      ws.serverOpen()
      ws.serverText({ type: 'session', id: 'sess-1' })
    })
    expect(host.dataset.state).toBe('open')
    expect(host.dataset.session).toBe('sess-1')
    expect(onConnect).toHaveBeenCalledTimes(1)
    expect(ws.controls()).toEqual([{ type: 'resize', cols: 132, rows: 43 }])

    const term = fakes.FakeTerminal.all[0]
    act(() => term.type('echo hi\r'))
    expect(typeof ws.sent[ws.sent.length - 1]).not.toBe('string')
    expect(ws.binaries()).toEqual(['echo hi\r'])

    act(() => ws.serverBinary('\x1b[1;32mhi\x1b[0m\r\n'))
    const last = term.written[term.written.length - 1]
    expect(last).toBeInstanceOf(Uint8Array)
    expect(new TextDecoder().decode(last as Uint8Array)).toBe('\x1b[1;32mhi\x1b[0m\r\n')
    expect(host.querySelector('.xterm-rows')!.textContent).toContain('hi')

    // The window is resized: fit, and the PTY is told.
    fakes.FakeFit.size = { cols: 100, rows: 30 }
    act(() => {
      window.dispatchEvent(new Event('resize'))
    })
    expect(ws.controls()[1]).toEqual({ type: 'resize', cols: 100, rows: 30 })
  })

  it('reconnects after a network blip with ?session=, showing reconnecting…', () => {
    vi.useFakeTimers()
    render(<WorkspaceTerminal workspaceId={42} WebSocket={WS} backoff={backoff} />)
    const first = MockWebSocket.last()
    act(() => {
      first.serverOpen()
      first.serverText({ type: 'session', id: 'sess-9' })
      first.serverBinary('$ ')
    })
    act(() => first.drop())
    expect(screen.getByTestId('terminal-state').textContent).toContain('reconnecting…')
    expect(screen.getByTestId('terminal').dataset.state).toBe('reconnecting')
    act(() => {
      vi.advanceTimersByTime(100)
    })
    const second = MockWebSocket.last()
    expect(second).not.toBe(first)
    expect(new URL(second.url).searchParams.get('session')).toBe('sess-9')
    act(() => {
      second.serverOpen()
      second.serverBinary('$ replayed')
    })
    const term = fakes.FakeTerminal.all[0]
    expect(term.resets).toBe(1)
    expect(screen.getByTestId('terminal').querySelector('.xterm-rows')!.textContent).toBe('$ replayed')
    expect(screen.getByTestId('terminal-state').textContent).toBe('connected')
    // Keystrokes go to the new connection.
    act(() => term.type('x'))
    expect(second.binaries()).toEqual(['x'])
  })

  it('opens a new shell in a new tab with +, and closes the connection with the tab', () => {
    render(<WorkspaceTerminal workspaceId={7} WebSocket={WS} backoff={backoff} />)
    expect(MockWebSocket.instances).toHaveLength(1)
    fireEvent.click(screen.getByLabelText('New shell'))
    expect(MockWebSocket.instances).toHaveLength(2)
    const second = MockWebSocket.last()
    expect(new URL(second.url).searchParams.has('session')).toBe(false)
    const hosts = screen.getAllByTestId('terminal')
    expect(hosts.map((h) => h.dataset.active)).toEqual(['false', 'true'])
    expect(screen.getAllByRole('tab').map((t) => t.getAttribute('aria-selected'))).toEqual(['false', 'true'])
    fireEvent.click(screen.getByText(/Shell 1/))
    expect(screen.getAllByTestId('terminal').map((h) => h.dataset.active)).toEqual(['true', 'false'])
    fireEvent.click(screen.getByLabelText('Close shell 2'))
    expect(second.closedByClient).toBe(true)
    expect(screen.getAllByTestId('terminal')).toHaveLength(1)
    expect(fakes.FakeTerminal.all[1].disposed).toBe(true)
  })

  it('shows the exit and reconnects no more; a stopped workspace closes its shells', () => {
    vi.useFakeTimers()
    const { rerender } = render(<WorkspaceTerminal workspaceId={42} WebSocket={WS} backoff={backoff} />)
    const ws = MockWebSocket.last()
    act(() => {
      ws.serverOpen()
      ws.serverText({ type: 'exit', code: 0 })
      ws.drop(1000)
    })
    act(() => {
      vi.advanceTimersByTime(5000)
    })
    expect(MockWebSocket.instances).toHaveLength(1)
    expect(screen.getByTestId('terminal-state').textContent).toBe('the shell exited with code 0')

    act(() => {
      fireEvent.click(screen.getByLabelText('New shell'))
    })
    const other = MockWebSocket.last()
    act(() => other.serverOpen())
    rerender(<WorkspaceTerminal workspaceId={42} ended WebSocket={WS} backoff={backoff} />)
    expect(other.closedByClient).toBe(true)
    expect(screen.queryByLabelText('New shell')).toBeNull()
  })
})
