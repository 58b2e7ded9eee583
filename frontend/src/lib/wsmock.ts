// A WebSocket for tests: records what the page sends and lets the test play the server.
export class MockWebSocket {
  static instances: MockWebSocket[] = []
  static readonly CONNECTING = 0
  static readonly OPEN = 1
  static readonly CLOSING = 2
  static readonly CLOSED = 3
  url: string
  protocols?: string | string[]
  readyState = 0
  binaryType = 'blob'
  sent: (string | Uint8Array)[] = []
  closedByClient = false
  onopen: ((ev: unknown) => void) | null = null
  onmessage: ((ev: { data: unknown }) => void) | null = null
  onclose: ((ev: { code: number; reason: string }) => void) | null = null
  onerror: ((ev: unknown) => void) | null = null

  constructor(url: string, protocols?: string | string[]) {
    this.url = url
    this.protocols = protocols
    MockWebSocket.instances.push(this)
  }

  static reset() {
    MockWebSocket.instances = []
  }
  static last(): MockWebSocket {
    return MockWebSocket.instances[MockWebSocket.instances.length - 1]
  }

  send(data: string | ArrayBufferLike | ArrayBufferView) {
    if (this.readyState !== 1) throw new Error('send on a WebSocket that is not open')
    if (typeof data === 'string') this.sent.push(data)
    else if (ArrayBuffer.isView(data)) this.sent.push(new Uint8Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength)))
    else this.sent.push(new Uint8Array(data as ArrayBuffer))
  }
  close() {
    this.closedByClient = true
    this.readyState = 3
  }

  // ---- the server's side ----
  serverOpen() {
    this.readyState = 1
    this.onopen?.({})
  }
  serverText(obj: unknown) {
    this.onmessage?.({ data: JSON.stringify(obj) })
  }
  serverBinary(text: string) {
    const b = new TextEncoder().encode(text)
    this.onmessage?.({ data: b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) })
  }
  /** The connection breaks (a network blip): 1006, no close frame. */
  drop(code = 1006) {
    this.readyState = 3
    this.onclose?.({ code, reason: '' })
  }

  /** The text control messages sent, parsed. */
  controls(): { type: string; [k: string]: unknown }[] {
    return this.sent.filter((m): m is string => typeof m === 'string').map((m) => JSON.parse(m))
  }
  /** The binary messages sent, decoded as UTF-8. */
  binaries(): string[] {
    return this.sent.filter((m): m is Uint8Array => typeof m !== 'string').map((m) => new TextDecoder().decode(m))
  }
}
