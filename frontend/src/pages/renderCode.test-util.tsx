import { render } from '@testing-library/react'
import { MemoryRouter, Route, Routes } from 'react-router'
import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import CodeRoutes from './CodeRoutes'

/** Renders the repo's /-/<kind> pages at path, with a fresh query cache that does not retry. */
export function renderCode(path: string) {
  const qc = new QueryClient({ defaultOptions: { queries: { retry: false } } })
  return render(
    <QueryClientProvider client={qc}>
      <MemoryRouter initialEntries={[path]}>
        <Routes>
          <Route path="/:org/:repo/-/:kind" element={<CodeRoutes />} />
        </Routes>
      </MemoryRouter>
    </QueryClientProvider>,
  )
}
