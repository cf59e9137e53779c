/**
 * Whether a tenant's regex may run on the backtracking engine: `regexProblem` accepts only
 * patterns whose shape cannot backtrack super-linearly (its rules are on it). Destinations'
 * filter rules are checked with it when they are made and again before they run
 * (src/broadcast/filters.ts).
 */

/** A tenant's regex is run on every generation: short, and of a shape that cannot backtrack badly (`regexProblem`). */
export const REGEX_MAX_LENGTH = 256

/** Quantified parts a pattern may hold (`*`, `+`, `?`, `{n,m}`; an exact `{n}` is fixed text). */
const REGEX_MAX_QUANTIFIED = 16

/**
 * Ways alternatives that can start alike combine into (`(a|ab)(c|cd)` is 4), each tried in turn
 * from a start position: at most 16, or 4 when a quantified part runs the text once per way.
 */
const REGEX_MAX_WAYS = 16
const REGEX_MAX_WAYS_WITH_LOOPS = 4

/** UTF-16 code-unit ranges, sorted and apart: the characters one part of a pattern can match. */
type Chars = ReadonlyArray<readonly [number, number]>

const charsOf = (ranges: ReadonlyArray<readonly [number, number]>): Chars => {
  const out: Array<[number, number]> = []
  for (const [lo, hi] of [...ranges].sort((a, b) => a[0] - b[0])) {
    const last = out[out.length - 1]
    if (last !== undefined && lo <= last[1] + 1) last[1] = Math.max(last[1], hi)
    else out.push([lo, hi])
  }
  return out
}
const one = (code: number): Chars => [[code, code]]
const union = (sets: ReadonlyArray<Chars>): Chars => charsOf(sets.flat())
const complement = (set: Chars): Chars => {
  const out: Array<[number, number]> = []
  let next = 0
  for (const [lo, hi] of set) {
    if (lo > next) out.push([next, lo - 1])
    next = hi + 1
  }
  if (next <= 0xffff) out.push([next, 0xffff])
  return out
}
const intersection = (a: Chars, b: Chars): Chars => {
  const out: Array<[number, number]> = []
  for (const [alo, ahi] of a) {
    for (const [blo, bhi] of b) if (Math.max(alo, blo) <= Math.min(ahi, bhi)) out.push([Math.max(alo, blo), Math.min(ahi, bhi)])
  }
  return charsOf(out)
}

const ANY: Chars = [[0, 0xffff]]
const DIGIT: Chars = [[48, 57]]
const WORD = charsOf([[48, 57], [65, 90], [95, 95], [97, 122]])
const SPACE = charsOf([[9, 13], [32, 32], [0xa0, 0xa0], [0x1680, 0x1680], [0x2000, 0x200a], [0x2028, 0x2029], [0x202f, 0x202f], [0x205f, 0x205f], [0x3000, 0x3000], [0xfeff, 0xfeff]])
const DOT = complement(charsOf([[10, 10], [13, 13], [0x2028, 0x2029]]))

/** A pattern as a tree: one character, a zero-width assertion (`^`, `\b`, a lookaround), a sequence, alternatives, a quantified part. */
type RegexNode =
  | { readonly type: "char"; readonly chars: Chars }
  | { readonly type: "assert"; readonly inner: RegexNode | undefined }
  | { readonly type: "seq"; readonly items: ReadonlyArray<RegexNode> }
  | { readonly type: "alt"; readonly branches: ReadonlyArray<RegexNode> }
  | { readonly type: "repeat"; readonly node: RegexNode; readonly min: number; readonly max: number; readonly source: string }

/** Why a pattern is refused, thrown from deep in the parse or the analysis. */
class Refused {
  constructor(readonly reason: string) {}
}

