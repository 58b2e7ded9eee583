// The web terminal of a workspace: tabs of shells, each an xterm.js terminal (its default DOM
// renderer, so the text is in `.xterm-rows`) on its own WebSocket (lib/terminal.ts). Loaded
// lazily by the workspace page: xterm is not part of the initial JavaScript.
import { useEffect, useRef, useState } from 'react'
import { Terminal } from '@xterm/xterm'
import { FitAddon } from '@xterm/addon-fit'
import '@xterm/xterm/css/xterm.css'
import { TerminalConnection, type ConnInfo, type ConnState, type WSConstructor } from '../lib/terminal'
import { terminalUrl } from '../lib/workspaces'

const MAX_TABS = 8

interface PaneProps {
  workspaceId: number
  active: boolean
  /** The workspace stopped: close the connection, reconnect no more. */
  ended: boolean
  onState: (state: ConnState, info: ConnInfo) => void
  /** Tests pass a mock WebSocket. */
  WebSocket?: WSConstructor
  backoff?: (attempt: number) => number
}

function stateText(state: ConnState, info: ConnInfo): string {
  switch (state) {
    case 'connecting':
      return 'connecting…'
    case 'open':
      return 'connected'
    case 'reconnecting':
      return `reconnecting… (attempt ${info.attempt ?? 1})`
    case 'exited':
      return info.code === undefined ? 'the shell exited' : `the shell exited with code ${info.code}`
    case 'closed':
      return 'closed'
    case 'failed':
      return 'disconnected'
  }
}

/** One shell: an xterm on one connection. */
export function TerminalPane({ workspaceId, active, ended, onState, WebSocket, backoff }: PaneProps) {
  const host = useRef<HTMLDivElement>(null)
  const term = useRef<Terminal>(undefined)
  const fitRef = useRef<() => void>(() => {})
  const conn = useRef<TerminalConnection>(undefined)
  const [state, setState] = useState<{ s: ConnState; info: ConnInfo }>({ s: 'connecting', info: {} })
  const report = useRef(onState)
  report.current = onState

  useEffect(() => {
    const el = host.current!
    const t = new Terminal({
      cursorBlink: true,
      fontFamily: "ui-monospace, SFMono-Regular, Menlo, Consolas, 'Nimbus Symbols', monospace",
      fontSize: 13,
      scrollback: 5000,
      theme: { background: '#0f1419', foreground: '#d6dde6', cursor: '#d6dde6' },
    })
    const fit = new FitAddon()
    t.loadAddon(fit)
    t.open(el)
    const doFit = () => {
      try {
        fit.fit()
      } catch {
        /* not laid out (a hidden tab): fitted when shown */
      }
    }
    doFit()
    term.current = t
    fitRef.current = doFit
    const c = new TerminalConnection({
      url: (q) => terminalUrl(workspaceId, q),
      size: () => ({ cols: t.cols, rows: t.rows }),
      sink: { write: (d) => t.write(d), reset: () => t.reset() },
      onState: (s, info) => {
        setState({ s, info })
        report.current(s, info)
      },
      WebSocket,
      backoff,
    })
    conn.current = c
    const subs = [
      t.onData((s) => c.send(s)),
      // Some mouse reports are binary strings: one character per byte.
      t.onBinary((s) => c.send(Uint8Array.from(s, (ch) => ch.charCodeAt(0) & 0xff))),
      t.onResize(({ cols, rows }) => c.resize(cols, rows)),
    ]
    c.connect()
    const ro = typeof ResizeObserver === 'undefined' ? undefined : new ResizeObserver(() => doFit())
    ro?.observe(el)
    window.addEventListener('resize', doFit)
    // A page kept in the back-forward cache keeps its WebSocket, whose pings the browser
    // answers: let go of it while hidden, reattach to the same shell when shown again.
    const onHide = (e: PageTransitionEvent) => e.persisted && c.suspend()
    const onShow = (e: PageTransitionEvent) => e.persisted && c.resume()
    window.addEventListener('pagehide', onHide)
    window.addEventListener('pageshow', onShow)
    return () => {
      window.removeEventListener('pagehide', onHide)
      window.removeEventListener('pageshow', onShow)
      window.removeEventListener('resize', doFit)
      ro?.disconnect()
      c.close()
      subs.forEach((d) => d.dispose())
      t.dispose()
      term.current = undefined
      conn.current = undefined
    }
  }, [workspaceId, WebSocket, backoff])

  useEffect(() => {
    if (!active) return
    fitRef.current()
    term.current?.focus()
  }, [active])

  useEffect(() => {
    if (!ended || !conn.current) return
    const c = conn.current
    if (c.state === 'exited' || c.state === 'closed') return
    c.close()
    term.current?.write('\r\n\x1b[2m[the workspace has stopped]\x1b[0m\r\n')
  }, [ended])

  const { s, info } = state
  return (
    <>
      <div className="termbar">
        <span className={`termstate t-${s}`} role="status" data-testid="terminal-state" data-state={s}>
          {stateText(s, info)}
        </span>
        {(s === 'reconnecting' || s === 'failed') && !ended && (
          <button type="button" className="secondary small" onClick={() => conn.current?.reconnectNow()}>
            {s === 'failed' ? 'Reconnect' : 'Reconnect now'}
          </button>
        )}
      </div>
      <div className="termhost" ref={host} data-testid="terminal" data-active={active ? 'true' : 'false'} data-state={s} data-session={info.session ?? ''} />
    </>
  )
}

