/**
 * `limit` and `offset` of the list operations, as clients send them (the official SDK always
 * sends `limit=50&offset=0` and, while a page is full, asks again at `offset += data.length`:
 * a list that ignored `offset` would make its iterator loop forever).
 */
import { Schema } from "effect"

export const PAGE_SIZE_DEFAULT = 50
export const PAGE_SIZE_MAX = 100

/** A decimal integer in a query string, checked before it becomes a number. */
const integerString = (message: string) =>
  Schema.String.pipe(Schema.pattern(/^-?\d{1,15}$/, { message: () => message }), Schema.compose(Schema.NumberFromString))

export const PageParams = Schema.Struct({
  /** Page size, 1 to 100 (the default depends on the list). */
  limit: Schema.optional(
    integerString(`must be an integer from 1 to ${PAGE_SIZE_MAX}`).pipe(
      Schema.between(1, PAGE_SIZE_MAX, { message: () => `must be an integer from 1 to ${PAGE_SIZE_MAX}` }),
    ),
  ),
  /** Records to skip, at least 0; default 0. */
  offset: Schema.optional(
    integerString("must be an integer of at least 0").pipe(
      Schema.nonNegative({ message: () => "must be an integer of at least 0" }),
    ),
  ),
})
export type PageParams = typeof PageParams.Type

/**
 * One page of a list read whole (members, presets, destinations: a user has few) and the total.
 * Without `limit` the rest of the list from `offset`: these lists answered whole before they paged.
 */
export const pageOf = <A>(all: ReadonlyArray<A>, params: PageParams): { readonly data: ReadonlyArray<A>; readonly total_count: number } => {
  const offset = params.offset ?? 0
  return { data: params.limit === undefined ? all.slice(offset) : all.slice(offset, offset + params.limit), total_count: all.length }
}
