// One terminal tab's connection to a workspace shell (backend/workspace/README.md, "Terminal"):
// binary messages both ways are the terminal's bytes, text messages are JSON control messages
// ({"type":"resize",cols,rows} from us; {"type":"session",id} and {"type":"exit",code} from the
// server). A connection that breaks without an exit reconnects with backoff to the same shell
// (`?session=<id>`, which the server keeps for 5 minutes and whose last 64 KiB it replays).
// Independent of xterm so that it can be tested with a mock WebSocket.
import { TERMINAL_PROTOCOL } from './workspaces'

export type ConnState = 'connecting' | 'open' | 'reconnecting' | 'exited' | 'closed' | 'failed'

/** Where the bytes go: the terminal emulator. */
export interface TerminalSink {
  write(data: Uint8Array | string): void
  /** Clears the screen before a reattached shell replays its output. */
  reset(): void
}

export interface ConnInfo {
  session?: string
  code?: number
  /** The reconnect attempt about to be made (reconnecting). */
  attempt?: number
  /** Milliseconds until that attempt. */
  retryIn?: number
}

type WSLike = {
  readyState: number
  binaryType: string
  send(data: string | ArrayBufferLike | ArrayBufferView): void
  close(code?: number, reason?: string): void
  onopen: ((ev: unknown) => void) | null
  onmessage: ((ev: { data: unknown }) => void) | null
  onclose: ((ev: { code: number; reason: string }) => void) | null
  onerror: ((ev: unknown) => void) | null
}
export type WSConstructor = new (url: string, protocols?: string | string[]) => WSLike

export interface ConnOptions {
  /** The WebSocket URL, with the session to reattach to and the initial size. */
  url: (q: { session?: string; cols: number; rows: number }) => string
  size: () => { cols: number; rows: number }
  sink: TerminalSink
  onState?: (state: ConnState, info: ConnInfo) => void
  /** Tests pass a mock; the browser's WebSocket otherwise. */
  WebSocket?: WSConstructor
  /** The delay before reconnect attempt n (1, 2, …). */
  backoff?: (attempt: number) => number
  /** Stop trying this long after the connection broke (the server keeps a shell 5 minutes). */
  giveUpAfterMs?: number
  now?: () => number
}

const OPEN = 1

/** 0.5 s, 1 s, 2 s, 4 s, then 8 s, each ±20 %. */
export const defaultBackoff = (n: number) => Math.min(8000, 500 * 2 ** (n - 1)) * (0.8 + 0.4 * Math.random())

export class TerminalConnection {
  session?: string
  state: ConnState = 'connecting'
  private ws?: WSLike
  private attempt = 0
  private downSince?: number
  private timer?: ReturnType<typeof setTimeout>
  private done = false
  private suspended = false
  private readonly enc = new TextEncoder()
  private readonly opts: ConnOptions

  constructor(opts: ConnOptions) {
    this.opts = opts
  }

  /** Opens the first connection (a new shell). */
  connect(): void {
    this.done = false
    this.open(false)
  }

  /** Keystrokes (xterm's onData): UTF-8, as one binary message. Dropped while disconnected. */
  send(data: string | Uint8Array): void {
    if (this.ws?.readyState !== OPEN) return
    this.ws.send(typeof data === 'string' ? this.enc.encode(data) : data)
  }

  /** Tells the shell's PTY its new size. */
  resize(cols: number, rows: number): void {
    if (this.ws?.readyState !== OPEN || !(cols > 0) || !(rows > 0)) return
    this.ws.send(JSON.stringify({ type: 'resize', cols, rows }))
  }

  /** Reconnects at once (the user asked to), to the same shell while it has one. */
  reconnectNow(): void {
    if (this.state === 'exited' || this.state === 'closed') return
    clearTimeout(this.timer)
    this.done = false
    this.downSince = undefined
    this.attempt = 0
    this.detach()
    this.open(true)
  }

  /**
   * Lets go of the socket while the page sleeps in the back-forward cache (pagehide with
   * persisted): the browser itself answers the server's pings for a frozen page, so a workspace
   * left through the address bar stayed "connected" and billed on. The shell stays on the
   * server (5 minutes); resume() reattaches to it.
   */
  suspend(): void {
    if (this.state === 'exited' || this.state === 'closed' || this.state === 'failed') return
    this.done = true
    this.suspended = true
    clearTimeout(this.timer)
    this.detach()
  }

