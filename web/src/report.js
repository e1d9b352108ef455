// Draws the charts of stepprof's HTML report (src/render/html.cpp writes the page).
//
// The page holds its data as JSON in <script type="application/json" id="stepprof-data">
// and one empty element per chart, marked data-chart="<kind>"; this script draws each
// of them with Apache ECharts. It computes no figures: every value comes from the
// analyses (include/stepprof/analysis/series.hpp); here they are only placed and labelled.
// Names from the logs reach the page only as text: ECharts draws legends and axes on a
// canvas, and the tooltips below escape every name before building their HTML.
import * as echarts from 'echarts/core';
import { BarChart, HeatmapChart, LineChart } from 'echarts/charts';
import {
  DataZoomComponent,
  GridComponent,
  LegendComponent,
  TooltipComponent,
  VisualMapComponent,
} from 'echarts/components';
import { CanvasRenderer } from 'echarts/renderers';

echarts.use([BarChart, HeatmapChart, LineChart, DataZoomComponent, GridComponent, LegendComponent,
  TooltipComponent, VisualMapComponent, CanvasRenderer]);

const HTML_ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
/** Escapes text for use inside HTML. */
export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]);
}

function number(v, digits = 1) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '–';
  return v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}
const ms = (v) => (v === null || v === undefined ? '–' : `${number(v, Math.abs(v) < 10 ? 2 : 1)} ms`);
const percent = (v) => (v === null || v === undefined ? '–' : `${number(v * 100, 1)} %`);

// Tooltip for charts whose x axis is the optimizer update (step).
function axisTooltip(formatValue) {
  return {
    trigger: 'axis',
    confine: true,
    formatter(params) {
      const list = Array.isArray(params) ? params : [params];
      if (list.length === 0) return '';
      const axisValue = list[0].axisValue;
      const step = typeof axisValue === 'number' ? Math.round(axisValue) : axisValue;
      const rows = list
        .filter((p) => {
          const v = Array.isArray(p.value) ? p.value[1] : p.value;
          return v !== null && v !== undefined;
        })
        .map((p) => {
          const v = Array.isArray(p.value) ? p.value[1] : p.value;
          return `${p.marker}${escapeHtml(p.seriesName)}: <b>${escapeHtml(formatValue(v))}</b>`;
        });
      return [`step ${escapeHtml(step)}`, ...rows].join('<br>');
    },
  };
}

function zoom(points) {
  return points > 60 ? [{ type: 'inside' }, { type: 'slider', height: 18, bottom: 4 }] : [];
}

// Kenneth Kelly's 20 colours of maximum contrast (white and black left out), so that the
// parts of a stacked chart stay apart.
const PALETTE = ['#0067a5', '#f38400', '#8db600', '#be0032', '#a1caf1', '#875692', '#f3c300', '#848482',
  '#008856', '#e68fac', '#c2b280', '#604e97', '#f99379', '#f6a600', '#b3446c', '#dcd300', '#882d17', '#654522',
  '#e25822', '#2b3d26'];

function base(points) {
  return {
    animation: false,
    color: PALETTE,
    grid: { left: 64, right: 24, top: 48, bottom: points > 60 ? 64 : 40, containLabel: false },
    legend: { type: 'scroll', top: 0 },
    dataZoom: zoom(points),
  };
}

function stepAxis(steps) {
  return { type: 'category', name: 'step', nameLocation: 'middle', nameGap: 26, data: steps.map(String) };
}

// `zero`: the axis starts at 0 (stacked and fraction charts); otherwise it fits the data,
// so that the variation from update to update shows.
function valueAxis(name, formatter, zero = true) {
  return { type: 'value', name, nameGap: 12, axisLabel: formatter ? { formatter } : {}, scale: !zero };
}

// Cross-rank line chart over steps: one line per rank. `key` names the per-update array.
function perRankLines(data, key, yName, format, axisFormat, zero) {
  const series = data.ranks.map((r) => ({
    name: r.label,
    type: 'line',
    showSymbol: r.steps.length <= 200,
    connectNulls: false,
    data: r.steps.map((s, i) => [s, r[key][i]]),
  }));
  const points = data.steps.length;
  // Fitted to the steps; one step (a profiler trace of one) is put in the middle, where
  // an axis fitted to it drew the points on the plot's right edge.
  const one = points === 1 ? data.steps[0] : null;
  return {
    ...base(points),
    tooltip: axisTooltip(format),
    xAxis: { type: 'value', name: 'step', nameLocation: 'middle', nameGap: 26, minInterval: 1,
      min: one === null ? 'dataMin' : one - 1, max: one === null ? 'dataMax' : one + 1 },
    yAxis: valueAxis(yName, axisFormat, zero),
    series,
  };
}

