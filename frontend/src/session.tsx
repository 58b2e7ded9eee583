import { useQuery, useQueryClient } from '@tanstack/react-query'
import { ApiError, setCsrf } from './lib/api'
import { endpoints } from './lib/endpoints'
import type { User } from './lib/types'
import { keys } from './lib/keys'

export const USER_KEY = keys.user()

/** The signed-in user, or null; keeps the CSRF token of the session. */
export async function fetchUser(): Promise<User | null> {
  try {
    const u = await endpoints.user.get()
    setCsrf(u.csrf_token)
    return u
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      setCsrf('')
      return null
    }
    throw e
  }
}

export function useUser() {
  return useQuery({ queryKey: USER_KEY, queryFn: fetchUser, staleTime: 60_000, retry: 1 })
}

export function useSignedIn() {
  const qc = useQueryClient()
  return (user: User, csrf: string) => {
    setCsrf(csrf)
    qc.clear()
    qc.setQueryData(USER_KEY, user)
  }
}