/** The tree of a pattern `new RegExp` accepts (no flags: the syntax of Annex B, which reads `a{,5}` or `]` as text). */
const parseRegex = (p: string): RegexNode => {
  let i = 0
  const escapeChars = (inClass: boolean): Chars => {
    const ch = p[i++] ?? ""
    switch (ch) {
      case "d": return DIGIT
      case "D": return complement(DIGIT)
      case "w": return WORD
      case "W": return complement(WORD)
      case "s": return SPACE
      case "S": return complement(SPACE)
      case "t": return one(9)
      case "n": return one(10)
      case "v": return one(11)
      case "f": return one(12)
      case "r": return one(13)
      // In a class, a backspace; outside it, `\b` is an assertion and never comes here.
      case "b": return one(8)
      // A Unicode property (`\p{L}`, read with the `u` flag as JSON Schema patterns are) or a code
      // point (`\u{1F600}`): taken as any character, which can only find more overlap, never less.
      case "p":
      case "P":
        if (p[i] === "{" && p.indexOf("}", i) > i) {
          i = p.indexOf("}", i) + 1
          return ANY
        }
        return one(ch.charCodeAt(0))
      case "x":
      case "u": {
        if (ch === "u" && p[i] === "{" && p.indexOf("}", i) > i) {
          i = p.indexOf("}", i) + 1
          return ANY
        }
        const hex = (ch === "x" ? /^[\da-f]{2}/i : /^[\da-f]{4}/i).exec(p.slice(i))?.[0]
        if (hex === undefined) return one(ch.charCodeAt(0))
        i += hex.length
        return one(parseInt(hex, 16))
      }
      case "c": {
        const letter = p[i] ?? ""
        if (/[a-z]/i.test(letter)) {
          i++
          return one(letter.charCodeAt(0) % 32)
        }
        // In a class, Annex B also reads digits and `_` here: any character is the safe reading.
        if (inClass) return ANY
        i--
        return one(92)
      }
      default:
        if (/\d/.test(ch)) {
          if (inClass) return ANY
          if (ch === "0" && !/\d/.test(p[i] ?? "")) return one(0)
          throw new Refused("uses an octal escape (not allowed; write \\xHH for a character)")
        }
        return one(ch.charCodeAt(0))
    }
  }
  const classAtom = (): Chars => (p[i++] === "\\" ? escapeChars(true) : one(p.charCodeAt(i - 1)))
  const charClass = (): Chars => {
    const negated = p[i] === "^"
    if (negated) i++
    const parts: Array<Chars> = []
    while (p[i] !== "]") {
      const lo = classAtom()
      if (p[i] === "-" && p[i + 1] !== "]") {
        i++
        const hi = classAtom()
        const single = (c: Chars) => c.length === 1 && c[0]![0] === c[0]![1]
        // `[\d-z]` is a digit, `-` or `z` in Annex B, not a range.
        parts.push(single(lo) && single(hi) ? [[lo[0]![0], hi[0]![0]]] : union([lo, hi, one(45)]))
      } else parts.push(lo)
    }
    i++
    return negated ? complement(union(parts)) : union(parts)
  }
  const atom = (): RegexNode => {
    const ch = p[i++]!
    switch (ch) {
      case "(": {
        let lookaround = false
        if (p[i] === "?") {
          const kind = /^\?(:|=|!|<=|<!|<[^>]*>)/.exec(p.slice(i))
          // Modifiers such as `(?i:…)` change which characters match: refused rather than modelled.
          if (kind === null) throw new Refused("uses a group other than (…), (?:…), (?<name>…) or a lookaround (not allowed; for either case write a class such as [aA])")
          lookaround = ["=", "!", "<=", "<!"].includes(kind[1]!)
          i += kind[0].length
        }
        const inner = alternatives()
        i++
        return lookaround ? { type: "assert", inner } : inner
      }
      case "[":
        return { type: "char", chars: charClass() }
      case "\\":
        if (/[1-9k]/.test(p[i] ?? "")) throw new Refused("uses a backreference (not allowed)")
        if (p[i] === "b" || p[i] === "B") {
          i++
          return { type: "assert", inner: undefined }
        }
        return { type: "char", chars: escapeChars(false) }
      case ".":
        return { type: "char", chars: DOT }
      case "^":
      case "$":
        return { type: "assert", inner: undefined }
      default:
        return { type: "char", chars: one(ch.charCodeAt(0)) }
    }
  }
  const quantifier = (): { min: number; max: number } | undefined => {
    let bounds: { min: number; max: number }
    if (p[i] === "*") bounds = { min: 0, max: Infinity }
    else if (p[i] === "+") bounds = { min: 1, max: Infinity }
    else if (p[i] === "?") bounds = { min: 0, max: 1 }
    else {
      const braces = /^\{(\d+)(,(\d*))?\}/.exec(p.slice(i))
      if (braces === null) return undefined
      const min = Number(braces[1])
      bounds = { min, max: braces[2] === undefined ? min : braces[3] === "" ? Infinity : Number(braces[3]) }
      i += braces[0].length - 1
    }
    i++
    // Lazy (`*?`) tries the same ways in another order: the same worst case.
    if (p[i] === "?") i++
    return bounds
  }
  const sequence = (): RegexNode => {
    const items: Array<RegexNode> = []
    while (i < p.length && p[i] !== "|" && p[i] !== ")") {
      const start = i
      const node = atom()
      const bounds = quantifier()
      items.push(bounds === undefined ? node : { type: "repeat", node, ...bounds, source: p.slice(start, i) })
    }
    return items.length === 1 ? items[0]! : { type: "seq", items }
  }
  const alternatives = (): RegexNode => {
    const branches = [sequence()]
    while (p[i] === "|") {
      i++
      branches.push(sequence())
    }
    return branches.length === 1 ? branches[0]! : { type: "alt", branches }
  }
  return alternatives()
}

