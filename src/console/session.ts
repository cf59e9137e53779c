/** Who is signed in, and what every page is given. */
export interface Session {
  readonly key: string
  readonly management: boolean
  readonly label: string
  readonly workspaceId: string
}

export interface PageProps {
  readonly session: Session
  /** The page's query string (filters, the open record): a page's state survives a reload and can be linked. */
  readonly params: URLSearchParams
  readonly navigate: (to: string) => void
}
