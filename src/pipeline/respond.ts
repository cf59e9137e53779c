/**
 * Everything after the decision (route.ts decides): the request's deadline and abort armed, then
 * its turn through the turn runner (turns.ts), or the server-tool loop's turns (loop.ts), and the
 * answer through egress (egress.ts) as JSON or a stream. Finish (finish.ts) settles and records.
 */
import type { Types } from "effect"
import type { Settings } from "../config/Config.js"
import { RequestTimeout } from "../domain/errors.js"
import { costOf } from "../domain/pricing.js"
import { type ClientFormat, errorResponseIn, type FinishExtras } from "../formats/format.js"
import type { ErrorLog } from "../lib/log.js"
import { PlainAbort } from "../providers/abort.js"
import type { Endpoint } from "../services/Catalog.js"
import type { Deadlines } from "../deadlines.js"
import type { Answering, makeEgress } from "./egress.js"
import type { Attempt, Finish, RequestLife } from "./finish.js"
import type { ToolLoop } from "./loop.js"
import { postModelFor } from "./post-model.js"
import type { Prepared } from "./pre-model.js"
import { chargedUsage } from "./record.js"
import type { PipelineEntry, PostModelStage } from "./stages.js"
import type { RequestTrace } from "./trace.js"
import { clientClosedResponse, DeadlineExceeded, type makeTurnRunner } from "./turns.js"

export interface RespondDeps {
  readonly settings: Settings
  /** The requests' deadlines (the route's: the stages' waits share them). */
  readonly deadlines: Deadlines
  /** When a request still running starts to watch its client's abort signal (`CLIENT_WATCH_MS`). */
  readonly clientWatch: Deadlines
  readonly finish: Finish
  readonly turns: ReturnType<typeof makeTurnRunner>
  readonly loop: ToolLoop
  readonly egress: ReturnType<typeof makeEgress>
  readonly log: ErrorLog
  readonly deadlineMessage: string
  /** The plugins' post-model halves (`PluginSet.post`). */
  readonly postStages: ReadonlyArray<PostModelStage>
}

/**
 * How long a request runs before its client's abort signal is watched. A client that goes away
 * earlier stops the upstream call when the watch starts (at most this much more upstream work,
 * recorded cancelled and charged for what was produced, as any cancellation); an answer finished
 * by then is recorded as it ended. Streams also stop at once when their reader is cancelled.
 */
export const CLIENT_WATCH_MS = 100

/** `service_metadata`: how the request was routed, its attempts, and what the stages reported. */
const serviceMetadataOf = (
  prepared: Prepared,
  startedAt: number,
  attempts: ReadonlyArray<Attempt>,
  postEntries: ReadonlyArray<PipelineEntry> | undefined,
  selected: Endpoint | undefined,
): Record<string, unknown> => {
  const plan = prepared.plan
  const metadata: Record<string, unknown> = {
    requested: plan.requested,
    strategy: plan.strategy,
    region: null,
    summary: selected
      ? `Routed ${plan.requested} to ${selected.provider.id} (${selected.upstreamModel}) after ${attempts.length} attempt(s)`
      : `No endpoint of ${plan.requested} answered`,
    attempt: Math.max(0, attempts.length - 1),
    is_byok: selected?.isByok ?? false,
    endpoints: {
      total: plan.candidates.length,
      available: plan.candidates.map((e) => ({ model: e.modelId, provider: e.provider.id, selected: e === selected })),
    },
    attempts,
    generation_time: Date.now() - startedAt,
  }
  // What the pre-model and post-model stages reported (none: no key, the answer as it was).
  const pipeline = postEntries === undefined ? prepared.pipeline : [...(prepared.pipeline ?? []), ...postEntries]
  if (pipeline !== undefined) metadata["pipeline"] = pipeline
  return metadata
}