/** One position of the pattern's automaton (Glushkov's): a character, an assertion, or a whole quantified part. */
interface Position {
  readonly chars: Chars
  readonly zeroWidth: boolean
  /** The source of a part quantified `*`, `+`, `?` or `{n,m}`: a loop the engine can backtrack into. */
  readonly quantified: string | undefined
  readonly follow: Set<Position>
}

interface Shape {
  readonly first: ReadonlyArray<Position>
  readonly last: ReadonlyArray<Position>
  readonly nullable: boolean
  /** Paths through alternatives that can start alike (the engine may try each). */
  readonly ways: number
  readonly alternates: boolean
  readonly quantifies: boolean
}

/** The refusal of a parsed pattern whose shape can backtrack super-linearly (see `regexProblem`), or undefined. */
const shapeProblem = (root: RegexNode): string | undefined => {
  const positions: Array<Position> = []
  const position = (chars: Chars, zeroWidth: boolean, quantified?: string): Position => {
    const made = { chars, zeroWidth, quantified, follow: new Set<Position>() }
    positions.push(made)
    return made
  }
  const leaf = (at: Position, nullable: boolean, ways = 1): Shape => ({ first: [at], last: [at], nullable, ways, alternates: false, quantifies: false })
  const shape = (node: RegexNode): Shape => {
    switch (node.type) {
      case "char":
        return leaf(position(node.chars, false), false)
      case "assert": {
        const inner = node.inner === undefined ? undefined : shape(node.inner)
        if (inner?.quantifies) throw new Refused("quantifies inside a lookaround ((?=…), (?!…), (?<=…), (?<!…)), which can take polynomial time: use another rule (e.g. not_contains) instead")
        return leaf(position([], true), true, inner?.ways ?? 1)
      }
      case "repeat": {
        const from = positions.length
        const inner = shape(node.node)
        // An optional group (`(\.\d+)?`) is no loop: its parts keep their own positions, so what
        // follows is held against its quantified parts as in a sequence, and taking or skipping it
        // doubles the ways tried.
        if (inner.quantifies && node.max === 1) return { ...inner, nullable: node.min === 0 || inner.nullable, ways: inner.ways * 2 }
        if (inner.quantifies) {
          throw new Refused(`nests quantifiers in ${node.source} (e.g. (a+)+, (.*a){12}), which can take exponential time: quantify single characters or fixed text, e.g. (ab)+`)
        }
        if (inner.alternates) {
          throw new Refused(`quantifies a group with alternatives in ${node.source} (e.g. (a|b)*), which can take exponential time: use a class such as [ab]* or quantify fixed text`)
        }
        // The quantified text becomes one position: its loop has a single path, and its characters are any of the text's.
        const chars = union(positions.slice(from).map((at) => at.chars))
        const variable = node.max > node.min
        return { ...leaf(position(chars, false, variable ? node.source : undefined), node.min === 0 || inner.nullable, inner.ways), quantifies: variable }
      }
      case "seq":
        return node.items.map(shape).reduce<Shape>(
          (acc, next) => {
            for (const from of acc.last) for (const to of next.first) from.follow.add(to)
            return {
              first: acc.nullable ? [...acc.first, ...next.first] : acc.first,
              last: next.nullable ? [...acc.last, ...next.last] : next.last,
              nullable: acc.nullable && next.nullable,
              ways: acc.ways * next.ways,
              alternates: acc.alternates || next.alternates,
              quantifies: acc.quantifies || next.quantifies,
            }
          },
          { first: [], last: [], nullable: true, ways: 1, alternates: false, quantifies: false },
        )
      case "alt": {
        const branches = node.branches.map(shape)
        const starts = branches.map((b) => union(b.first.filter((at) => !at.zeroWidth).map((at) => at.chars)))
        // Past its first character a branch goes on only where that character is one it can start with:
        // the branches tried are those that can start alike (one that can match nothing is always tried).
        const alike = (x: number, y: number) =>
          branches[x]!.nullable || branches[y]!.nullable || intersection(starts[x]!, starts[y]!).length > 0
        return {
          first: branches.flatMap((b) => b.first),
          last: branches.flatMap((b) => b.last),
          nullable: branches.some((b) => b.nullable),
          ways: Math.max(...branches.map((_, x) => branches.reduce((n, b, y) => (alike(x, y) ? n + b.ways : n), 0))),
          alternates: true,
          quantifies: branches.some((b) => b.quantifies),
        }
      }
    }
  }
  const whole = shape(root)
  const loops = positions.filter((at) => at.quantified !== undefined)
  if (loops.length > REGEX_MAX_QUANTIFIED) return `has more than ${REGEX_MAX_QUANTIFIED} quantified parts: split it into several rules`
  const maxWays = loops.length > 0 ? REGEX_MAX_WAYS_WITH_LOOPS : REGEX_MAX_WAYS
  if (whole.ways > maxWays) {
    return `has alternatives that can start alike (e.g. (a|ab)) in more than ${maxWays} combinations${loops.length > 0 ? " with a quantified part" : ""}: make them start differently`
  }
  // Whether `to` can follow `from` through positions that can all match one of `chars` (or match nothing).
  const reaches = (from: Position, to: Position, chars: Chars): boolean => {
    const seen = new Set<Position>()
    const next = [...from.follow]
    for (let at = next.pop(); at !== undefined; at = next.pop()) {
      if (at === to) return true
      if (seen.has(at) || !(at.zeroWidth || intersection(at.chars, chars).length > 0)) continue
      seen.add(at)
      next.push(...at.follow)
    }
    return false
  }
  for (const a of loops) {
    for (const b of loops) {
      // A part nothing follows never backtracks: once it is reached the pattern has matched.
      if (a === b || b.follow.size === 0) continue
      const both = intersection(a.chars, b.chars)
      if (both.length > 0 && reaches(a, b, both)) {
        return `has ${a.quantified} then ${b.quantified}, which can match the same characters one after the other (polynomial time): make them exclusive (e.g. [^!]*! rather than .*!) or put between them a character neither matches`
      }
    }
  }
  return undefined
}

