import { render } from '@testing-library/react'
import { Diagnostics } from './Diagnostics'
import type { Diagnostic } from '../lib/diagnostics'

const at = { file: '.cnb.yml', line: 3, column: 7 }
const info = { ...at, severity: 'info', message: 'the runner is the default one' } as Diagnostic
const warning = { ...at, severity: 'warning', message: 'unknown key "stags" in pipeline', hint: 'did you mean "stages"?' } as Diagnostic

describe('Diagnostics', () => {
  it('names only what is there: advice alone is advice, in an info box', () => {
    const { container } = render(<Diagnostics ds={[info]} failed={false} />)
    const box = container.querySelector('section')!
    expect(box.querySelector('h2')!.textContent).toBe('Advice on .cnb.yml (1 note)')
    expect(box.className).toContain('info')
    expect(box.className).not.toContain('warn')
  })

  it('counts warnings and advice apart, in a warning box', () => {
    const { container } = render(<Diagnostics ds={[warning, info, info]} failed={false} />)
    const box = container.querySelector('section')!
    expect(box.querySelector('h2')!.textContent).toBe('.cnb.yml has 1 warning and 2 notes of advice')
    expect(box.className).toContain('warn')
    expect(container.textContent).toContain('Did you mean "stages"?')
  })
})
