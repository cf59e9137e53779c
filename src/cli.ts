/**
 * The command line, in the same entry point as the server:
 * `gateway serve | migrate | keys create | keys list | credits add`.
 */
// Modules, not the package's index, which loads all of @effect/cli (see main.ts).
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as Usage from "@effect/cli/Usage"
import { SqlClient } from "@effect/sql"
import { Console, Data, Effect, Either, Layer, Option, Schema } from "effect"
import { intervalText, KeyName, MAX_LIMIT_USD, RateLimit, Usd } from "./domain/keys.js"
import { describeParseError } from "./domain/validation.js"
import { requeueDead } from "./broadcast/queue.js"
import { GatewayConfig } from "./config/Config.js"
import { parseWorkers, supervise } from "./supervisor.js"
import { type SupervisorMessage, workerChannel } from "./services/worker-channel.js"
import { KeyStore, type KeyRow, keyRowOf, type StoredKeyRow } from "./services/KeyStore.js"
import { newUserId, Users } from "./services/Users.js"
import { type MemberRow, WorkspaceStore } from "./services/WorkspaceStore.js"
import { clientLayer, migrate, StoreLive } from "./store/Store.js"

/** Services over the configured store, for commands that do not serve. */
const storeServices = Layer.mergeAll(KeyStore.Default, Users.Default, WorkspaceStore.Default).pipe(
  Layer.provideMerge(StoreLive),
  Layer.provide(GatewayConfig.fromEnv),
)

/** A refusal that stops the command: main.ts prints `gateway: <message>` on one line and exits 1. */
export class CliError extends Data.TaggedError("CliError")<{ readonly message: string }> {}

const codeOf = (e: unknown) => (typeof e === "object" && e !== null && "code" in e ? e.code : undefined)

/** The one line for a listen that failed on the operator's HOST or PORT, or undefined for anything else. */
const listenRefusal = (e: unknown, host: string, port: number): CliError | undefined => {
  switch (codeOf(e)) {
    case "EADDRINUSE":
      return new CliError({ message: `port ${port} on ${host} is in use (another gateway?); set PORT to a free port` })
    case "EADDRNOTAVAIL":
      return new CliError({ message: `HOST: ${host} is not an address of this machine; set HOST to one of its addresses (127.0.0.1, 0.0.0.0 for all)` })
    case "EINVAL":
      return new CliError({ message: `HOST: ${JSON.stringify(host)} is not an IP address; set HOST to one of this machine's addresses (127.0.0.1, 0.0.0.0 for all)` })
    case "EACCES":
      return new CliError({ message: `PORT: ${port} on ${host} needs privileges this process lacks (ports below 1024); set PORT to 1024 or more` })
    default:
      return undefined
  }
}

/** The command that starts this program again as one worker: compiled, the binary; else bun and the script. */
const workerCommand = (): Array<string> => {
  const script = process.argv[1] ?? ""
  const compiled = script.startsWith("/$bunfs/") || script.startsWith("B:/~BUN/")
  return compiled ? [process.execPath, "serve"] : [process.execPath, script, "serve"]
}

const workersOption = Options.text("workers").pipe(
  Options.optional,
  Options.withDescription("Worker processes accepting on the same port: a number, or auto for the machine's cores (env GATEWAY_WORKERS; default 1)"),
)