function updateTimeChart(data) {
  return perRankLines(data, 'wall_ms', 'ms', ms, undefined, false);
}

function paddingChart(data) {
  // Decimals where the padding is small: under 1 % every tick read "0 %" (a helper's logs
  // of 0.1 to 0.3 % padding).
  let hi = 0;
  for (const r of data.ranks) for (const v of r.padding_fraction) if (v !== null) hi = Math.max(hi, v);
  const digits = hi >= 0.05 ? 0 : hi >= 0.005 ? 1 : 2;
  return perRankLines(data, 'padding_fraction', 'padding', percent, (v) => `${(v * 100).toFixed(digits)} %`, true);
}

function regionsChart(data, rankIndex, levelIndex) {
  const rank = data.ranks[rankIndex];
  const cut = rank.breakdowns[levelIndex];
  const series = cut.parts.map((p) => ({
    name: p.label,
    type: cut.stacked ? 'bar' : 'line',
    stack: cut.stacked ? 'update' : undefined,
    barCategoryGap: '20%',
    showSymbol: !cut.stacked && rank.steps.length <= 200,
    data: p.ms,
  }));
  series.push({
    name: 'update (wall_ms)',
    type: 'line',
    showSymbol: rank.steps.length === 1,  // (one point makes no line: a trace of one ProfilerStep)
    lineStyle: { type: 'dashed', width: 1.5, color: '#333' },
    itemStyle: { color: '#333' },
    data: rank.wall_ms,
  });
  const options = base(rank.steps.length);
  return {
    ...options,
    // Many parts: the legend goes on the right, one per line.
    legend: { type: 'scroll', orient: 'vertical', right: 0, top: 8, bottom: 8,
      textStyle: { width: 200, overflow: 'truncate' } },
    grid: { ...options.grid, top: 32, right: 250 },
    tooltip: axisTooltip(ms),
    xAxis: stepAxis(rank.steps),
    yAxis: valueAxis('ms'),
    series,
  };
}

function pathsChart(data, rankIndex, groupIndex) {
  const rank = data.ranks[rankIndex];
  const group = rank.paths[groupIndex];
  const series = group.paths.map((p) => ({
    name: p.label,
    type: 'line',
    connectNulls: false,
    symbolSize: 7,
    data: p.ms_per_unit,
  }));
  return {
    ...base(rank.steps.length),
    tooltip: axisTooltip((v) => `${number(v, 2)} ms per ${group.unit}`),
    xAxis: stepAxis(rank.steps),
    yAxis: valueAxis(`ms per ${group.unit}`, undefined, false),
    series,
  };
}

// Measured and predicted update time per step (stepprof whatif; src/render/html.cpp).
function whatifChart(data) {
  const w = data.whatif;
  const series = w.series.map((s, i) => ({
    name: s.label,
    type: 'line',
    showSymbol: w.steps.length <= 200,
    lineStyle: i === 0 ? { width: 2.5, color: '#333' } : { type: 'dashed' },
    itemStyle: i === 0 ? { color: '#333' } : undefined,
    data: s.ms,
  }));
  return {
    ...base(w.steps.length),
    tooltip: axisTooltip(ms),
    xAxis: stepAxis(w.steps),
    yAxis: valueAxis('ms', undefined, false),
    series,
  };
}

