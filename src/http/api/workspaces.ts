/** Workspaces, their members and budgets: the contract's operations 4 and 5 plus the supporting ones. */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { BudgetPath, UpsertBudgetPayload, WorkspaceBudgetData, WorkspaceBudgetList } from "../../domain/budgets.js"
import { Errors } from "../../domain/errors.js"
import { PageParams } from "../../domain/paging.js"
import { Deleted } from "../../domain/keys.js"
import {
  AddedMembers,
  AddMembersPayload,
  CreateWorkspacePayload,
  ListWorkspacesParams,
  MemberList,
  RemovedMembers,
  RemoveMembersPayload,
  UpdateWorkspacePayload,
  WorkspaceData,
  WorkspaceList,
} from "../../domain/workspaces.js"
import { Authentication } from "./security.js"

/** The workspace's UUID or its slug. */
const WorkspacePath = Schema.Struct({
  id: Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" })),
})

export class WorkspacesApi extends HttpApiGroup.make("workspaces")
  .add(HttpApiEndpoint.get("list", "/workspaces").setUrlParams(ListWorkspacesParams).addSuccess(WorkspaceList))
  .add(
    HttpApiEndpoint.post("create", "/workspaces")
      .setPayload(CreateWorkspacePayload)
      .addSuccess(WorkspaceData, { status: 201 }),
  )
  .add(HttpApiEndpoint.get("get", "/workspaces/:id").setPath(WorkspacePath).addSuccess(WorkspaceData))
  .add(
    HttpApiEndpoint.patch("update", "/workspaces/:id")
      .setPath(WorkspacePath)
      .setPayload(UpdateWorkspacePayload)
      .addSuccess(WorkspaceData),
  )
  .add(HttpApiEndpoint.del("delete", "/workspaces/:id").setPath(WorkspacePath).addSuccess(Deleted))
  .add(
    HttpApiEndpoint.get("listMembers", "/workspaces/:id/members").setPath(WorkspacePath).setUrlParams(PageParams).addSuccess(MemberList),
  )
  .add(
    HttpApiEndpoint.post("addMembers", "/workspaces/:id/members/add")
      .setPath(WorkspacePath)
      .setPayload(AddMembersPayload)
      .addSuccess(AddedMembers),
  )
  .add(
    HttpApiEndpoint.post("removeMembers", "/workspaces/:id/members/remove")
      .setPath(WorkspacePath)
      .setPayload(RemoveMembersPayload)
      .addSuccess(RemovedMembers),
  )
  .add(HttpApiEndpoint.get("listBudgets", "/workspaces/:id/budgets").setPath(WorkspacePath).addSuccess(WorkspaceBudgetList))
  .add(HttpApiEndpoint.get("getBudget", "/workspaces/:id/budgets/:interval").setPath(BudgetPath).addSuccess(WorkspaceBudgetData))
  .add(
    HttpApiEndpoint.put("setBudget", "/workspaces/:id/budgets/:interval")
      .setPath(BudgetPath)
      .setPayload(UpsertBudgetPayload)
      .addSuccess(WorkspaceBudgetData),
  )
  .add(HttpApiEndpoint.del("deleteBudget", "/workspaces/:id/budgets/:interval").setPath(BudgetPath).addSuccess(Deleted))
  .addError(Errors.BadRequest)
  .addError(Errors.Forbidden)
  .addError(Errors.NotFound)
  .middleware(Authentication)
  .prefix("/v1") {}