const serve = Command.make("serve", { workers: workersOption }, ({ workers }) =>
  Effect.gen(function* () {
    const settingsNow = yield* Effect.provide(GatewayConfig, GatewayConfig.fromEnv)
    const { port, host } = settingsNow
    const workersText = Option.getOrElse(workers, () => process.env["GATEWAY_WORKERS"] ?? "1")
    const count = parseWorkers(workersText)
    if (count === undefined) {
      return yield* new CliError({ message: `--workers (GATEWAY_WORKERS): must be a whole number from 1 to 9999 or auto, not ${JSON.stringify(workersText)}` })
    }
    const channel = workerChannel()
    if (count > 1 && channel === undefined && port === 0) {
      // PORT=0 would give each worker a port of its own: the supervisor picks one free port for all.
      const probe = Bun.listen({ hostname: host, port: 0, socket: { data: () => undefined } })
      process.env["PORT"] = String(probe.port)
      probe.stop(true)
    }
    if (count > 1 && channel === undefined) {
      // Uninterruptible: on SIGTERM the runtime would interrupt this fiber and exit at once, before
      // the supervisor's own handler had drained its workers (they were left running, re-parented).
      // The supervisor exits by itself once they have stopped.
      return yield* Effect.uninterruptible(Effect.promise(() =>
        supervise({
          workers: count,
          command: workerCommand(),
          instanceId: settingsNow.instanceId,
          dataDir: settingsNow.dataDir,
          metricsPort: settingsNow.supervisorMetricsPort,
          redisConfigured: settingsNow.redis !== undefined,
          log: (line) => console.log(line),
        }),
      ))
    }
    const running = yield* Effect.tryPromise({
      // Loaded here, not at the top: the other commands (keys, members, migrate…) need none of the
      // server's modules, and each run of them would load them (~0.2 s a command).
      try: () => import("./http/server.js").then(({ startServer }) => startServer(GatewayConfig.fromEnv, { reusePort: channel !== undefined })),
      catch: (e) => listenRefusal(e, host, port) ?? e,
    }).pipe(Effect.catchIf((e) => !(e instanceof CliError), Effect.die))
    const { settings } = running
    if (channel !== undefined) {
      // A worker: its metrics go to the supervisor when it asks; it says when it listens.
      process.on("message", (message: SupervisorMessage) => {
        if (message.t === "metrics-request") channel.send({ t: "metrics", id: message.id, text: running.metrics?.render() ?? "" })
      })
      channel.send({ t: "ready" })
    }
    yield* Console.log(
      `gateway${channel === undefined ? "" : ` worker ${channel.index}`} listening on ${running.url}/v1 (bound to ${settings.host}${settings.host === "127.0.0.1" ? ", this machine only: set HOST to serve others" : ""}; store: ${settings.databaseUrl.startsWith("postgres") ? "postgres" : settings.databaseUrl}, catalog: ${settings.configSource})`,
    )
    if (Option.isSome(running.createdSecret)) {
      const secret = running.createdSecret.value
      yield* Console.log(
        [
          "",
          "Created the first management key. It is shown only this once; keep it safe:",
          `  ${secret}`,
          "Try it:",
          `  curl -s ${running.url}/v1/key -H "Authorization: Bearer ${secret}"`,
          "",
        ].join("\n"),
      )
    } else if (channel === undefined || channel.index === 0) {
      yield* Console.log(
        Option.isSome(settings.managementKey)
          ? "The management key is GATEWAY_MANAGEMENT_KEY's; make another with: gateway keys create --management --name NAME"
          : "A management key exists already (its secret is not shown again); make another with: gateway keys create --management --name NAME",
      )
    }
    // SIGHUP's default ends the process at once (a stream cut without its end, the ledger's batch
    // lost): a reload replaces workers, which only the supervisor does (`serve --workers`); a worker
    // gets its SIGHUP from a terminal's hangup of the process group, not meant for it.
    process.on("SIGHUP", () =>
      console.log(
        channel === undefined
          ? "gateway: SIGHUP ignored: a reload needs serve --workers N (the supervisor replaces the workers; docs/operations.md)"
          : `gateway worker ${channel.index}: SIGHUP ignored (the supervisor reloads)`,
      ),
    )
    // SIGTERM/SIGINT interrupt the main fiber (runMain): stop accepting, let open streams finish
    // (GATEWAY_SHUTDOWN_GRACE_MS), flush the ledger, exit 0. A second signal cuts the streams at once.
    yield* Effect.never.pipe(
      Effect.onInterrupt(() =>
        Effect.promise(async () => {
          console.log(`gateway: draining (up to ${settings.shutdownGraceMs} ms for open streams)`)
          const cutNow = () => void running.server.stop(true)
          process.once("SIGTERM", cutNow)
          process.once("SIGINT", cutNow)
          const { cut } = await running.shutdown()
          console.log(`gateway: stopped${cut > 0 ? ` (${cut} request(s) cut at the deadline)` : ""}`)
        }),
      ),
    )
  }),
).pipe(Command.withDescription("Start the gateway (HTTP on HOST:PORT, default 127.0.0.1:8080)"))

const migrateCommand = Command.make("migrate", {}, () =>
  Effect.gen(function* () {
    const config = yield* GatewayConfig
    const ran = yield* Effect.provide(migrate, clientLayer(config.databaseUrl))
    yield* Console.log(ran.length === 0 ? "Database is up to date." : `Applied: ${ran.join(", ")}`)
  }).pipe(Effect.provide(GatewayConfig.fromEnv)),
).pipe(Command.withDescription("Apply database migrations (also done at start)"))