/**
 * Why a filter's regex is refused, or undefined. Tenants' regexes run on the delivery Worker
 * against every generation's text, on a backtracking engine: one pattern that backtracks
 * super-linearly pins the Worker and stops every tenant's delivery. So only patterns whose shape
 * cannot are accepted, a conservative check (a refused pattern has a simpler equivalent):
 * - a quantifier applies to one character (a literal, an escape such as `\d`, `.`, a class) or
 *   to fixed text (`(ab)+`, `(\d{3}-){2}`), never to a group with alternatives or another
 *   `*`, `+`, `?` or `{n,m}` (`(a|aa)+`, `(.*a){12}`: exponential);
 * - two quantified parts that can match a same character never follow one another with only
 *   such characters, or optional parts, between them (`\w*\w*`, `\d+\w+`, `\w+a\w+`: one
 *   polynomial degree per part); a part at the very end is exempt, as the match is found once
 *   it is reached (`.*error.*`);
 * - at most REGEX_MAX_QUANTIFIED quantified parts, alternatives that can start alike multiply
 *   to few ways (REGEX_MAX_WAYS), no quantifier in a lookaround, no backreference, no modifier.
 * What is left takes time linear in the text from each start position (times those few ways);
 * the Worker bounds the text (src/broadcast/filters.ts), which bounds the search over all of them.
 */