function heatmapChart(data, matrixIndex) {
  const m = data.matrices[matrixIndex];
  const cells = [];
  let lo = Infinity;
  let hi = -Infinity;
  m.values.forEach((row, y) => row.forEach((v, x) => {
    if (v === null) return;
    cells.push([x, y, v]);
    lo = Math.min(lo, v);
    hi = Math.max(hi, v);
  }));
  if (cells.length === 0) { lo = 0; hi = 1; }
  // (Rows are every rank, or groups of ranks_per_row consecutive ranks beyond 256 ranks;
  // data.ranks may hold only the ranks the per-rank charts show.)
  const labels = m.labels || data.ranks.map((r) => r.label);
  return {
    animation: false,
    // (bottom: room for the step axis's title above the colour scale and its handles'
    // values, which sat on the same line at 80.)
    grid: { left: 90, right: 24, top: 16, bottom: 104 },
    tooltip: {
      confine: true,
      formatter(p) {
        const [x, y, v] = p.value;
        const of = m.ranks_per_row > 1 ? ' (the largest of these ranks)' : '';
        return `${escapeHtml(labels[y])}, step ${escapeHtml(data.steps[x])}: <b>${escapeHtml(ms(v))}</b>${of}`;
      },
    },
    xAxis: { ...stepAxis(data.steps), splitArea: { show: true } },
    // (With hundreds of ranks the labels would overlap: ECharts then shows every n-th.)
    yAxis: { type: 'category', data: labels, inverse: true, splitArea: { show: true }, axisLabel: { hideOverlap: true } },
    // (Decimals on the scale's ends where the range is narrow: 12.509 to 19.901 ms read "13 ... 20".)
    visualMap: { min: lo, max: hi, precision: hi - lo < 10 ? 2 : hi - lo < 100 ? 1 : 0, calculable: true,
      orient: 'horizontal', left: 'center', bottom: 0,
      itemHeight: 160, text: ['ms', ''], inRange: { color: ['#f7fbff', '#6baed6', '#08306b'] } },
    dataZoom: data.steps.length > 60 ? [{ type: 'inside', xAxisIndex: 0 }] : [],
    series: [{ type: 'heatmap', data: cells, progressive: 0 }],
  };
}

function fillSelect(select, labels, selected = 0) {
  select.replaceChildren(...labels.map((label, i) => {
    const o = document.createElement('option');
    o.value = String(i);
    o.textContent = label;
    o.selected = i === selected;
    return o;
  }));
}

function draw() {
  const source = document.getElementById('stepprof-data');
  if (!source) throw new Error('stepprof: the page has no chart data');
  const data = JSON.parse(source.textContent);
  const charts = new Map();
  const show = (el, option) => {
    let chart = charts.get(el.dataset.chart);
    if (!chart) {
      chart = echarts.init(el, null, { renderer: 'canvas' });
      charts.set(el.dataset.chart, chart);
    }
    chart.setOption(option, true);
  };

  const drawOne = (el) => {
    const kind = el.dataset.chart;
    const box = el.closest('figure') ?? el.parentElement;
    const rankSelect = box.querySelector('select[data-control="rank"]');
    const levelSelect = box.querySelector('select[data-control="level"]');
    if (rankSelect) fillSelect(rankSelect, data.ranks.map((r) => r.label));
    const rankIndex = () => (rankSelect ? Number(rankSelect.value) : 0);

    if (kind === 'update-time') {
      show(el, updateTimeChart(data));
    } else if (kind === 'padding') {
      show(el, paddingChart(data));
    } else if (kind === 'whatif') {
      if (!data.whatif) throw new Error('stepprof: no data for chart whatif');
      show(el, whatifChart(data));
    } else if (kind.startsWith('heatmap-')) {
      const i = data.matrices.findIndex((m) => `heatmap-${m.id}` === kind);
      if (i < 0) throw new Error(`stepprof: no data for chart ${kind}`);
      show(el, heatmapChart(data, i));
    } else if (kind === 'regions') {
      const levels = () => data.ranks[rankIndex()].breakdowns.map((b) => b.label);
      const level = () => (levelSelect ? Number(levelSelect.value) : data.ranks[rankIndex()].breakdowns.length - 1);
      const redraw = () => show(el, regionsChart(data, rankIndex(), level()));
      // The deepest cut by default: every leaf and every parent's exclusive time.
      if (levelSelect) fillSelect(levelSelect, levels(), levels().length - 1);
      if (rankSelect) rankSelect.addEventListener('change', redraw);
      if (levelSelect) levelSelect.addEventListener('change', redraw);
      redraw();
    } else if (kind.startsWith('paths-')) {
      const g = Number(kind.slice('paths-'.length));
      if (!(g >= 0 && g < data.ranks[0].paths.length)) throw new Error(`stepprof: no data for chart ${kind}`);
      const redraw = () => show(el, pathsChart(data, rankIndex(), g));
      if (rankSelect) rankSelect.addEventListener('change', redraw);
      redraw();
    } else {
      throw new Error(`stepprof: unknown chart ${kind}`);
    }
  };
  // One chart that cannot be drawn says so in its place; the others are still drawn (a
  // throw here left every later chart empty).
  for (const el of document.querySelectorAll('[data-chart]')) {
    try {
      drawOne(el);
    } catch (e) {
      console.error(e);
      el.textContent = `This chart could not be drawn: ${e.message}`;
    }
  }
  window.addEventListener('resize', () => charts.forEach((c) => c.resize()));
  // For tests and the curious: the chart instances by data-chart name.
  window.stepprofCharts = charts;
}

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', draw);
else draw();
