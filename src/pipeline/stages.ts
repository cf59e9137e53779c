/**
 * The stages' contract (docs/pipeline.md), what ingress, the stages and the plugins share, so none
 * of them imports another for it. Pre-model: each stage reads the request as the stages before
 * it left it and may rewrite it, narrow or replace the route plan, block (an ApiError: a 403 with
 * its pipeline entry, a 400), or add a `service_metadata.pipeline` entry. A stage is plain code
 * (it runs per request); a read it needs that is not in memory is `Missing`, loaded on the
 * runtime, and the stages run again from the start (they are pure over the request and `Loaded`).
 *
 * In order: preset.ts, guardrails.ts, then one stage per plugin of the request (plugins/index.ts).
 * No type here names a plugin: a plugin's state has its slot in `Loaded.plugins`.
 * Routing runs when a stage needs the plan and again after a stage rewrote the request; the money
 * (money.ts) is worked out on the request as the last stage left it. Post-model stages (the
 * shape at the end of this file) run over the upstream's events (post-model.ts).
 */
import type { Effect } from "effect"
import type { ApiError } from "../domain/errors.js"
import type { FileAnnotation, ResponsesRequest } from "../domain/responses.js"
import type { RoutePlan } from "../routing/Router.js"
import type { Citable } from "../tools/types.js"
import type { PrincipalShape } from "../services/Auth.js"
import type { WorkspaceSettings } from "../services/ContentPolicy.js"
import type { ClientFormat } from "../formats/format.js"
import type { ProviderEvent } from "../providers/types.js"
import type { KeyRow } from "../services/KeyStore.js"
import type { ResolvedPreset } from "../services/PresetStore.js"

/** Reads that missed memory, loaded from the store for this one request. */
export interface Loaded {
  principal?: PrincipalShape
  key?: { readonly hash: string; readonly row: KeyRow | undefined }
  settings?: { readonly workspaceId: string; readonly value: WorkspaceSettings }
  preset?: { readonly userId: string; readonly slug: string; readonly value: ResolvedPreset | undefined }
  /** The plugins' own per-request state, by plugin id (`requestSlot`, plugins/plugin.ts): a search's results, a verdict. */
  plugins?: Map<string, unknown>
  /** The stages' state when they last waited on a load: what a request stopped there (deadline, client gone) is recorded as. */
  waitedIn?: StageState
  /** The request's generation id, made early when a stage's own calls must name it (fusion's inner calls). */
  generationId?: string
  /** The session scope whose sticky endpoints were read from the other processes (shared routing state). */
  stickyFetched?: string
  /** A long body decoded in slices off the decision (`decodeBody`), or its refusal. */
  decoded?: Ingress | ApiError
}

/** A read that is not in memory: `load` fetches it into the request's `Loaded`, then the decision is made again. */
export class Missing {
  readonly _tag = "Missing"
  constructor(readonly load: Effect.Effect<void>) {}
}

/** What ingress hands the stages: the parsed body (the preset stage reads the caller's own fields) and the request. */
export interface Ingress {
  readonly body: unknown
  readonly request: ResponsesRequest
  /** The client format's own per-request state (`ClientFormat.stateOf`); undefined in the common case. */
  readonly formatState?: unknown
}

/** One entry of `service_metadata.pipeline` (the contract's guardrail stage object is one kind). */
export interface PipelineEntry {
  readonly type: string
  readonly name: string
  readonly summary: string
  readonly [field: string]: unknown
}

/** What routing reads beside the request: the preset it was built from and the model as the caller wrote it. */
export interface RouteHints {
  readonly preset: string | undefined
  readonly requested: string | undefined
  readonly fromPreset?: { readonly model: boolean; readonly models: boolean }
}

/** A stage's changes; what it leaves out stays as it was. */
export interface StageChange {
  /** The request rewritten: routed again unless `plan` comes with it. */
  readonly request?: ResponsesRequest
  readonly hints?: RouteHints
  /** The route plan narrowed or replaced. */
  readonly plan?: RoutePlan
  readonly entry?: PipelineEntry
  /** USD the stage spent on its own outbound calls (OCR pages, a priced moderation call): in the worst case, charged with the answer. */
  readonly cost?: number
  /** Annotations for the answer's text (the file-parser's `file` annotations). */
  readonly annotations?: ReadonlyArray<FileAnnotation>
  /** Links the answer may cite (the web plugins' pages): `url_citation` annotations where it does. */
  readonly citable?: ReadonlyArray<Citable>
  /** The plugin that writes the answer with the model (its id, e.g. `fusion`): the generation record's `router`. */
  readonly router?: string
  /** Model calls the stage made (fusion's inner calls): they count in `server.max_upstream_calls` with the turns'. */
  readonly upstreamCalls?: number
}

export type StageOutcome = StageChange | ApiError | Missing | undefined