export const regexProblem = (pattern: string, maxLength = REGEX_MAX_LENGTH): string | undefined => {
  const checked = checkedRegex(pattern, maxLength)
  return "problem" in checked ? checked.problem : undefined
}

/** `regexProblem`'s verdict, with the parsed tree of a pattern it accepts (`regexReadsBounded` reads it again). */
const checkedRegex = (pattern: string, maxLength: number): { readonly problem: string } | { readonly root: RegexNode } => {
  if (pattern.length > maxLength) return { problem: `is longer than ${maxLength} characters` }
  try {
    new RegExp(pattern)
  } catch (e) {
    return { problem: `is not a valid regular expression (${(e as Error).message})` }
  }
  try {
    const root = parseRegex(pattern)
    const problem = shapeProblem(root)
    return problem === undefined ? { root } : { problem }
  } catch (e) {
    if (e instanceof Refused) return { problem: e.reason }
    throw e
  }
}

/** Longest text a match can span from one start position (Infinity: no bound). */
const spanOf = (node: RegexNode): number => {
  switch (node.type) {
    case "char":
      return 1
    case "assert":
      return 0
    case "seq":
      return node.items.reduce((sum, item) => sum + spanOf(item), 0)
    case "alt":
      return Math.max(0, ...node.branches.map(spanOf))
    case "repeat": {
      const inner = spanOf(node.node)
      return node.max === 0 || inner === 0 ? 0 : node.max * inner
    }
  }
}

/**
 * Whether a search for `pattern` (`RegExp#test`) reads a bounded stretch of text from each start
 * position, so that it takes time linear in the text whatever the text: the shape passes
 * `regexProblem` (few ways to try, no nested or overlapping loops) and a match spans at most
 * `maxSpan` characters. A quantifier at the very end counts its minimum: the search stops as
 * soon as that is met (`sk-[a-z0-9]+` reads `sk-` and one character). `.*secret` is not
 * bounded: each start position reads to the end of its line, quadratic in all.
 */
export const regexReadsBounded = (pattern: string, maxLength: number, maxSpan: number): boolean => {
  const checked = checkedRegex(pattern, maxLength)
  if ("problem" in checked) return false
  const root = checked.root
  const tail = (node: RegexNode): RegexNode =>
    node.type === "repeat" ? { ...node, max: node.min } : node.type === "seq" && node.items.length > 0 ? { ...node, items: [...node.items.slice(0, -1), tail(node.items[node.items.length - 1]!)] } : node
  return spanOf(tail(root)) <= maxSpan
}