/** The user new keys belong to: --user, else the owner of the oldest management key, else a new user. */
const resolveUser = (user: Option.Option<string>) =>
  Effect.gen(function* () {
    if (Option.isSome(user)) return user.value
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ user_id: string }>`
      SELECT user_id FROM api_keys WHERE is_management = 1 AND deleted = 0 ORDER BY id LIMIT 1`
    return rows[0]?.user_id ?? newUserId()
  })

const describeKey = (row: KeyRow) =>
  [
    row.hash,
    row.label,
    row.is_management ? "management" : "inference",
    row.disabled ? "disabled" : "enabled",
    row.limit_usd === null ? "no limit" : `limit $${row.limit_usd}${row.limit_reset ? `/${row.limit_reset}` : ""}`,
    ...(row.rate_limit_requests === null || row.rate_limit_interval_ms === null
      ? []
      : [`rate ${row.rate_limit_requests}/${intervalText(row.rate_limit_interval_ms)}`]),
    row.user_id,
    JSON.stringify(row.name),
  ].join("  ")

/** `--rate-limit 10/10s` → the key's rate limit, by the same rules as the API's. */
const parseRateLimit = (text: string) => {
  const [requests, interval] = text.split("/")
  const decoded = Schema.decodeUnknownEither(RateLimit)({ requests: Number(requests), interval })
  return Either.isRight(decoded)
    ? Effect.succeed(decoded.right)
    : Effect.fail(new CliError({ message: `--rate-limit: must be REQUESTS/INTERVAL, e.g. 10/10s (requests an integer from 1, interval from 1s to 1d), not ${JSON.stringify(text)}` }))
}

/** A flag's value by the API's rule for the same field: the value, or the refusal naming the flag and the rule (as the API words it). */
const checked = <A>(flag: string, schema: Schema.Schema<A, A>, value: A) => {
  const decoded = Schema.decodeUnknownEither(schema)(value)
  if (Either.isRight(decoded)) return Effect.succeed(decoded.right)
  return Effect.fail(new CliError({ message: `${flag}: ${describeParseError(decoded.left)} (got ${JSON.stringify(String(value).slice(0, 40))})` }))
}

const keysCreate = Command.make(
  "create",
  {
    name: Options.text("name").pipe(Options.withDescription("Display name of the key")),
    management: Options.boolean("management").pipe(Options.withDescription("A management key")),
    limit: Options.float("limit").pipe(Options.optional, Options.withDescription("Spending limit in USD")),
    limitReset: Options.choice("limit-reset", ["daily", "weekly", "monthly"]).pipe(Options.optional),
    rateLimit: Options.text("rate-limit").pipe(
      Options.optional,
      Options.withDescription("Request rate limit as REQUESTS/INTERVAL, e.g. 10/10s or 600/1h"),
    ),
    user: Options.text("user").pipe(Options.optional, Options.withDescription("Owner user id")),
  },
  ({ name, management, limit, limitReset, rateLimit, user }) =>
    Effect.gen(function* () {
      const rate = Option.isNone(rateLimit) ? null : yield* parseRateLimit(rateLimit.value)
      // The API's rules for the same fields: -5, NaN or 1e20 were stored as limits, a 3,000-character name as the name.
      yield* checked("--name", KeyName, name)
      if (Option.isSome(limit)) yield* checked("--limit", Usd, limit.value)
      const keys = yield* KeyStore
      const users = yield* Users
      const userId = yield* resolveUser(user)
      const workspaceId = yield* users.ensure(userId)
      const { row, secret } = yield* keys.create({
        userId,
        workspaceId,
        name,
        isManagement: management,
        limit: Option.getOrNull(limit),
        limitReset: Option.getOrNull(limitReset),
        rateLimit: rate,
      })
      yield* Console.log(`Created ${describeKey(row)}`)
      yield* Console.log(`Secret (shown only now): ${secret}`)
    }).pipe(Effect.provide(storeServices)),
).pipe(Command.withDescription("Create an API key and print its secret once"))

const keysList = Command.make("list", {}, () =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = (yield* sql<StoredKeyRow>`SELECT * FROM api_keys WHERE deleted = 0 ORDER BY id`).map(keyRowOf)
    if (rows.length === 0) yield* Console.log("No keys.")
    for (const row of rows) yield* Console.log(describeKey(row))
  }).pipe(Effect.provide(storeServices)),
).pipe(Command.withDescription("List API keys (hash, label, kind, state, limit, owner, name)"))