export const makeRespond = (deps: RespondDeps) => {
  const { settings, deadlines, clientWatch, finish, turns, loop, egress, log, deadlineMessage, postStages } = deps

  /**
   * Everything after the decision: the turn (the upstream call, failover), then the answer. Its
   * deadline is what the stages left of the request's (`stagesMs` used).
   */
  const respond = async (format: ClientFormat, req: Request, life: RequestLife, trace: RequestTrace | undefined, stagesMs: number): Promise<Response> => {
    const { prepared, generationId, startedAt } = life
    const { request, plan } = prepared
    const streaming = request.stream === true
    const idHeader = { "x-generation-id": generationId }
    if (stagesMs >= settings.requestTimeoutMs) {
      // The stages used it all (their last load ended in time, the reservation did not): no upstream call.
      const timedOut = new RequestTimeout({ message: deadlineMessage })
      finish(life, streaming, {
        endpoint: plan.candidates[0],
        assembler: undefined,
        status: "failed",
        error: { message: timedOut.message, status: timedOut.status },
        firstTokenAt: undefined,
        nothingCame: true,
      })
      return errorResponseIn(format, timedOut, idHeader)
    }
    const withMetadata = prepared.withMetadata

    // The upstream call is aborted when the client goes away or our deadline passes.
    // Plain (no native controller or listener): only the client's own signal is native.
    const upstreamAbort = new PlainAbort()
    const onClientAbort = () => upstreamAbort.abort(new Error("client disconnected"))
    // The client's abort signal is watched once the request has run `CLIENT_WATCH_MS`: Bun makes
    // `req.signal` when it is first read, and that with its handler set and cleared cost ~1 µs a
    // request (bench/NOTES.md, "Per request"), which an answer done sooner does not pay. A client
    // gone before then (while we read the body or decided, too) is seen when the watch starts:
    // the signal, made after the close, is already aborted.
    let clientSignal: AbortSignal | undefined
    const watch = clientWatch.add(() => {
      clientSignal = req.signal
      // The request's signal is ours alone: its handler attribute, set and cleared, costs ~140 ns
      // against ~630 ns for addEventListener with `once` and removeEventListener (Bun 1.4.5).
      clientSignal.onabort = onClientAbort
      if (clientSignal.aborted) onClientAbort()
    })
    // Set once the answer begins: a stream's relay sets its cut for the deadline there.
    let answering: Answering | undefined
    const deadline = deadlines.add(() => {
      try {
        upstreamAbort.abort(new DeadlineExceeded())
        answering?.cutOnDeadline?.()
      } catch (e) {
        log({ requestId: trace?.id, generationId }, "ending a request at its deadline failed", e)
      }
    }, -stagesMs)
    const cleanup = () => {
      deadlines.remove(deadline)
      clientWatch.remove(watch)
      if (clientSignal !== undefined) clientSignal.onabort = null
    }

    const attempts: Array<Attempt> = []
    life.attempts = attempts
    // What the post-model stages report while the answer is read (undefined while none did).
    let postEntries: Array<PipelineEntry> | undefined
    const report = (entry: PipelineEntry) => {
      if (postEntries === undefined) postEntries = [entry]
      else postEntries.push(entry)
    }
    const serviceMetadata = (selected: Endpoint | undefined) => serviceMetadataOf(prepared, startedAt, attempts, postEntries, selected)

    // Server tools: the loop runs the turns (one check; a request without them takes the path below).
    if (prepared.serverTools !== undefined) {
      return loop.respond({ format, life, plan, streaming, upstreamAbort, attempts, trace, idHeader, cleanup, serviceMetadata })
    }
    // The turn: one here (the server-tool loop runs several: loop.ts).
    const turn = await turns.runTurn(request, plan, { streaming, upstreamAbort, trace, startedAt, attempts, fitFor: prepared.fitFor })
    if (turn.refused !== undefined) {
      cleanup()
      finish(life, streaming, turn.outcome)
      return turn.outcome.status === "cancelled" ? clientClosedResponse() : errorResponseIn(format, turn.refused, idHeader)
    }

    const chosen = turn.endpoint
    const assembler = format.encoder(request, {
      stream: streaming,
      model: chosen.modelId,
      provider: chosen.provider.id,
      annotations: prepared.annotations,
      formatState: prepared.formatState,
    })
    // Links the stages found (the web plugins' pages): the answer's text cites them as url_citation annotations.
    if (prepared.citable !== undefined) assembler.cite?.(prepared.citable)
    const finishExtras = (): FinishExtras => {
      // The answer shows what the key is charged: the same usage and cost as the record.
      const usage = chargedUsage(prepared, chosen, assembler)
      const extras: Types.Mutable<FinishExtras> = { cost: Math.max(0, costOf(chosen.pricing, usage)) + prepared.spentUsd, isByok: chosen.isByok }
      if (usage !== assembler.usage) extras.usage = usage
      // Assigned, not spread (a builtin call per answer). Every format's encoder renders the metadata.
      if (withMetadata) {
        extras.serviceMetadata = serviceMetadata(chosen)
        if (prepared.metadataAlias) extras.metadataAlias = true
      }
      return extras
    }
    answering = {
      format,
      life,
      request,
      plan,
      chosen,
      call: turn.call,
      assembler,
      attemptStartedAt: turn.attemptStartedAt,
      upstreamAbort,
      cleanup,
      finishExtras,
      idHeader,
      trace,
      post: postModelFor(request, report, postStages),
      cutOnDeadline: undefined,
    }
    return streaming ? egress.stream(answering) : egress.json(answering)
  }

  return respond
}