  /** Reattaches after suspend() (pageshow with persisted: the page is back from the cache). */
  resume(): void {
    if (!this.suspended) return
    this.suspended = false
    this.done = false
    this.downSince = undefined
    this.attempt = 0
    this.open(true)
  }

  /** Closes for good (the tab closed, the page left, the workspace ended). */
  close(): void {
    this.done = true
    this.suspended = false
    clearTimeout(this.timer)
    this.detach()
    if (this.state !== 'exited') this.set('closed', { session: this.session })
  }

  private detach() {
    const ws = this.ws
    this.ws = undefined
    if (!ws) return
    ws.onopen = ws.onmessage = ws.onclose = ws.onerror = null
    try {
      ws.close(1000)
    } catch {
      /* already closed */
    }
  }

  private set(state: ConnState, info: ConnInfo = {}) {
    this.state = state
    this.opts.onState?.(state, info)
  }

  private open(reattach: boolean) {
    const WS = this.opts.WebSocket ?? (globalThis.WebSocket as unknown as WSConstructor)
    const { cols, rows } = this.opts.size()
    const session = reattach ? this.session : undefined
    let ws: WSLike
    try {
      ws = new WS(this.opts.url({ session, cols, rows }), TERMINAL_PROTOCOL)
    } catch {
      this.broken()
      return
    }
    this.ws = ws
    ws.binaryType = 'arraybuffer'
    if (!reattach) this.set('connecting')
    ws.onopen = () => {
      this.attempt = 0
      this.downSince = undefined
      // The server replays the shell's recent output on a reattach: start from a clean screen.
      if (session) this.opts.sink.reset()
      this.set('open', { session: this.session })
      const s = this.opts.size()
      this.resize(s.cols, s.rows)
    }
    ws.onmessage = (ev) => {
      const d = ev.data
      if (typeof d === 'string') {
        this.control(d)
      } else if (d instanceof ArrayBuffer || Object.prototype.toString.call(d) === '[object ArrayBuffer]') {
        this.opts.sink.write(new Uint8Array(d as ArrayBuffer))
      } else if (ArrayBuffer.isView(d)) {
        this.opts.sink.write(new Uint8Array(d.buffer, d.byteOffset, d.byteLength))
      } else if (d && typeof (d as Blob).arrayBuffer === 'function') {
        // Only if binaryType could not be set; order is kept by awaiting nothing else.
        ;(d as Blob).arrayBuffer().then((b) => this.opts.sink.write(new Uint8Array(b)))
      }
    }
    ws.onerror = () => {
      /* onclose follows */
    }
    ws.onclose = () => {
      if (this.ws !== ws) return
      this.ws = undefined
      if (this.done || this.state === 'exited') return
      this.broken()
    }
  }

  private control(text: string) {
    let msg: { type?: string; id?: string; code?: number }
    try {
      msg = JSON.parse(text)
    } catch {
      return
    }
    if (msg.type === 'session' && typeof msg.id === 'string') {
      this.session = msg.id
      this.set(this.state, { session: msg.id })
    } else if (msg.type === 'exit') {
      const code = typeof msg.code === 'number' ? msg.code : undefined
      this.done = true
      this.opts.sink.write(`\r\n\x1b[2m[the shell exited${code === undefined ? '' : ` with code ${code}`}]\x1b[0m\r\n`)
      this.set('exited', { session: this.session, code })
    }
  }

  /** The connection broke (or could not be made): try again later, unless it is too late. */
  private broken() {
    const now = (this.opts.now ?? Date.now)()
    this.downSince ??= now
    if (now - this.downSince > (this.opts.giveUpAfterMs ?? 5 * 60_000)) {
      this.done = true
      this.set('failed', { session: this.session })
      return
    }
    this.attempt++
    const wait = (this.opts.backoff ?? defaultBackoff)(this.attempt)
    this.set('reconnecting', { session: this.session, attempt: this.attempt, retryIn: wait })
    clearTimeout(this.timer)
    this.timer = setTimeout(() => {
      if (!this.done) this.open(true)
    }, wait)
  }
}
