/** URLs that depend on the call (the model in the path), made once per config and key. */
import type { ProviderConfig } from "./types"

/**
 * A method's URL, made once per config, model and method: the same string each time, whose hash
 * the transport's origin lookup has already computed (see http.ts's urlOf).
 */
export const memoUrl = (cache: WeakMap<ProviderConfig, Map<string, string>>, config: ProviderConfig, key: string, make: () => string): string => {
  let byKey = cache.get(config)
  if (byKey === undefined) {
    byKey = new Map()
    cache.set(config, byKey)
  }
  let url = byKey.get(key)
  if (url === undefined) {
    url = make()
    byKey.set(key, url)
  }
  return url
}

export const trimSlash = (url: string): string => url.replace(/\/+$/, "")
