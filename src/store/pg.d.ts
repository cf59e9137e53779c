/**
 * The little of node-postgres (`pg`, a direct dependency, pinned to the version @effect/sql-pg uses; it ships no typings)
 * that the gateway uses: the notification listener's client (src/services/Notifications.ts) and
 * the default type parsers (src/store/pg-types.ts).
 */
declare module "pg" {
  export interface Notification {
    readonly processId: number
    readonly channel: string
    readonly payload?: string
  }
  export interface ClientConfig {
    readonly connectionString: string
    readonly application_name?: string
    readonly connectionTimeoutMillis?: number
    readonly keepAlive?: boolean
  }
  export class Client {
    constructor(config: ClientConfig)
    /** The backend's process id once connected (for pg_terminate_backend). */
    readonly processID: number | null
    connect(): Promise<void>
    query(text: string, values?: ReadonlyArray<unknown>): Promise<{ readonly rows: Array<Record<string, unknown>> }>
    end(): Promise<void>
    on(event: "notification", listener: (notification: Notification) => void): this
    on(event: "error", listener: (error: Error) => void): this
    on(event: "end", listener: () => void): this
    removeAllListeners(): this
  }
  export type TextParser = (value: string) => unknown
  export interface TypeParsers {
    readonly getTypeParser: (oid: number, format?: "text" | "binary") => TextParser
  }
  const pg: { readonly Client: typeof Client; readonly types: TypeParsers }
  export default pg
}
