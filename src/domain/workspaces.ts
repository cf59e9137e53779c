/** Wire shapes of workspaces and their members, per the contract (operations 4 and 5) and wire-compat. */
import { Schema } from "effect"
import { charsAtMost, maxChars, showable } from "./schema-rules.js"

/**
 * One of a few strings, refused with one message that lists them (a plain Literal union
 * reports only its first member: `Expected "price", actual …`).
 */
const oneOf = <const L extends ReadonlyArray<string>>(values: L) =>
  Schema.String.pipe(
    Schema.filter((s) => values.includes(s), { message: () => `must be one of ${values.join(", ")}` }),
    Schema.compose(Schema.Literal(...values)),
  )

export const ProviderSort = oneOf(["price", "throughput", "latency", "exacto"])
export type ProviderSort = typeof ProviderSort.Type

export const MemberRole = oneOf(["admin", "member"])
export type MemberRole = typeof MemberRole.Type

export const WorkspaceName = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must be 1 to 100 characters" }),
  charsAtMost(100, "must be 1 to 100 characters"),
  showable,
)

export const WorkspaceSlug = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must be 1 to 50 characters" }),
  charsAtMost(50, "must be 1 to 50 characters"),
  Schema.pattern(/^[a-z0-9]+(?:-[a-z0-9]+)*$/, {
    message: () =>
      "must be lowercase letters and digits in segments joined by single hyphens (^[a-z0-9]+(?:-[a-z0-9]+)*$)",
  }),
  // A path names a workspace by id or slug, the id first: a slug shaped as an id could name another workspace.
  Schema.filter((slug) => !/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(slug), {
    message: () => "must not have the shape of a workspace id (a UUID): paths take either",
  }),
)

export const WorkspaceDescription = Schema.String.pipe(
  charsAtMost(500),
)

export const SamplingRate = Schema.Number.pipe(
  Schema.finite({ message: () => "must be a number from 0.0001 to 1" }),
  Schema.between(0.0001, 1, { message: () => "must be a number from 0.0001 to 1" }),
)

/** Numeric ids of API keys (the `id` of a key object); bounded so the store never sees an impossible id. */
export const KeyIds = Schema.Array(
  Schema.Number.pipe(
    Schema.int({ message: () => "must be an integer key id" }),
    Schema.between(1, 2_147_483_647, { message: () => "must be a key id (an integer from 1 to 2147483647)" }),
  ),
).pipe(Schema.maxItems(1000, { message: () => "at most 1000 key ids" }))

export const ServerToolNames = Schema.Array(
  Schema.String.pipe(Schema.minLength(1, { message: () => "a server tool name must not be empty" })),
)

const ModelId = maxChars(256)

/** A user id in a members request. */
export const UserId = Schema.String.pipe(
  Schema.minLength(1, { message: () => "a user id must not be empty" }),
  charsAtMost(256, "a user id is at most 256 characters"),
)

const oneToHundred = <A, I, R>(item: Schema.Schema<A, I, R>) =>
  Schema.Array(item).pipe(
    Schema.minItems(1, { message: () => "must have 1 to 100 elements" }),
    Schema.maxItems(100, { message: () => "must have 1 to 100 elements" }),
  )

export const UserIds = oneToHundred(UserId)

/** The user ids `members/add` takes: a new user's id is shown, so it is `showable` (an existing one is still removable). */
const NewUserIds = oneToHundred(UserId.pipe(showable))

export const Workspace = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  slug: Schema.String,
  description: Schema.String,
  default_text_model: Schema.NullOr(Schema.String),
  default_image_model: Schema.NullOr(Schema.String),
  default_provider_sort: Schema.NullOr(ProviderSort),
  io_logging_api_key_ids: Schema.NullOr(Schema.Array(Schema.Int)),
  io_logging_sampling_rate: Schema.Number,
  is_data_discount_logging_enabled: Schema.Boolean,
  is_observability_broadcast_enabled: Schema.Boolean,
  is_observability_io_logging_enabled: Schema.Boolean,
  disabled_server_tools: Schema.NullOr(Schema.Array(Schema.String)),
  /** Derived from the workspace id (`gr_<id>`). */
  default_guardrail_id: Schema.String,
  created_at: Schema.String,
  created_by: Schema.String,
  updated_at: Schema.NullOr(Schema.String),
  /** Our extension: the owner's default workspace (keys created without workspace_id go there). */
  is_default: Schema.Boolean,
})
export type Workspace = typeof Workspace.Type

export const WorkspaceData = Schema.Struct({ data: Workspace })

export const WorkspaceList = Schema.Struct({ data: Schema.Array(Workspace), total_count: Schema.Int })

export const ListWorkspacesParams = Schema.Struct({
  offset: Schema.optional(
    Schema.NumberFromString.pipe(
      Schema.int({ message: () => "must be an integer" }),
      Schema.between(0, Number.MAX_SAFE_INTEGER, { message: () => "must be an integer ≥ 0" }),
    ),
  ),
  limit: Schema.optional(
    Schema.NumberFromString.pipe(
      Schema.int({ message: () => "must be an integer" }),
      Schema.between(1, 100, { message: () => "must be 1 to 100" }),
    ),
  ),
})

/** The fields both create and update accept; nullable ones accept null (null clears them). */
const settings = {
  description: Schema.optional(Schema.NullOr(WorkspaceDescription)),
  default_text_model: Schema.optional(Schema.NullOr(ModelId)),
  default_image_model: Schema.optional(Schema.NullOr(ModelId)),
  default_provider_sort: Schema.optional(Schema.NullOr(ProviderSort)),
  io_logging_api_key_ids: Schema.optional(Schema.NullOr(KeyIds)),
  io_logging_sampling_rate: Schema.optional(SamplingRate),
  is_data_discount_logging_enabled: Schema.optional(Schema.Boolean),
  is_observability_broadcast_enabled: Schema.optional(Schema.Boolean),
  is_observability_io_logging_enabled: Schema.optional(Schema.Boolean),
  disabled_server_tools: Schema.optional(Schema.NullOr(ServerToolNames)),
}

export const CreateWorkspacePayload = Schema.Struct({ name: WorkspaceName, slug: WorkspaceSlug, ...settings })
export type CreateWorkspacePayload = typeof CreateWorkspacePayload.Type

export const UpdateWorkspacePayload = Schema.Struct({
  name: Schema.optional(WorkspaceName),
  slug: Schema.optional(WorkspaceSlug),
  ...settings,
}).annotations({ parseOptions: { onExcessProperty: "error" } })
export type UpdateWorkspacePayload = typeof UpdateWorkspacePayload.Type

export const Member = Schema.Struct({
  /** Stable per (workspace, user), derived from both. */
  id: Schema.String,
  workspace_id: Schema.String,
  user_id: Schema.String,
  role: MemberRole,
  created_at: Schema.String,
  /** Our extension: provisioned through SCIM (such members cannot be removed here). */
  is_scim: Schema.Boolean,
})
export type Member = typeof Member.Type

export const MemberList = Schema.Struct({ data: Schema.Array(Member), total_count: Schema.Int })

export const AddMembersPayload = Schema.Struct({
  user_ids: NewUserIds,
  /** Our extension: the role of the members added (default member); given, it also becomes the role of those already members. */
  role: Schema.optional(MemberRole),
})

export const AddedMembers = Schema.Struct({ added_count: Schema.Int, data: Schema.Array(Member) })

export const RemoveMembersPayload = Schema.Struct({ user_ids: UserIds })

export const RemovedMembers = Schema.Struct({ removed_count: Schema.Int })
