import { render, screen } from '@testing-library/react'
import { MemoryRouter } from 'react-router'
import { ErrorBox } from './ui'
import { ApiError, inTeamWords } from '../lib/api'

describe('ErrorBox', () => {
  it('shows a 404 as a not-found page in the dashboard words, without "Try again"', () => {
    const { container } = render(
      <MemoryRouter>
        <ErrorBox error={new ApiError(404, 'not_found', 'org "ghost" not found')} retry={() => {}} />
      </MemoryRouter>,
    )
    expect(screen.getByText('Not found')).toBeTruthy()
    expect(container.textContent).toContain('team "ghost" not found')
    expect(container.textContent).not.toContain('org')
    expect(container.textContent).not.toContain('Try again')
  })
  it('offers a retry for other errors', () => {
    render(
      <MemoryRouter>
        <ErrorBox error={new ApiError(503, 'unavailable', 'the database did not answer')} retry={() => {}} />
      </MemoryRouter>,
    )
    expect(screen.getByText('Try again')).toBeTruthy()
  })
  it('says team for org', () => {
    expect(inTeamWords('org "a" not found; orgs and organized')).toBe('team "a" not found; teams and organized')
  })
})
