/**
 * Observability destinations: CRUD with tenancy (a destination belongs to a workspace; a user
 * sees those of the workspaces it owns or is a member of, and changes, tests and redelivers those
 * of the workspaces it administers), config validated per kind, secret config values sealed at
 * rest (Secrets) and masked on the way out.
 */
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Either, Option, Schema } from "effect"
import {
  type CreateDestinationPayload,
  type Destination,
  type DestinationConfig,
  DestinationKinds,
  type DestinationRules,
  type DeliveryStatus,
  configUrls,
  decodeConfig,
  type FilterRules,
  maskConfig,
  mergeConfig,
  type UpdateDestinationPayload,
} from "../domain/destinations.js"
// Up a floor, on purpose: deleting a destination deletes its outbox deliveries in the same
// transaction, and the outbox's SQL is broadcast's (queue.ts uses only the SQL client, none of
// broadcast's worker, so no circle can close through it).
import { deleteDeliveries } from "../broadcast/queue.js"
import { GatewayConfig } from "../config/Config.js"
import { BadRequest, Forbidden, NotFound } from "../domain/errors.js"
import { type PageParams, pageOf } from "../domain/paging.js"
import { refusalOf } from "../outbound/fetch.js"
import { KeyStore } from "./KeyStore.js"
import { Notifications } from "./Notifications.js"
import { Secrets } from "./secrets.js"
import { Users } from "./Users.js"
import { canonicalId, clipped } from "../domain/validation.js"

interface DestinationRow {
  readonly id: string
  readonly workspace_id: string
  readonly created_by: string
  readonly name: string
  readonly type: string
  readonly enabled: number
  readonly privacy_mode: number
  readonly sampling_rate: number
  readonly api_key_hashes: string | null
  readonly filter_rules: string | null
  readonly config: string
  readonly regions: string
  readonly broadcast_generation_cost: number
  readonly broadcast_generation_identity: number
  readonly broadcast_generation_request_context: number
  readonly created_at: string
  readonly updated_at: string
  readonly last_success_at?: string | null
  readonly last_error?: string | null
  readonly last_error_at?: string | null
}

/** The caller, as far as destinations care. */
export interface DestinationCaller {
  readonly userId: string
  /** The calling key's workspace: the default for a new destination. */
  readonly workspaceId: string
}

/** A destination with its config in plain text, for delivery (never for a response). */
export type ResolvedDestination = Omit<Destination, "config" | "delivery"> & { readonly config: DestinationConfig }

/** How long a receiver's name may take to resolve when it is checked (a name that does not resolve in time is checked at delivery). */
const RECEIVER_CHECK_TIMEOUT_MS = 3_000

const bit = (b: boolean) => (b ? 1 : 0)

const notFound = (id: string) => new NotFound({ message: `Observability destination ${clipped(id)} not found` })

/** The notice a destination's write publishes to the other processes on the database: drop that workspace's cached targets. */
export const DESTINATION_CHANGED = "destination.changed"
const decodeDestinationChanged = Schema.decodeUnknownOption(Schema.Struct({ workspace_id: Schema.String }))

/**
 * A destination read with its secrets in plain text, for delivery: the service below and the
 * delivery Worker (which has no service of its own, only a connection and the secret key).
 */
