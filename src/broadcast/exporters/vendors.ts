/** The vendor kinds' exporters (a placeholder: branch `exporters` replaces this file with its list). */
import type { Exporter } from "../exporter.js"

export const VENDOR_EXPORTERS: ReadonlyArray<Exporter> = []
