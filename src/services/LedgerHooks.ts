/**
 * The ledger writer's extension point: a feature that must commit rows with the generations
 * that cause them (the broadcast outbox) registers a hook here. Before each batch's transaction
 * the writer asks every hook for its rows, then inserts them in the same transaction: both
 * commit, or neither does. A hook only builds rows (no I/O in the common case: it returns them
 * directly; a promise when it must load something first), and must not throw.
 */
import { Effect } from "effect"
import type { GenerationEntry } from "../domain/generations.js"
import type { LedgerRows } from "../store/ledger.js"

export type LedgerHook = (
  entries: ReadonlyArray<GenerationEntry>,
) => ReadonlyArray<LedgerRows> | Promise<ReadonlyArray<LedgerRows>>

export class LedgerHooks extends Effect.Service<LedgerHooks>()("LedgerHooks", {
  effect: Effect.sync(() => {
    const hooks: Array<LedgerHook> = []
    /** Adds a hook; returns its removal. */
    const register = (hook: LedgerHook): (() => void) => {
      hooks.push(hook)
      return () => {
        const at = hooks.indexOf(hook)
        if (at >= 0) hooks.splice(at, 1)
      }
    }
    /** Every hook's rows for `entries`: synchronous when no hook needed to wait. */
    const rowsFor = (
      entries: ReadonlyArray<GenerationEntry>,
    ): ReadonlyArray<LedgerRows> | Promise<ReadonlyArray<LedgerRows>> => {
      if (hooks.length === 0 || entries.length === 0) return []
      const parts = hooks.map((hook) => hook(entries))
      if (parts.some((p) => p instanceof Promise)) return Promise.all(parts).then((all) => all.flat())
      return (parts as Array<ReadonlyArray<LedgerRows>>).flat()
    }
    return { register, rowsFor } as const
  }),
}) {}