export const destinationReader = (sql: SqlClient.SqlClient, secrets: Pick<Secrets, "isSealed" | "open">) => {
  const openValue = (value: string) => (secrets.isSealed(value) ? secrets.open(value) : Either.right(value))

  /** The stored config in plain text, or the first value that cannot be decrypted. */
  const openConfig = (row: DestinationRow) => {
    const stored = JSON.parse(row.config) as DestinationConfig
    const out: Record<string, string | Record<string, string>> = {}
    for (const [key, value] of Object.entries(stored)) {
      if (typeof value === "string") {
        const plain = openValue(value)
        if (Either.isLeft(plain)) return Either.left(plain.left)
        out[key] = plain.right
      } else {
        const map: Record<string, string> = {}
        for (const [name, v] of Object.entries(value)) {
          const plain = openValue(v)
          if (Either.isLeft(plain)) return Either.left(plain.left)
          map[name] = plain.right
        }
        out[key] = map
      }
    }
    return Either.right(out as DestinationConfig)
  }

  const plainConfig = (row: DestinationRow) =>
    Either.match(openConfig(row), {
      onLeft: (e) => Effect.die(new Error(`Observability destination ${row.id}: ${e.message}`)),
      onRight: Effect.succeed,
    })

  const base = (row: DestinationRow) => ({
    id: row.id,
    workspace_id: row.workspace_id,
    name: row.name,
    type: row.type,
    enabled: Number(row.enabled) === 1,
    privacy_mode: Number(row.privacy_mode) === 1,
    sampling_rate: Number(row.sampling_rate),
    api_key_hashes: row.api_key_hashes === null ? null : (JSON.parse(row.api_key_hashes) as Array<string>),
    filter_rules: row.filter_rules === null ? null : (JSON.parse(row.filter_rules) as FilterRules),
    regions: JSON.parse(row.regions) as Destination["regions"],
    broadcast_generation_cost: Number(row.broadcast_generation_cost) === 1,
    broadcast_generation_identity: Number(row.broadcast_generation_identity) === 1,
    broadcast_generation_request_context: Number(row.broadcast_generation_request_context) === 1,
    created_at: row.created_at,
    updated_at: row.updated_at,
  })

  const load = (id: string) =>
    sql<DestinationRow>`SELECT * FROM observability_destinations WHERE id = ${canonicalId(id)}`.pipe(
      Effect.map((rows) => Option.fromNullable(rows[0])),
      Effect.orDie,
    )

  const resolve = (row: DestinationRow) =>
    Effect.map(plainConfig(row), (config): ResolvedDestination => ({ ...base(row), config }))

  /** One destination with its secrets in plain text (delivery), whoever owns it. */
  const resolved = (id: string) =>
    Effect.flatMap(load(id), (row) => (Option.isNone(row) ? Effect.succeed(Option.none()) : Effect.asSome(resolve(row.value))))
  return { openConfig, plainConfig, base, load, resolve, resolved } as const
}