/** The request as it passes through the stages (one per request, made again when a read is loaded). */
export interface StageState {
  readonly format: ClientFormat
  readonly headers: Headers
  readonly principal: PrincipalShape
  readonly settings: WorkspaceSettings
  readonly loaded: Loaded
  /** The body as ingress parsed it (in the client format's shape). */
  readonly body: unknown
  readonly withMetadata: boolean
  readonly metadataAlias: boolean
  request: ResponsesRequest
  hints: RouteHints | undefined
  /** Undefined until routed, and again after a stage rewrote the request without a plan. */
  plan: RoutePlan | undefined
  /** A stage past the preset rewrote the request: the money is worked out on the request, not the body text. */
  rewritten: boolean
  /** `service_metadata.pipeline`; undefined while no stage added to it (the common case: no array). */
  pipeline: Array<PipelineEntry> | undefined
  /** USD the stages spent on outbound calls so far (0 in the common case). */
  spentUsd: number
  /** Model calls the stages made so far (fusion's inner calls; 0 in the common case). */
  upstreamCalls: number
  /** Annotations for the answer's text; undefined while no stage made one (the common case). */
  annotations: Array<FileAnnotation> | undefined
  /** Links the answer may cite, from the stages (undefined while none gave any: the common case). */
  citable?: Array<Citable>
  /** Before a priced outbound call: fails (402) when the key has no budget left for `usd` (no hold is kept). */
  readonly holdBudget?: (state: StageState, usd: number) => Effect.Effect<void, ApiError>
  /** A plugin that takes part in the answer (its id), for the record's `router`; undefined in the common case. */
  router: string | undefined
}

/**
 * What a refusal of the pre-model stages keeps for its generation's record (route.ts records it):
 * a moderation block, or a request whose stages ran out its deadline or lost its client while they
 * waited on a load. The refusal carries it (`withRecord`).
 */
export interface RefusalRecord {
  readonly model: string
  readonly providerName: string
  readonly modelSlug: string
  /** USD the stages spent (a priced moderation call, OCR pages), charged to the key with the record. */
  readonly cost: number
  readonly sessionId: string | null
  /** The client left: recorded as cancelled (499), not failed. */
  readonly cancelled?: boolean
  /** The id the stages made for the request (its inner calls' parent): the record keeps it, so their parent exists. */
  readonly generationId?: string
}

/** A refusal that carries its record: still the ApiError the caller gets (its envelope reads its own fields only). */
export type RecordedRefusal = ApiError & { readonly record: RefusalRecord }

export const withRecord = (refusal: ApiError, record: RefusalRecord): RecordedRefusal => Object.assign(refusal, { record })

/** The record a refusal carries, or undefined: it is answered as it is. */
export const recordOf = (refusal: ApiError): RefusalRecord | undefined => ("record" in refusal ? (refusal as RecordedRefusal).record : undefined)

/**
 * Why the stages stopped waiting on a load (their stop signal's reason, route.ts): the refusal the
 * caller gets (made per request: it keys its record), and whether it is because the client left.
 */
export class StagesStopped {
  constructor(
    readonly refusal: ApiError,
    readonly clientLeft: boolean,
  ) {}
}

export interface PreModelStage {
  readonly name: string
  /** It reads the route plan (the candidates): the request is routed before it runs. */
  readonly needsPlan: boolean
  readonly run: (state: StageState) => StageOutcome
}

/** Applies a stage's change to the state. */
export const applyChange = (state: StageState, change: StageChange, byPreset: boolean): void => {
  if (change.request !== undefined) {
    state.request = change.request
    state.plan = change.plan
    if (!byPreset) state.rewritten = true
  } else if (change.plan !== undefined) state.plan = change.plan
  if (change.hints !== undefined) state.hints = change.hints
  if (change.cost !== undefined) state.spentUsd += change.cost
  if (change.upstreamCalls !== undefined) state.upstreamCalls += change.upstreamCalls
  if (change.annotations !== undefined) state.annotations = [...(state.annotations ?? []), ...change.annotations]
  if (change.citable !== undefined && change.citable.length > 0) {
    if (state.citable === undefined) state.citable = [...change.citable]
    else state.citable.push(...change.citable)
  }
  if (change.router !== undefined) state.router = change.router
  if (change.entry !== undefined) {
    if (state.pipeline === undefined) state.pipeline = [change.entry]
    else state.pipeline.push(change.entry)
  }
}

// ---------------------------------------------------------------------------------------------
// Post-model stages (post-model.ts runs them)
// ---------------------------------------------------------------------------------------------

/** One request's run of a stage: each upstream batch → the batch the next stage (or the encoder) gets. */
export type PostModelRun = (events: ReadonlyArray<ProviderEvent>) => ReadonlyArray<ProviderEvent>

export interface PostModelStage {
  readonly name: string
  /**
   * Its run for `request`, or undefined when it does not apply (e.g. its plugin is not enabled).
   * `report`: adds an entry to the answer's `service_metadata.pipeline` (before the answer ends).
   */
  readonly start: (request: ResponsesRequest, report: (entry: PipelineEntry) => void) => PostModelRun | undefined
}
