/**
 * Post-model stages (docs/pipeline.md): over the upstream's normalized events before the encoder sees
 * them (response healing, annotations). They are the plugins' post-model halves (`PluginSet.post`,
 * plugins/index.ts). A stage starts per request when it applies to it; a request none applies to
 * gets no per-batch step at all (`postModelFor` is undefined).
 */
import type { ResponsesRequest } from "../domain/responses.js"
import type { PipelineEntry, PostModelRun, PostModelStage } from "./stages.js"

/** The stages that apply to `request`, composed; undefined when none does (the common case). */
export const postModelFor = (
  request: ResponsesRequest,
  report: (entry: PipelineEntry) => void,
  stages: ReadonlyArray<PostModelStage>,
): PostModelRun | undefined => {
  let composed: PostModelRun | undefined
  for (const stage of stages) {
    const run = stage.start(request, report)
    if (run === undefined) continue
    const before = composed
    composed = before === undefined ? run : (events) => run(before(events))
  }
  return composed
}