export class Destinations extends Effect.Service<Destinations>()("Destinations", {
  // long: the service's layer body, one closure by design: its methods share the SQL client, caches and subscriptions it opens (Effect.Service)
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const secrets = yield* Secrets
    const users = yield* Users
    const keys = yield* KeyStore
    const notifications = yield* Notifications
    const settings = yield* GatewayConfig
    const kinds = yield* DestinationKinds
    const { openConfig, plainConfig, base, load, resolve, resolved } = destinationReader(sql, secrets)

    const nowIso = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms).toISOString())

    // Who caches destinations (the broadcast outbox) hears of every change, made here or (on
    // Postgres) by another process on the database; `undefined`: any workspace's may have changed.
    const listeners = new Set<(workspaceId: string | undefined) => void>()
    /** Calls `listener` with the workspace of every destination created, changed or deleted; returns its removal. */
    const onChange = (listener: (workspaceId: string | undefined) => void): (() => void) => {
      listeners.add(listener)
      return () => {
        listeners.delete(listener)
      }
    }
    const tell = (workspaceId: string | undefined) => {
      for (const listener of listeners) listener(workspaceId)
    }
    const changed = (workspaceId: string) =>
      Effect.sync(() => tell(workspaceId)).pipe(Effect.zipRight(notifications.publish(DESTINATION_CHANGED, { workspace_id: workspaceId })))
    notifications.subscribe(DESTINATION_CHANGED, (payload, own) => {
      if (own) return
      const notice = decodeDestinationChanged(payload)
      if (Option.isSome(notice)) tell(notice.value.workspace_id)
    })
    // Notices may have been missed (the listener's connection was lost): every workspace's targets may be stale.
    notifications.onResync(() => tell(undefined))

    /** The destination's delivery status: its last outcome and its queue. */
    const deliveryOf = (row: DestinationRow) =>
      Effect.map(
        sql<{ state: string; n: number }>`SELECT state, SUM(generations) AS n FROM broadcast_deliveries
          WHERE destination_id = ${row.id} AND state IN ('pending', 'dead') GROUP BY state`.pipe(Effect.orDie),
        (counts): DeliveryStatus => ({
          last_success_at: row.last_success_at ?? null,
          last_error: row.last_error ?? null,
          last_error_at: row.last_error_at ?? null,
          pending: Number(counts.find((c) => c.state === "pending")?.n ?? 0),
          dead: Number(counts.find((c) => c.state === "dead")?.n ?? 0),
        }),
      )

    /** The kind of a new or changed destination (the API has checked the name; a caller of the service may not have). */
    const kindOf = (type: string): Effect.Effect<DestinationRules, BadRequest> => {
      const rules = kinds.get(type)
      return rules === undefined
        ? Effect.fail(new BadRequest({ message: `Invalid request: type: must be one of ${[...kinds.keys()].join(", ")}` }))
        : Effect.succeed(rules)
    }

    /** A stored config as it may be shown; a kind this gateway no longer knows shows every value masked. */
    const masked = (type: string, config: DestinationConfig): DestinationConfig => {
      const keys = Object.keys(config)
      return maskConfig(kinds.get(type) ?? { kind: type, config: Schema.Unknown, secretFields: keys, secretMaps: keys }, config)
    }

    /** Secret values sealed one by one (a random IV each), the rest as is. */
    const sealConfig = (rules: DestinationRules, config: DestinationConfig): DestinationConfig =>
      Object.fromEntries(
        Object.entries(config).map(([key, value]) => {
          if (typeof value === "string") return [key, rules.secretFields.includes(key) ? secrets.seal(value) : value]
          if (rules.secretMaps.includes(key)) {
            return [key, Object.fromEntries(Object.entries(value).map(([name, v]) => [name, secrets.seal(v)]))]
          }
          return [key, value]
        }),
      )

    /** The wire object: secrets masked. A secret that cannot be decrypted shows fully masked (and is logged). */
    const view = (row: DestinationRow): Effect.Effect<Destination> =>
      Effect.flatMap(deliveryOf(row), (delivery) =>
        Either.match(openConfig(row), {
          onRight: (config) => Effect.succeed({ ...base(row), config: masked(row.type, config), delivery }),
          onLeft: (e) =>
            Effect.as(Effect.logWarning(`Observability destination ${row.id}: ${e.message}`), {
              ...base(row),
              config: masked(row.type, JSON.parse(row.config) as DestinationConfig),
              delivery,
            }),
        }),
      )

    /**
     * A change of where a destination sends (its receiver URLs) that keeps a stored secret without
     * the caller sending it again: the secret's key (a header's as `headers.<name>`), else
     * undefined. Whoever may change the URL could otherwise send the secret to an address of
     * their own with a test delivery; giving it again shows they hold it.
     */
    const secretKeptOnMove = (
      rules: DestinationRules,
      stored: DestinationConfig,
      merged: DestinationConfig,
      patch: Readonly<Record<string, unknown>>,
    ): string | undefined => {
      // A receiver removed (the vendor's own host again) sends nowhere new; one set or changed does.
      const before = new Set(configUrls(rules, stored).map((u) => `${u.key}\u0000${u.url}`))
      if (configUrls(rules, merged).every((u) => before.has(`${u.key}\u0000${u.url}`))) return undefined
      for (const key of rules.secretFields) {
        const before = stored[key]
        if (typeof before === "string" && merged[key] === before && patch[key] !== before) return key
      }
      for (const key of rules.secretMaps) {
        const before = stored[key]
        const after = merged[key]
        const given = patch[key]
        if (typeof before !== "object" || typeof after !== "object") continue
        for (const [name, value] of Object.entries(after)) {
          const sent = typeof given === "object" && given !== null ? (given as Record<string, unknown>)[name] : undefined
          if (Object.hasOwn(before, name) && before[name] === value && sent !== value) return `${key}.${name}`
        }
      }
      return undefined
    }

    /** The row, if the user may see it; otherwise 404 (existence does not leak). */
    const visible = (userId: string, id: string) =>
      Effect.gen(function* () {
        const row = yield* load(id)
        if (Option.isNone(row) || !(yield* users.canUseWorkspace(userId, row.value.workspace_id))) {
          return yield* notFound(id)
        }
        return row.value
      })

    /**
     * Only the workspace's admins (its owner, admin members) add, change, test, redeliver or remove
     * its destinations: a destination holds the workspace's vendor secrets, which a change of its
     * URL and a test would send elsewhere, and receives its members' prompts. A plain member reads
     * them, secrets masked (403 otherwise; 404 when the workspace is not theirs at all).
     */
    const notAdmin = (workspaceId: string) =>
      new Forbidden({
        message: `Only admins of workspace ${workspaceId} can add, change, test, redeliver or remove its observability destinations; your role is member`,
      })
    const requireAdmin = (userId: string, workspaceId: string) =>
      Effect.gen(function* () {
        const role = yield* users.roleIn(userId, workspaceId)
        if (role === undefined) return yield* new NotFound({ message: `Workspace ${clipped(workspaceId)} not found` })
        if (role !== "admin") return yield* notAdmin(workspaceId)
      })

    /** The row, if the user administers its workspace (see `requireAdmin`); 404 when it may not see it. One read of the role answers both. */
    const administered = (userId: string, id: string) =>
      Effect.gen(function* () {
        const row = yield* load(id)
        const role = Option.isNone(row) ? undefined : yield* users.roleIn(userId, row.value.workspace_id)
        if (Option.isNone(row) || role === undefined) return yield* notFound(id)
        if (role !== "admin") return yield* notAdmin(row.value.workspace_id)
        return row.value
      })

    /** A receiver the outbound fetcher would refuse (private, loopback, metadata) is refused now, not retried at every delivery. */
    const checkReceivers = (rules: DestinationRules, config: DestinationConfig) =>
      Effect.forEach(
        configUrls(rules, config),
        ({ key, url }) =>
          Effect.flatMap(
            Effect.promise(() => refusalOf(url, settings.allowPrivateAddresses, RECEIVER_CHECK_TIMEOUT_MS)),
            (why) => (why === undefined ? Effect.void : Effect.fail(new BadRequest({ message: `Invalid request: config.${key}: ${why}` }))),
          ),
        { discard: true },
      )

    const checkKeyHashes = (userId: string, hashes: ReadonlyArray<string> | null | undefined) =>
      Effect.forEach(
        hashes ?? [],
        (hash, i) =>
          Effect.flatMap(keys.findForUser(userId, hash), (row) =>
            Option.isSome(row)
              ? Effect.void
              : Effect.fail(new BadRequest({ message: `Invalid request: api_key_hashes[${i}]: ${hash} is not one of your API keys` })),
          ),
        { discard: true },
      )

    const create = (caller: DestinationCaller, payload: CreateDestinationPayload) =>
      Effect.gen(function* () {
        const workspaceId = payload.workspace_id ?? caller.workspaceId
        yield* requireAdmin(caller.userId, workspaceId)
        const rules = yield* kindOf(payload.type)
        const config = yield* decodeConfig(rules, payload.config)
        yield* checkReceivers(rules, config)
        yield* checkKeyHashes(caller.userId, payload.api_key_hashes)
        const id = crypto.randomUUID()
        const now = yield* nowIso
        yield* sql`INSERT INTO observability_destinations ${sql.insert({
          id,
          workspace_id: workspaceId,
          created_by: caller.userId,
          name: payload.name,
          type: payload.type,
          enabled: bit(payload.enabled ?? true),
          privacy_mode: bit(payload.privacy_mode ?? false),
          sampling_rate: payload.sampling_rate ?? 1,
          api_key_hashes: payload.api_key_hashes == null ? null : JSON.stringify(payload.api_key_hashes),
          filter_rules: payload.filter_rules == null ? null : JSON.stringify(payload.filter_rules),
          config: JSON.stringify(sealConfig(rules, config)),
          regions: JSON.stringify(payload.regions ?? ["global"]),
          broadcast_generation_cost: bit(payload.broadcast_generation_cost ?? true),
          broadcast_generation_identity: bit(payload.broadcast_generation_identity ?? true),
          broadcast_generation_request_context: bit(payload.broadcast_generation_request_context ?? true),
          created_at: now,
          updated_at: now,
        })}`.pipe(Effect.orDie)
        yield* changed(workspaceId)
        return yield* view(Option.getOrThrow(yield* load(id)))
      })

    /** One page of the destinations of every workspace the user can use, or of one of them, and their total. */
    const list = (userId: string, workspaceId: string | undefined, page: PageParams) =>
      Effect.gen(function* () {
        if (workspaceId !== undefined && !(yield* users.canUseWorkspace(userId, workspaceId))) {
          return yield* new NotFound({ message: `Workspace ${clipped(workspaceId)} not found` })
        }
        const rows = yield* sql<DestinationRow>`SELECT d.* FROM observability_destinations d
          WHERE d.workspace_id IN (
            SELECT w.id FROM workspaces w WHERE w.owner_user_id = ${userId}
            UNION SELECT m.workspace_id FROM workspace_members m WHERE m.user_id = ${userId})
          ${workspaceId === undefined ? sql`` : sql`AND d.workspace_id = ${workspaceId}`}
          ORDER BY d.created_at, d.id`.pipe(Effect.orDie)
        // Paged before `view`: only the page's secrets are decrypted.
        const { data, total_count } = pageOf(rows, page)
        return { data: yield* Effect.forEach(data, view), total_count }
      })

    const get = (userId: string, id: string) => Effect.flatMap(visible(userId, id), view)

    const update = (userId: string, id: string, payload: UpdateDestinationPayload) =>
      Effect.gen(function* () {
        const row = yield* administered(userId, id)
        const type = payload.type ?? row.type
        const sets = [sql`updated_at = ${yield* nowIso}`]
        if (payload.config !== undefined || type !== row.type) {
          // Another kind starts from an empty config: the old kind's keys and secrets do not carry over.
          const stored = type === row.type ? yield* plainConfig(row) : {}
          const rules = yield* kindOf(type)
          const config = yield* decodeConfig(rules, mergeConfig(rules, stored, payload.config ?? {}))
          const kept = secretKeptOnMove(rules, stored, config, payload.config ?? {})
          if (kept !== undefined) {
            return yield* new BadRequest({
              message: `Invalid request: config.${kept}: send the secret again to change where the destination sends (${configUrls(rules, config)
                .map((u) => u.key)
                .join(", ")}); a stored secret is not sent to a new address`,
            })
          }
          yield* checkReceivers(rules, config)
          sets.push(sql`type = ${type}`, sql`config = ${JSON.stringify(sealConfig(rules, config))}`)
        }
        if (payload.api_key_hashes !== undefined) {
          yield* checkKeyHashes(userId, payload.api_key_hashes)
          sets.push(sql`api_key_hashes = ${payload.api_key_hashes === null ? null : JSON.stringify(payload.api_key_hashes)}`)
        }
        if (payload.name !== undefined) sets.push(sql`name = ${payload.name}`)
        if (payload.enabled !== undefined) sets.push(sql`enabled = ${bit(payload.enabled)}`)
        if (payload.privacy_mode !== undefined) sets.push(sql`privacy_mode = ${bit(payload.privacy_mode)}`)
        if (payload.sampling_rate !== undefined) sets.push(sql`sampling_rate = ${payload.sampling_rate}`)
        if (payload.filter_rules !== undefined) {
          sets.push(sql`filter_rules = ${payload.filter_rules === null ? null : JSON.stringify(payload.filter_rules)}`)
        }
        if (payload.regions !== undefined) sets.push(sql`regions = ${JSON.stringify(payload.regions)}`)
        if (payload.broadcast_generation_cost !== undefined) {
          sets.push(sql`broadcast_generation_cost = ${bit(payload.broadcast_generation_cost)}`)
        }
        if (payload.broadcast_generation_identity !== undefined) {
          sets.push(sql`broadcast_generation_identity = ${bit(payload.broadcast_generation_identity)}`)
        }
        if (payload.broadcast_generation_request_context !== undefined) {
          sets.push(sql`broadcast_generation_request_context = ${bit(payload.broadcast_generation_request_context)}`)
        }
        yield* sql`UPDATE observability_destinations SET ${sql.csv(sets)} WHERE id = ${row.id}`.pipe(Effect.orDie)
        yield* changed(row.workspace_id)
        return yield* view(Option.getOrThrow(yield* load(row.id)))
      })

    const remove = (userId: string, id: string) =>
      Effect.gen(function* () {
        const row = yield* administered(userId, id)
        yield* sql.withTransaction(
          Effect.zipRight(
            Effect.provideService(deleteDeliveries(row.id), SqlClient.SqlClient, sql),
            sql`DELETE FROM observability_destinations WHERE id = ${row.id}`,
          ),
        ).pipe(Effect.orDie)
        yield* changed(row.workspace_id)
      })

    /** The enabled destinations of a workspace, secrets in plain text (delivery). */
    const enabledFor = (workspaceId: string) =>
      Effect.flatMap(
        sql<DestinationRow>`SELECT * FROM observability_destinations WHERE workspace_id = ${workspaceId} AND enabled = 1
          ORDER BY created_at, id`.pipe(Effect.orDie),
        (rows) => Effect.forEach(rows, resolve),
      )

    return {
      create,
      list,
      get,
      /** Fails unless the user administers the destination's workspace (a test send, a redelivery): 404 or 403, as a change. */
      requireAdministered: (userId: string, id: string) => Effect.asVoid(administered(userId, id)),
      update,
      remove,
      resolved,
      enabledFor,
      onChange,
      /** What is delivered for a workspace changed outside this service (its broadcast switch): here and, by notice, in every process. */
      changed,
    } as const
  }),
  dependencies: [Secrets.Default, Users.Default, KeyStore.Default, Notifications.Default],
}) {}