interface Tab {
  key: number
  state: ConnState
}

/** The terminal's tabs: each a new shell; "+" opens another. */
export default function WorkspaceTerminal({
  workspaceId,
  ended = false,
  onConnect,
  WebSocket,
  backoff,
}: {
  workspaceId: number
  ended?: boolean
  /** A shell connected (the workspace's connection count changed). */
  onConnect?: () => void
  WebSocket?: WSConstructor
  backoff?: (attempt: number) => number
}) {
  const next = useRef(2)
  const [tabs, setTabs] = useState<Tab[]>([{ key: 1, state: 'connecting' }])
  const [active, setActive] = useState(1)
  const add = () => {
    const key = next.current++
    setTabs((ts) => [...ts, { key, state: 'connecting' }])
    setActive(key)
  }
  const remove = (key: number) => {
    const i = tabs.findIndex((t) => t.key === key)
    const rest = tabs.filter((t) => t.key !== key)
    setTabs((ts) => ts.filter((t) => t.key !== key))
    if (key === active && rest.length) setActive(rest[Math.max(0, i - 1)].key)
  }
  const last = useRef(new Map<number, ConnState>())
  const onState = (key: number) => (state: ConnState) => {
    if (last.current.get(key) === state) return
    last.current.set(key, state)
    setTabs((ts) => ts.map((t) => (t.key === key ? { ...t, state } : t)))
    if (state === 'open') onConnect?.()
  }
  return (
    <div className="terminal">
      <div className="termtabs" role="tablist" aria-label="Shells">
        {tabs.map((t) => (
          <span key={t.key} className={`termtab ${t.key === active ? 'active' : ''}`}>
            <button
              type="button"
              role="tab"
              id={`shell-tab-${t.key}`}
              aria-selected={t.key === active}
              aria-controls={`shell-${t.key}`}
              onClick={() => setActive(t.key)}
              data-tab={t.key}
            >
              <span className={`dot t-${t.state}`} aria-hidden="true" /> Shell {t.key}
            </button>
            <button type="button" className="closetab" aria-label={`Close shell ${t.key}`} onClick={() => remove(t.key)}>
              ×
            </button>
          </span>
        ))}
        {!ended && tabs.length < MAX_TABS && (
          <button type="button" className="newtab" aria-label="New shell" title="New shell" onClick={add}>
            +
          </button>
        )}
      </div>
      {tabs.length === 0 && <p className="muted termempty">No shell open. {!ended && 'Open one with +.'}</p>}
      {tabs.map((t) => (
        <div key={t.key} id={`shell-${t.key}`} role="tabpanel" aria-labelledby={`shell-tab-${t.key}`} hidden={t.key !== active} className="termpane">
          <TerminalPane workspaceId={workspaceId} active={t.key === active} ended={ended} onState={onState(t.key)} WebSocket={WebSocket} backoff={backoff} />
        </div>
      ))}
    </div>
  )
}
