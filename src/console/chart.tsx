/** A uPlot chart of series over days (the Activity page's charts), sized to its container. */
import { useEffect, useRef } from "preact/hooks"
import uPlot from "uplot"
import "uplot/dist/uPlot.min.css"

export interface Series {
  readonly label: string
  readonly values: ReadonlyArray<number>
  readonly color: string
  /** Drawn as bars (counts) rather than a line. */
  readonly bars?: boolean
  readonly format?: (n: number) => string
  /** The y axis's labels (short), when not `format`. */
  readonly axis?: (n: number) => string
}

export const DayChart = ({ title, days, series }: { title: string; days: ReadonlyArray<string>; series: ReadonlyArray<Series> }) => {
  const box = useRef<HTMLDivElement>(null)
  useEffect(() => {
    const el = box.current
    if (el === null) return
    const width = () => Math.max(240, el.clientWidth)
    const xs = days.map((d) => Date.parse(`${d}T00:00:00Z`) / 1000)
    const bars = uPlot.paths.bars?.({ size: [0.6, 40] })
    const plot = new uPlot(
      {
        title,
        width: width(),
        height: 220,
        tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"),
        scales: { x: { time: true } },
        axes: [{}, { size: 76, values: (_u, ticks) => ticks.map((t) => (series[0]?.axis ?? series[0]?.format ?? String)(t)) }],
        series: [
          {},
          ...series.map((s) => ({
            label: s.label,
            stroke: s.color,
            fill: s.bars ? s.color : `${s.color}22`,
            width: 2,
            ...(s.bars && bars ? { paths: bars, points: { show: false } } : {}),
            value: (_u: uPlot, v: number | null) => (v == null ? "—" : (s.format ?? String)(v)),
          })),
        ],
      },
      [xs, ...series.map((s) => [...s.values])],
      el,
    )
    const resize = new ResizeObserver(() => plot.setSize({ width: width(), height: 220 }))
    resize.observe(el)
    return () => {
      resize.disconnect()
      plot.destroy()
    }
  }, [title, days, series])
  return <div class="chart" ref={box} role="img" aria-label={`${title}, per day`} />
}