const keys = Command.make("keys").pipe(
  Command.withSubcommands([keysCreate, keysList]),
  Command.withDescription("Manage API keys"),
)

const creditsAdd = Command.make(
  "add",
  {
    user: Options.text("user").pipe(Options.withDescription("User id")),
    amount: Options.float("amount").pipe(Options.withDescription("USD to add")),
  },
  ({ user, amount }) =>
    Effect.gen(function* () {
      if (!Number.isFinite(amount) || amount <= 0 || amount > MAX_LIMIT_USD) {
        return yield* refuse(`--amount: must be a positive number of USD, at most ${MAX_LIMIT_USD} (got ${amount})`)
      }
      const sql = yield* SqlClient.SqlClient
      const known = yield* sql<{ id: string }>`SELECT id FROM users WHERE id = ${user}`
      if (known.length === 0) return yield* refuse(`no user ${user} (users come with their keys: gateway keys create --user ${user} --name NAME)`)
      const keys = yield* KeyStore
      yield* keys.addCredits(user, amount, "gateway credits add")
      const balance = yield* keys.credits(user)
      yield* Console.log(`Added $${amount} to ${user}: total_credits=${balance.total_credits} total_usage=${balance.total_usage}`)
    }).pipe(Effect.provide(storeServices)),
).pipe(Command.withDescription("Add credits (USD) to a user's balance"))

const credits = Command.make("credits").pipe(
  Command.withSubcommands([creditsAdd]),
  Command.withDescription("Manage account credits"),
)

/** A refusal of the members commands: one line on stderr and a non-zero exit. */
const refuse = (message: string) =>
  Effect.zipRight(
    Console.error(`gateway: ${message}`),
    Effect.sync(() => {
      process.exitCode = 1
    }),
  )

/** The user the members commands act for: --as, else the owner of the oldest management key (none on an empty store). */
const actingUser = (as: Option.Option<string>) =>
  Effect.gen(function* () {
    if (Option.isSome(as)) return as
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ user_id: string }>`
      SELECT user_id FROM api_keys WHERE is_management = 1 AND deleted = 0 ORDER BY id LIMIT 1`
    return Option.fromNullable(rows[0]?.user_id)
  })

/**
 * The one workspace --workspace names: its id; else a slug of the acting user's workspaces (its
 * own first: every user has a `default`); else a slug only one workspace has.
 */
const oneWorkspace = (ref: string, as: Option.Option<string>) =>
  Effect.gen(function* () {
    const store = yield* WorkspaceStore
    const found = yield* store.findAny(ref)
    if (found.length === 1) return Option.some(found[0])
    const user = yield* actingUser(as)
    if (found.length > 1 && Option.isSome(user)) {
      const mine = yield* store.findForUser(user.value, ref)
      if (Option.isSome(mine)) return Option.some(mine.value.row)
    }
    yield* refuse(
      found.length === 0
        ? `no workspace ${ref}`
        : `${found.length} workspaces have the slug '${ref}' and none is ${Option.isSome(user) ? `${user.value}'s` : "yours"}; pass the workspace id, or --as <owner user id>`,
    )
    return Option.none()
  })

const describeMember = (m: MemberRow) =>
  [m.user_id, m.role, m.is_scim ? "scim" : "not-scim", m.created_at].join("  ")

const workspaceOption = Options.text("workspace").pipe(Options.withDescription("Workspace id (or a slug only one workspace has)"))
const userOption = Options.text("user").pipe(Options.withDescription("User id"))
const asOption = Options.text("as").pipe(
  Options.optional,
  Options.withDescription("Resolve a workspace slug among this user's workspaces (default: the owner of the first management key)"),
)

const membersAdd = Command.make(
  "add",
  {
    workspace: workspaceOption,
    user: userOption,
    scim: Options.boolean("scim").pipe(Options.withDescription("Mark the member as provisioned through SCIM")),
    role: Options.choice("role", ["admin", "member"]).pipe(Options.withDefault("member" as const)),
    as: asOption,
  },
  ({ workspace, user, scim, role, as }) =>
    Effect.gen(function* () {
      const ws = yield* oneWorkspace(workspace, as)
      if (Option.isNone(ws)) return
      const store = yield* WorkspaceStore
      const { added, members } = yield* store.addMembers(ws.value.id, [user], { role, scim })
      if (added === 0 && scim) yield* store.setScim(ws.value.id, user, true)
      const member = (yield* store.members(ws.value.id)).find((m) => m.user_id === user) ?? members[0]
      yield* Console.log(`${added === 1 ? "Added" : "Already a member"}: ${describeMember(member)}`)
    }).pipe(Effect.provide(storeServices)),
).pipe(Command.withDescription("Add a user to a workspace (a new user is created)"))

