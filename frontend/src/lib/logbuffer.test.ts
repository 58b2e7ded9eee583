import { LogBuffer, timeAt, utf8Length } from './logbuffer'
import { plainText } from './ansi'

describe('LogBuffer', () => {
  it('joins chunks that split lines', () => {
    const b = new LogBuffer()
    b.append('first li')
    expect(b.count).toBe(1)
    b.append('ne\nsecond\n')
    expect(b.count).toBe(2)
    expect(b.lines.slice(0, 2)).toEqual(['first line', 'second'])
    b.append('\nthird')
    expect(b.count).toBe(4)
    expect(b.lines[2]).toBe('')
    expect(b.lines[3]).toBe('third')
  })

  it('is empty until something is written', () => {
    const b = new LogBuffer()
    expect(b.count).toBe(0)
    b.append('')
    expect(b.count).toBe(0)
  })

  it('finds lines by their visible text', () => {
    const b = new LogBuffer()
    b.append('ok\n\x1b[31mERR\x1b[0mOR here\nfine\nan error\n')
    expect(b.search('error', plainText)).toEqual([1, 3])
    expect(b.search('', plainText)).toEqual([])
    expect(b.search('[31m', plainText)).toEqual([])
  })

  it('knows the byte offset where each line starts, across split chunks and multi-byte text', () => {
    const b = new LogBuffer()
    b.append('ab\nc')
    b.append('é\n😀x\n')
    expect(b.lines.slice(0, 3)).toEqual(['ab', 'cé', '😀x'])
    // "ab\n" is 3 bytes, "cé\n" 4 (é is 2), "😀x\n" 6 (the emoji is 4).
    expect(b.starts.slice(0, 3)).toEqual([0, 3, 7])
    expect(utf8Length('😀x')).toBe(5)
    expect(utf8Length('€')).toBe(3)
  })

  it('times a line by the piece it starts in', () => {
    const marks = [
      { offset: 0, at: 1000 },
      { offset: 3, at: 2000 },
      { offset: 10, at: 3000 },
    ]
    expect(timeAt(marks, 0)).toBe(1000)
    expect(timeAt(marks, 2)).toBe(1000)
    expect(timeAt(marks, 3)).toBe(2000)
    expect(timeAt(marks, 9)).toBe(2000)
    expect(timeAt(marks, 500)).toBe(3000)
    expect(timeAt([], 5)).toBeUndefined()
    expect(timeAt([{ offset: 4, at: 1 }], 2)).toBeUndefined()
  })
})