const membersSetScim = Command.make(
  "set-scim",
  {
    workspace: workspaceOption,
    user: userOption,
    on: Options.boolean("on").pipe(Options.withDescription("Provisioned through SCIM (cannot be removed by the API)")),
    off: Options.boolean("off").pipe(Options.withDescription("Not provisioned through SCIM")),
    as: asOption,
  },
  ({ workspace, user, on, off, as }) =>
    Effect.gen(function* () {
      if (on === off) return yield* refuse("pass exactly one of --on and --off")
      const ws = yield* oneWorkspace(workspace, as)
      if (Option.isNone(ws)) return
      const store = yield* WorkspaceStore
      if (!(yield* store.setScim(ws.value.id, user, on))) {
        return yield* refuse(`${user} is not a member of workspace ${ws.value.id}`)
      }
      yield* Console.log(`${user} in ${ws.value.id}: SCIM ${on ? "on" : "off"}`)
    }).pipe(Effect.provide(storeServices)),
).pipe(Command.withDescription("Mark or unmark a membership as provisioned through SCIM"))

const membersList = Command.make("list", { workspace: workspaceOption, as: asOption }, ({ workspace, as }) =>
  Effect.gen(function* () {
    const ws = yield* oneWorkspace(workspace, as)
    if (Option.isNone(ws)) return
    const rows = yield* (yield* WorkspaceStore).members(ws.value.id)
    for (const m of rows) yield* Console.log(describeMember(m))
  }).pipe(Effect.provide(storeServices)),
).pipe(Command.withDescription("List a workspace's members (user, role, SCIM flag, since)"))

const members = Command.make("members").pipe(
  Command.withSubcommands([membersAdd, membersSetScim, membersList]),
  Command.withDescription("Manage workspace members (and their SCIM flag)"),
)

const destinationsRedeliver = Command.make(
  "redeliver",
  { id: Args.text({ name: "destination-id" }).pipe(Args.withDescription("The observability destination's id")) },
  ({ id }) =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const known = yield* sql<{ id: string }>`SELECT id FROM observability_destinations WHERE id = ${id}`
      if (known.length === 0) return yield* refuse(`no observability destination ${id}`)
      const requeued = yield* requeueDead(id)
      yield* Console.log(`Queued ${requeued} dead deliveries of ${id} again (a running gateway sends them within a second)`)
    }).pipe(Effect.provide(storeServices)),
).pipe(Command.withDescription("Send a destination's dead deliveries again"))

const destinationsCommand = Command.make("destinations").pipe(
  Command.withSubcommands([destinationsRedeliver]),
  Command.withDescription("Observability destinations' deliveries"),
)

export const cli = Command.make("gateway").pipe(
  Command.withSubcommands([serve, migrateCommand, keys, credits, members, destinationsCommand]),
  Command.withDescription("A model-routing gateway for the Responses API"),
)

export const runCli = Command.run(cli, { name: "gateway", version: "0.1.0" })

/** Every command a user runs, by its words, with its usage (printed after a usage error). */
const leaves: ReadonlyArray<readonly [ReadonlyArray<string>, Usage.Usage]> = [
  [["serve"], Command.getUsage(serve)],
  [["migrate"], Command.getUsage(migrateCommand)],
  [["keys", "create"], Command.getUsage(keysCreate)],
  [["keys", "list"], Command.getUsage(keysList)],
  [["credits", "add"], Command.getUsage(creditsAdd)],
  [["members", "add"], Command.getUsage(membersAdd)],
  [["members", "set-scim"], Command.getUsage(membersSetScim)],
  [["members", "list"], Command.getUsage(membersList)],
  [["destinations", "redeliver"], Command.getUsage(destinationsRedeliver)],
]

/** The usage of the command `args` (argv after the script) names, or the list of commands when it names none. */
export const usageOf = (args: ReadonlyArray<string>): string => {
  for (const [words, usage] of leaves) {
    if (words.every((w, i) => args[i] === w)) {
      const text = HelpDoc.toAnsiText(Usage.getHelp(usage)).trim()
      return `usage: gateway ${words.slice(0, -1).map((w) => `${w} `).join("")}${text}`
    }
  }
  return `usage: gateway ${leaves.map(([words]) => words.join(" ")).join(" | ")} (gateway <command> --help for its options)`
}
